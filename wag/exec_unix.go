//go:build unix

package wag

import (
	"os/exec"
	"syscall"
)

// setProcessGroup runs the command in a process group of its own, so that
// cancellation reaches every process it starts.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// killGroup signals the process group led by pid: SIGTERM, or SIGKILL when
// hard. A group that is already gone is not an error.
func killGroup(pid int, hard bool) {
	sig := syscall.SIGTERM
	if hard {
		sig = syscall.SIGKILL
	}
	_ = syscall.Kill(-pid, sig)
}
