//go:build !linux

package bench

import (
	"errors"
	"os/exec"

	"github.com/robonet/robonet/internal/childproc"
)

func allowedCPUs() ([]int, error) {
	return nil, errors.New("confining processes to CPUs needs Linux")
}

// startOn starts cmd, to die with this process where the system can do
// that (childproc).
func startOn(cmd *exec.Cmd, cpus []int) error {
	if len(cpus) > 0 {
		return errors.New("confining processes to CPUs needs Linux")
	}
	childproc.DieWithParent(cmd)
	return cmd.Start()
}
