//go:build !linux

package childproc

import (
	"errors"
	"os/exec"
)

// AllowedCPUs fails: only Linux confines processes to CPUs here.
func AllowedCPUs() ([]int, error) {
	return nil, errors.New("confining processes to CPUs needs Linux")
}

// StartOn starts cmd, to die with this process where the system can do
// that (DieWithParent); cpus must be empty.
func StartOn(cmd *exec.Cmd, cpus []int) error {
	if len(cpus) > 0 {
		return errors.New("confining processes to CPUs needs Linux")
	}
	DieWithParent(cmd)
	return cmd.Start()
}
