//go:build !linux

// Package childproc makes the processes a program starts die with it: the
// nodes of a bench, the nodes and workers of a test run, when the program
// is killed, panics, or dies on a closed pipe before it can stop them. It
// also starts them confined to CPUs, so that a benchmark can give the node
// it measures and the nodes beside it CPUs of their own (StartOn, Halves).
package childproc

import "os/exec"

// DieWithParent does nothing: only Linux has a parent-death signal, and
// elsewhere a child outlives a parent killed before it stops it.
func DieWithParent(*exec.Cmd) {}
