package access

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"path"
	"regexp"
	"strings"
)

// MinTokenBytes is the shortest API token accepted: a token is a secret,
// not a password to remember.
const MinTokenBytes = 16

// ErrTokenFile wraps every error of a token file.
var ErrTokenFile = errors.New("invalid API token file")

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// Tokens is a set of API tokens, kept as SHA-256 digests with the
// principal each names; the tokens themselves are not kept.
type Tokens struct {
	digests    [][sha256.Size]byte
	principals []*Principal
}

// Len is the number of tokens.
func (t *Tokens) Len() int { return len(t.digests) }

// Names are the tokens' names, in the file's order.
func (t *Tokens) Names() []string {
	names := make([]string, len(t.principals))
	for i, p := range t.principals {
		names[i] = p.Name
	}
	return names
}

// Lookup returns the principal of token, comparing digests in constant
// time and always against every digest.
func (t *Tokens) Lookup(token string) (*Principal, bool) {
	d := sha256.Sum256([]byte(token))
	found := -1
	for i := range t.digests {
		if subtle.ConstantTimeCompare(d[:], t.digests[i][:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return nil, false
	}
	return t.principals[found], true
}

// AdminTokens makes a set in which every token is an admin, named
// "token-N" (N from 1): tokens given in code rather than in a file.
func AdminTokens(tokens []string) (*Tokens, error) {
	t := &Tokens{}
	for i, tok := range tokens {
		if len(tok) < MinTokenBytes {
			return nil, fmt.Errorf("%w: API token %d of %d is %d bytes, at least %d are needed (e.g. head -c 32 /dev/urandom | base64)",
				ErrTokenFile, i+1, len(tokens), len(tok), MinTokenBytes)
		}
		t.add(tok, &Principal{Name: fmt.Sprintf("token-%d", i+1), Role: Admin})
	}
	return t, nil
}

func (t *Tokens) add(token string, p *Principal) {
	t.digests = append(t.digests, sha256.Sum256([]byte(token)))
	t.principals = append(t.principals, p)
}

// ParseTokenFile reads a token file (file names it in errors). Each line
// is
//
//	TOKEN name=NAME role=ROLE [workflows=GLOB,…] [capabilities=GLOB,…]
//
// Blank lines and lines starting with # are skipped. A line holding only
// a token is an admin named "line-N", kept for files written before roles;
// warnings say which lines those are. Errors name the file and line and
// never quote a token.
func ParseTokenFile(file string, data []byte) (t *Tokens, warnings []string, err error) {
	t = &Tokens{}
	names := map[string]int{}
	seen := map[[sha256.Size]byte]int{}
	var errs []error
	for i, line := range strings.Split(string(data), "\n") {
		n := i + 1
		fields := strings.Fields(line)
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		at := fmt.Sprintf("%s:%d", file, n)
		token := fields[0]
		if len(token) < MinTokenBytes {
			errs = append(errs, fmt.Errorf("%s: the token is %d bytes, at least %d are needed (e.g. head -c 32 /dev/urandom | base64)", at, len(token), MinTokenBytes))
			continue
		}
		if strings.Contains(token, "=") && len(fields) > 1 {
			errs = append(errs, fmt.Errorf("%s: a line starts with its token, then name=NAME role=ROLE", at))
			continue
		}
		d := sha256.Sum256([]byte(token))
		if prev, dup := seen[d]; dup {
			errs = append(errs, fmt.Errorf("%s: the same token as line %d: give each client its own", at, prev))
			continue
		}
		seen[d] = n
		var p *Principal
		if len(fields) == 1 {
			p = &Principal{Name: fmt.Sprintf("line-%d", n), Role: Admin}
			warnings = append(warnings, fmt.Sprintf("%s: a token without name= and role= is an admin named %s; give it a name and the least role it needs (TOKEN name=NAME role=read|submit|operate|admin|worker)", at, p.Name))
		} else if p, err = parseAttrs(fields[1:]); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", at, err))
			continue
		}
		if prev, dup := names[p.Name]; dup {
			errs = append(errs, fmt.Errorf("%s: the name %s is taken by line %d: names identify tokens in the audit trail", at, p.Name, prev))
			continue
		}
		names[p.Name] = n
		t.add(token, p)
	}
	if len(errs) > 0 {
		return nil, nil, fmt.Errorf("%w: %w", ErrTokenFile, errors.Join(errs...))
	}
	if t.Len() == 0 {
		return nil, nil, fmt.Errorf("%w: %s has no token (a line per token: TOKEN name=NAME role=ROLE; e.g. head -c 32 /dev/urandom | base64)", ErrTokenFile, file)
	}
	return t, warnings, nil
}

// parseAttrs reads a line's name=, role=, workflows= and capabilities=.
func parseAttrs(fields []string) (*Principal, error) {
	p := &Principal{}
	var role string
	var hasRole bool
	for _, f := range fields {
		key, val, ok := strings.Cut(f, "=")
		if !ok || val == "" {
			return nil, fmt.Errorf("%q: want KEY=VALUE (name, role, workflows or capabilities)", f)
		}
		switch key {
		case "name":
			if !nameRE.MatchString(val) {
				return nil, fmt.Errorf("name %q: use letters, digits, '.', '_' and '-' (at most 64)", val)
			}
			p.Name = val
		case "role":
			role, hasRole = val, true
		case "workflows", "capabilities":
			globs := strings.Split(val, ",")
			for _, g := range globs {
				if _, err := path.Match(g, ""); err != nil || g == "" {
					return nil, fmt.Errorf("%s: %q is not a glob (e.g. billing-* or ai.*)", key, g)
				}
			}
			if key == "workflows" {
				p.Workflows = globs
			} else {
				p.Capabilities = globs
			}
		default:
			return nil, fmt.Errorf("unknown key %q: want name, role, workflows or capabilities", key)
		}
	}
	if p.Name == "" {
		return nil, errors.New("no name=NAME: a name identifies the token in the audit trail and in errors")
	}
	if !hasRole {
		return nil, errors.New("no role=ROLE: want read, submit, operate, admin or worker")
	}
	r, err := ParseRole(role)
	if err != nil {
		return nil, err
	}
	p.Role = r
	switch {
	case r == Worker && len(p.Capabilities) == 0:
		return nil, errors.New("role=worker needs capabilities=GLOB,… (the capabilities its programs may serve)")
	case r != Worker && len(p.Capabilities) > 0:
		return nil, fmt.Errorf("capabilities= scopes a worker token, not a %s one", r)
	case (r == Worker || r == Admin) && len(p.Workflows) > 0:
		return nil, fmt.Errorf("workflows= scopes read, submit and operate tokens, not a %s one", r)
	}
	return p, nil
}
