//go:build unix

package wag

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"syscall"
)

// execUser is the user exec'd programs run as (ExecPolicy.User).
type execUser struct {
	name    string
	uid     uint32
	gid     uint32
	groups  []uint32
	home    string
	workdir string // home when it is a directory, else "/"
	// switches is false when the user is the node's own: nothing to
	// change (and a node that is not root could not set the groups).
	switches bool
}

// lookupExecUser looks name (or a numeric uid) up in the user database
// and checks that this process may run programs as that user.
func lookupExecUser(name string) (*execUser, error) {
	u, err := user.Lookup(name)
	if err != nil {
		if _, numeric := strconv.ParseUint(name, 10, 32); numeric == nil {
			u, err = user.LookupId(name)
		}
	}
	if err != nil {
		var unknown user.UnknownUserError
		var unknownID user.UnknownUserIdError
		if errors.As(err, &unknown) || errors.As(err, &unknownID) {
			return nil, fmt.Errorf("exec-user %q: no such user on this machine", name)
		}
		return nil, fmt.Errorf("exec-user %q: %w", name, err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("exec-user %q: uid %q or gid %q is not a number: %w", name, u.Uid, u.Gid, err)
	}
	x := &execUser{name: u.Username, uid: uint32(uid), gid: uint32(gid), home: u.HomeDir, workdir: "/"}
	if err := canSwitchTo(os.Geteuid(), x.uid, x.name); err != nil {
		return nil, err
	}
	x.switches = os.Geteuid() != int(x.uid) || os.Getegid() != int(x.gid)
	if x.switches {
		ids, err := u.GroupIds() // the primary group among them, as initgroups gives
		if err != nil {
			return nil, fmt.Errorf("exec-user %q: its groups: %w", name, err)
		}
		for _, id := range ids {
			if g, err := strconv.ParseUint(id, 10, 32); err == nil {
				x.groups = append(x.groups, uint32(g))
			}
		}
	}
	if fi, err := os.Stat(x.home); err == nil && fi.IsDir() {
		x.workdir = x.home
	}
	return x, nil
}

// canSwitchTo says whether a process running as euid may run programs as
// uid: root may, and any user may run them as itself.
func canSwitchTo(euid int, uid uint32, name string) error {
	if euid == 0 || euid == int(uid) {
		return nil
	}
	return fmt.Errorf("exec-user %s: this node runs as uid %d, and only a node running as root may run programs as another user (uid %d): "+
		"start the node as root, or as %s, or without --exec-user", name, euid, uid, name)
}

// runAs makes cmd run as u.
func (u *execUser) runAs(cmd *exec.Cmd) {
	if u == nil || !u.switches {
		return
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Credential = &syscall.Credential{Uid: u.uid, Gid: u.gid, Groups: u.groups}
}
