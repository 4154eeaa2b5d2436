package e2e_test

import (
	"os/exec"
	"syscall"
)

// dieWithTest makes cmd's process die with the test binary, so a test run
// that panics or times out leaves no node or worker behind (t.Cleanup
// never runs then). The kernel signals the child when the thread that
// forked it ends; Go ends a thread only with a goroutine that locked it,
// which a test's goroutine does not.
func dieWithTest(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}
