//go:build !unix

package wag

import (
	"os"
	"os/exec"
)

// setProcessGroup is a no-op where process groups do not exist.
func setProcessGroup(*exec.Cmd) {}

// killGroup kills the process itself where process groups do not exist.
func killGroup(pid int, _ bool) {
	if p, err := os.FindProcess(pid); err == nil {
		_ = p.Kill()
	}
}
