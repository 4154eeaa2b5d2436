package wag

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
)

// Entries of ExecPolicy.Allow that stand alone.
const (
	// ExecAllowAny allows any program.
	ExecAllowAny = "*"
	// ExecAllowNone allows no program: the node runs no exec attempt.
	ExecAllowNone = "none"
)

// ExecPolicy bounds the exec action on a node (robonode --exec-allow and
// --exec-user). The zero value runs any program as the node's own user.
type ExecPolicy struct {
	// Allow lists the programs exec may run: absolute paths or globs
	// (path.Match syntax: `*` matches within one path element, so
	// /opt/tools/* does not reach into /opt/tools/sub/), matched against
	// the absolute path of the program an attempt names. A bare name (sh)
	// is first looked up in the node's PATH, as exec itself does, and a
	// relative path (./run.sh) is taken from the attempt's directory;
	// symlinks are not followed, so allowing /usr/bin/python3 allows
	// whatever that link points at, and the path is matched as PATH lookup
	// gives it (/usr/bin/sh and /bin/sh are two entries). ExecAllowAny
	// ("*") alone allows any program and ExecAllowNone ("none") alone
	// none. Empty: see Required.
	Allow []string
	// Required makes a policy necessary: with Allow empty every program is
	// refused. A node that listens beyond loopback sets it, so that it
	// runs nothing its operator did not name. Without it an empty Allow
	// allows any program (a node only its own machine can reach).
	Required bool
	// User, when set, runs the programs as this user (a name, or a numeric
	// uid): its uid, primary and supplementary groups, HOME, USER and
	// LOGNAME, and its home directory as the working directory of
	// attempts that give none ("/" when the home is not a directory). A
	// node may switch only when it runs as root (or as that user).
	User string
}

// ErrExecRefused is wrapped by the error of an exec attempt the node's
// ExecPolicy does not allow. The refusal is the node's: the attempt fails
// like any other and is retried by its task's retry policy, which may
// land it on a node whose policy allows the program.
var ErrExecRefused = errors.New("exec refused")

// Validate checks the policy's entries; its user is looked up when the
// node's worker host is built.
func (p ExecPolicy) Validate() error {
	var errs []error
	for _, a := range p.Allow {
		switch {
		case a == ExecAllowAny || a == ExecAllowNone:
			if len(p.Allow) > 1 {
				errs = append(errs, fmt.Errorf("exec-allow %q stands alone, but it is given with %s: give either %q or the programs", a, strings.Join(p.Allow, ", "), a))
			}
		case !strings.HasPrefix(a, "/"):
			errs = append(errs, fmt.Errorf("exec-allow %q: want an absolute path or glob such as /usr/bin/curl or '/opt/tools/*' (or * for any program, none for none); "+
				"a bare program name is looked up in the node's PATH before it is matched, so allow the path it resolves to (command -v %s)", a, a))
		default:
			if _, err := path.Match(a, ""); err != nil {
				errs = append(errs, fmt.Errorf("exec-allow %q: not a valid glob (path.Match syntax: *, ?, [a-z], \\ escapes)", a))
			} else if c := path.Clean(a); c != a {
				errs = append(errs, fmt.Errorf("exec-allow %q: programs are matched by their clean path; write %q", a, c))
			}
		}
	}
	if strings.ContainsAny(p.User, "\x00\n") {
		errs = append(errs, errors.New("exec-user: not a user name"))
	}
	return errors.Join(errs...)
}

// execRules are a node's ExecPolicy as the exec action applies it.
type execRules struct {
	node     string
	allow    []string // the globs; empty with any or closed
	any      bool     // any program: "*", or no policy where none is required
	none     bool     // "none"
	required bool     // closed because no policy was given where one is required
	user     *execUser
}

// newExecRules compiles a validated policy; the user comes looked up.
func newExecRules(node string, p ExecPolicy, u *execUser) *execRules {
	r := &execRules{node: node, user: u}
	switch {
	case len(p.Allow) == 0:
		r.any, r.required = !p.Required, p.Required
	case p.Allow[0] == ExecAllowAny:
		r.any = true
	case p.Allow[0] == ExecAllowNone:
		r.none = true
	default:
		r.allow = p.Allow
	}
	return r
}

// allows reports whether the program at program (absolute, clean) may run.
func (r *execRules) allows(program string) bool {
	if r.any {
		return true
	}
	for _, pattern := range r.allow {
		if ok, _ := path.Match(pattern, program); ok { // validated
			return true
		}
	}
	return false
}

// admit decides whether an attempt may run the program it names (argv[0])
// with dir (the attempt's, or the user's) as its working directory. It
// returns the program's absolute path to run, "" for "look it up as
// exec.Command does" (any program is allowed, nothing to match), or an
// error: ErrExecRefused, or the program cannot be found.
func (r *execRules) admit(name, dir string) (string, error) {
	if r == nil || r.any {
		return "", nil
	}
	if r.required {
		return "", fmt.Errorf("%w on node %s: this node has no exec policy and listens beyond loopback, so it runs no program (the attempt asked for %s); "+
			"start it with --exec-allow PATH|GLOB (repeatable) naming the programs it may run, or --exec-allow '*' for any",
			ErrExecRefused, r.node, name)
	}
	if r.none {
		return "", fmt.Errorf("%w on node %s: its policy is --exec-allow none, so it runs no program (the attempt asked for %s); run the task on another node, or give %s an --exec-allow policy naming the program",
			ErrExecRefused, r.node, name, r.node)
	}
	program, err := resolveProgram(name, dir)
	if err != nil {
		return "", err
	}
	if !r.allows(program) {
		shown := program
		if program != name {
			shown = name + " (" + program + ")"
		}
		return "", fmt.Errorf("%w on node %s: %s is not allowed by this node's --exec-allow policy (it allows: %s); add it with --exec-allow %s on %s",
			ErrExecRefused, r.node, shown, strings.Join(r.allow, ", "), program, r.node)
	}
	return program, nil
}

// resolveProgram returns the absolute path of the program an attempt
// names: a bare name looked up in the node's PATH (as exec.Command does),
// a relative path taken from dir (or the node's working directory).
func resolveProgram(name, dir string) (string, error) {
	if !strings.Contains(name, "/") {
		p, err := exec.LookPath(name)
		switch {
		case errors.Is(err, exec.ErrNotFound):
			return "", notFound(name)
		case err != nil:
			return "", fmt.Errorf("exec: %w", err)
		}
		name = p
	}
	if filepath.IsAbs(name) {
		return filepath.Clean(name), nil
	}
	if dir == "" || !filepath.IsAbs(dir) {
		wd, err := os.Getwd()
		if err != nil {
			return "", fmt.Errorf("exec: resolving %s: %w", name, err)
		}
		dir = filepath.Join(wd, dir)
	}
	return filepath.Join(dir, name), nil
}

// notFound is the error of a program that is not in the node's PATH.
func notFound(name string) error {
	return fmt.Errorf("exec: program %q not found in PATH (%s): give its full path or install it on this node", name, os.Getenv("PATH"))
}
