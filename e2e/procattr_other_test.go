//go:build !linux

package e2e_test

import "os/exec"

// dieWithTest: only Linux has a parent-death signal; elsewhere a child of
// a test run that panics or times out outlives it.
func dieWithTest(*exec.Cmd) {}
