package childproc

import "fmt"

// Halves splits the CPUs this process may run on into a first and a second
// half: a benchmark runs the node it measures on one and the nodes beside
// it on the other, as if they were on machines of their own.
func Halves() (first, second []int, err error) {
	cpus, err := AllowedCPUs()
	if err != nil {
		return nil, nil, err
	}
	if len(cpus) < 2 {
		return nil, nil, fmt.Errorf("this process may run on %d CPU, two halves need at least 2", len(cpus))
	}
	return cpus[:len(cpus)/2], cpus[len(cpus)/2:], nil
}
