// Package childproc makes the processes a program starts die with it: the
// nodes of a bench, the nodes and workers of a test run, when the program
// is killed, panics, or dies on a closed pipe before it can stop them. It
// also starts them confined to CPUs, so that a benchmark can give the node
// it measures and the nodes beside it CPUs of their own (StartOn, Halves).
package childproc

import (
	"os/exec"
	"syscall"
)

// DieWithParent has the kernel kill cmd's process (SIGKILL) when the thread
// that starts it ends. Go ends a thread only when a goroutine that locked
// it returns without unlocking it, so a start from any other goroutine
// ties the child to the process.
func DieWithParent(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}
