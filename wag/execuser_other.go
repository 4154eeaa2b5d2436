//go:build !unix

package wag

import (
	"fmt"
	"os/exec"
)

// execUser is the user exec'd programs run as (ExecPolicy.User): never
// set where users cannot be switched.
type execUser struct {
	name, home, workdir string
}

func lookupExecUser(name string) (*execUser, error) {
	return nil, fmt.Errorf("exec-user %q: running programs as another user is not supported on this system", name)
}

func (*execUser) runAs(*exec.Cmd) {}
