//go:build !linux

package bench

import (
	"errors"
	"os/exec"
)

func allowedCPUs() ([]int, error) {
	return nil, errors.New("confining processes to CPUs needs Linux")
}

// startOn starts cmd. Only Linux has a parent-death signal: elsewhere the
// nodes of a bench killed mid-run outlive it.
func startOn(cmd *exec.Cmd, cpus []int) error {
	if len(cpus) > 0 {
		return errors.New("confining processes to CPUs needs Linux")
	}
	return cmd.Start()
}
