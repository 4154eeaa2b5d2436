package childproc

import (
	"fmt"
	"os/exec"
	"runtime"

	"golang.org/x/sys/unix"
)

// AllowedCPUs lists the CPUs this process may run on.
func AllowedCPUs() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("reading this process's CPU affinity: %w", err)
	}
	var cpus []int
	for c := range 1024 { // unix.CPUSet holds 1,024
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}

// StartOn starts cmd confined to cpus (all of this process's when empty),
// to die with this process (DieWithParent): a bench or test killed in the
// middle of a run (by a signal, or by a closed pipe on its output) leaves
// no nodes behind. The thread that starts it is unlocked again, and so
// lives on.
//
// A child inherits the CPU mask of the thread that forks it, and os/exec
// forks on the calling goroutine's thread: so the thread is locked, given
// the mask for the fork, and given its own back. Every thread of the child
// has the mask from its first instruction (Go sizes GOMAXPROCS by it),
// which setting it on a running process would not give.
func StartOn(cmd *exec.Cmd, cpus []int) error {
	DieWithParent(cmd)
	if len(cpus) == 0 {
		return cmd.Start()
	}
	var want, old unix.CPUSet
	for _, c := range cpus {
		want.Set(c)
	}
	runtime.LockOSThread()
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("reading the CPU affinity: %w", err)
	}
	if err := unix.SchedSetaffinity(0, &want); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("confining a process to CPUs %v: %w", cpus, err)
	}
	if err := cmd.Start(); err != nil {
		if unix.SchedSetaffinity(0, &old) == nil {
			runtime.UnlockOSThread()
		} // else the thread stays locked and ends with its goroutine, mask and all
		return err
	}
	if err := unix.SchedSetaffinity(0, &old); err != nil {
		// The thread keeps the wrong mask, so it must end with its
		// goroutine (it stays locked), and the child dies with it: stop
		// the child now rather than at some later moment.
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return fmt.Errorf("restoring the CPU affinity after starting a process: %w", err)
	}
	runtime.UnlockOSThread()
	return nil
}
