// Package access says who a caller is and what its role lets it do: the
// roles of API tokens, the token file that names them, and the principal a
// node's API attaches to every call it lets in.
//
// Roles are ordered for clients — read < submit < operate < admin — each
// allowing everything the one below it does. The worker role stands apart:
// it may only serve capabilities (WorkerService), and admin may do that
// too. Which role each RPC needs is the node's table (node/access.go); this
// package holds no knowledge of the API.
package access

import (
	"context"
	"fmt"
	"path"
	"strings"
)

// Role is what a token may do.
type Role uint8

// The roles, from least to most for clients; Worker is apart.
const (
	// None is no role: a call that needs one is refused.
	None Role = iota
	// Read may get, list and watch instances, read logs and the mesh's
	// views (members, Wagglers, trust, partitions).
	Read
	// Submit may read, submit workflows, signal instances and publish
	// events.
	Submit
	// Operate may submit, cancel, retry, pause and resume instances and
	// manage schedules.
	Operate
	// Admin may do everything: register workflows, quarantine nodes,
	// manage the keyring, read the audit trail, serve any capability.
	Admin
	// Worker may only serve the capabilities its token names
	// (WorkerService).
	Worker
)

var roleNames = [...]string{None: "none", Read: "read", Submit: "submit", Operate: "operate", Admin: "admin", Worker: "worker"}

func (r Role) String() string {
	if int(r) < len(roleNames) {
		return roleNames[r]
	}
	return fmt.Sprintf("role(%d)", r)
}

// ParseRole reads a role's name.
func ParseRole(s string) (Role, error) {
	for r, name := range roleNames {
		if r != int(None) && name == s {
			return Role(r), nil
		}
	}
	return None, fmt.Errorf("unknown role %q: want read, submit, operate, admin or worker", s)
}

// Allows reports whether a caller of role r may make a call that needs
// role need: the client roles include those below them, admin includes
// worker, and worker includes nothing else.
func (r Role) Allows(need Role) bool {
	switch {
	case need == None:
		return true
	case r == need:
		return true
	case r == Admin:
		return true
	case r == Worker || need == Worker:
		return false
	}
	return r > need
}

// Principal is who a call comes from, as the node's API let it in.
type Principal struct {
	// Name is the token's name (name=), a node's name for calls from
	// other nodes, or "anonymous" on a node without tokens. Never the
	// token itself.
	Name string
	// Role is what it may do.
	Role Role
	// Workflows, when set, are the workflow names it may act on (globs,
	// path.Match syntax: billing-*); empty: every workflow.
	Workflows []string
	// Capabilities, for a worker token, are the capabilities it may serve
	// (globs); empty: every capability (admin).
	Capabilities []string
	// Node is set for calls from another node of the mesh (by its
	// certificate): they act for a client the first node let in.
	Node bool
}

// Anonymous is the principal of every call on a node without API tokens:
// its port is open to whoever reaches it (loopback, or --insecure).
var Anonymous = &Principal{Name: "anonymous", Role: Admin}

// MayWorkflow reports whether p may act on the workflow called name.
func (p *Principal) MayWorkflow(name string) bool { return matchAny(p.Workflows, name) }

// MayCapability reports whether p may serve the capability called name.
func (p *Principal) MayCapability(name string) bool { return matchAny(p.Capabilities, name) }

// Scoped reports whether p may act on some workflows only.
func (p *Principal) Scoped() bool { return len(p.Workflows) > 0 }

// matchAny reports whether name matches one of globs; no globs match all.
func matchAny(globs []string, name string) bool {
	if len(globs) == 0 {
		return true
	}
	for _, g := range globs {
		if ok, _ := path.Match(g, name); ok {
			return true
		}
	}
	return false
}

// String describes p for logs and errors: its name and role, never a
// token.
func (p *Principal) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (role %s", p.Name, p.Role)
	if len(p.Workflows) > 0 {
		fmt.Fprintf(&b, ", workflows %s", strings.Join(p.Workflows, ","))
	}
	if len(p.Capabilities) > 0 {
		fmt.Fprintf(&b, ", capabilities %s", strings.Join(p.Capabilities, ","))
	}
	b.WriteByte(')')
	return b.String()
}

type principalKey struct{}

// NewContext returns ctx carrying p.
func NewContext(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// FromContext returns the principal a node's API attached to a call's
// context; ok is false when there is none (a call that did not come
// through the API's interceptors, e.g. in-process).
func FromContext(ctx context.Context) (p *Principal, ok bool) {
	p, ok = ctx.Value(principalKey{}).(*Principal)
	return p, ok && p != nil
}
