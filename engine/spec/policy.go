package spec

import (
	"fmt"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// Built-in defaults, used for every field that neither the task nor the
// workflow's `defaults` sets.
const (
	builtinMaxAttempts = 1 // no retry
	builtinInitial     = time.Second
	builtinFactor      = 2.0
	builtinMax         = 5 * time.Minute
	builtinJitter      = 0.0
	maxAttemptsLimit   = 100
)

var (
	retryKeys   = []string{"max_attempts", "backoff"}
	backoffKeys = []string{"initial", "factor", "max", "jitter"}
)

// failurePolicies maps the spec's on_failure words to the IR.
var failurePolicies = map[string]robonetv1.FailurePolicy{
	"retry": robonetv1.FailurePolicy_FAILURE_POLICY_RETRY,
	"skip":  robonetv1.FailurePolicy_FAILURE_POLICY_SKIP,
	"abort": robonetv1.FailurePolicy_FAILURE_POLICY_ABORT,
}

// policy is the failure handling a task or the workflow defaults write down.
// nil pointers (and FAILURE_POLICY_UNSPECIFIED) mean "not set here", so
// folding can take each field from the first level that sets it.
type policy struct {
	onFailure robonetv1.FailurePolicy
	retry     retrySpec
	// retryNode is the `retry` key when the spec has one.
	retryNode *yaml.Node
	timeout   *time.Duration
}

type retrySpec struct {
	maxAttempts *uint32
	initial     *time.Duration
	factor      *float64
	max         *time.Duration
	jitter      *float64
}

// defaults reads the workflow's `defaults` mapping.
func (c *compiler) defaults(e entry) policy {
	w := where{field: "defaults"}
	n := c.resolve(e.value)
	if n == nil || isNull(n) {
		return policy{}
	}
	entries, ok := c.mapping(n, w, "defaults")
	if !ok {
		return policy{}
	}
	fields := c.checkKeys(entries, defaultKeys, w, "defaults")
	return c.policy(fields, where{field: "defaults"})
}

// policy reads on_failure, retry and timeout from a task or defaults mapping.
// base is the place of the mapping ("" for a task, "defaults").
func (c *compiler) policy(fields map[string]entry, base where) policy {
	var p policy
	if f, ok := fields["on_failure"]; ok {
		p.onFailure = c.onFailure(f, base.child("on_failure"))
	}
	if f, ok := fields["retry"]; ok {
		p.retryNode = f.keyN
		p.retry = c.retry(f, base.child("retry"))
	}
	if f, ok := fields["timeout"]; ok {
		p.timeout = c.duration(f.value, base.child("timeout"))
	}
	return p
}

func (c *compiler) onFailure(f entry, w where) robonetv1.FailurePolicy {
	word, ok := c.str(f.value, w)
	if !ok {
		return robonetv1.FailurePolicy_FAILURE_POLICY_UNSPECIFIED
	}
	p, ok := failurePolicies[word]
	if !ok {
		hint := didYouMean(word, []string{"retry", "skip", "abort"}, nil, "policies")
		if !strings.HasPrefix(hint, "did you mean") {
			hint = "use retry, skip or abort"
		}
		c.errorf(c.resolve(f.value), w, hint, "unknown failure policy %q", word)
	}
	return p
}

// retry reads {max_attempts, backoff: {initial, factor, max, jitter}}.
func (c *compiler) retry(f entry, w where) retrySpec {
	var r retrySpec
	n := c.resolve(f.value)
	if n == nil {
		return r
	}
	entries, ok := c.mapping(n, w, "retry")
	if !ok {
		return r
	}
	fields := c.checkKeys(entries, retryKeys, w, "retry")
	if m, ok := fields["max_attempts"]; ok {
		r.maxAttempts = c.maxAttempts(m.value, w.child("max_attempts"))
	}
	b, ok := fields["backoff"]
	if !ok {
		return r
	}
	bw := w.child("backoff")
	bn := c.resolve(b.value)
	if bn == nil {
		return r
	}
	bentries, ok := c.mapping(bn, bw, "backoff")
	if !ok {
		return r
	}
	bf := c.checkKeys(bentries, backoffKeys, bw, "backoff")
	if e, ok := bf["initial"]; ok {
		r.initial = c.duration(e.value, bw.child("initial"))
	}
	if e, ok := bf["max"]; ok {
		r.max = c.duration(e.value, bw.child("max"))
	}
	if e, ok := bf["factor"]; ok {
		r.factor = c.number(e.value, bw.child("factor"), 1, 1000, "factor multiplies the delay after each retry: 1 keeps it constant, 2 doubles it")
	}
	if e, ok := bf["jitter"]; ok {
		r.jitter = c.number(e.value, bw.child("jitter"), 0, 1, "jitter is a fraction of the delay, e.g. 0.1 for +/-10%")
	}
	if r.initial != nil && r.max != nil && *r.max < *r.initial {
		c.errorf(c.resolve(bf["max"].value), bw.child("max"), "make max at least as long as initial",
			"max (%s) is shorter than initial (%s)", *r.max, *r.initial)
	}
	return r
}

func (c *compiler) maxAttempts(v *yaml.Node, w where) *uint32 {
	n := c.resolve(v)
	if n == nil {
		return nil
	}
	hint := fmt.Sprintf("max_attempts counts every attempt including the first: 1 means no retry, at most %d", maxAttemptsLimit)
	if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
		c.errorf(n, w, hint, "max_attempts must be a whole number, not %s", describe(n))
		return nil
	}
	i, ok := intValue(n)
	if !ok || i < 1 || i > maxAttemptsLimit {
		c.errorf(n, w, hint, "max_attempts must be between 1 and %d, not %s", maxAttemptsLimit, n.Value)
		return nil
	}
	u := uint32(i)
	return &u
}

// number reads an int or float scalar in [lo, hi].
func (c *compiler) number(v *yaml.Node, w where, lo, hi float64, hint string) *float64 {
	n := c.resolve(v)
	if n == nil {
		return nil
	}
	if n.Kind != yaml.ScalarNode || (n.Tag != "!!int" && n.Tag != "!!float") {
		c.errorf(n, w, hint, "must be a number, not %s", describe(n))
		return nil
	}
	var f float64
	if err := n.Decode(&f); err != nil || f != f || f < lo || f > hi {
		c.errorf(n, w, hint, "must be between %g and %g, not %s", lo, hi, n.Value)
		return nil
	}
	return &f
}

// duration reads a Go duration string such as "30s", "5m" or "1h30m". It must
// be positive.
func (c *compiler) duration(v *yaml.Node, w where) *time.Duration {
	n := c.resolve(v)
	if n == nil {
		return nil
	}
	const hint = "write a duration with a unit, e.g. 500ms, 30s, 5m or 1h30m"
	if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
		c.errorf(n, w, hint, "must be a duration, not %s", describe(n))
		return nil
	}
	d, err := time.ParseDuration(n.Value)
	if err != nil {
		c.errorf(n, w, hint, "invalid duration %q", n.Value)
		return nil
	}
	if d <= 0 {
		c.errorf(n, w, "durations must be greater than zero; leave the field out to use the default", "duration %q is not positive", n.Value)
		return nil
	}
	return &d
}

// fold combines a task's policy with the workflow defaults and the built-in
// defaults, field by field, into the IR's failure policy, retry policy and
// timeout. A task that aborts never retries, so it gets the built-in retry
// policy with a single attempt whatever the defaults say.
func fold(task, defaults policy) (robonetv1.FailurePolicy, *robonetv1.RetryPolicy, *durationpb.Duration) {
	onFailure := firstPolicy(task.onFailure, defaults.onFailure, robonetv1.FailurePolicy_FAILURE_POLICY_RETRY)
	var timeout *durationpb.Duration
	if d := first(task.timeout, defaults.timeout, 0); d > 0 {
		timeout = durationpb.New(d)
	}
	t, d := task.retry, defaults.retry
	if onFailure == robonetv1.FailurePolicy_FAILURE_POLICY_ABORT {
		t, d = retrySpec{}, retrySpec{}
	}
	retry := &robonetv1.RetryPolicy{
		MaxAttempts: first(t.maxAttempts, d.maxAttempts, builtinMaxAttempts),
		Initial:     durationpb.New(first(t.initial, d.initial, builtinInitial)),
		Factor:      first(t.factor, d.factor, builtinFactor),
		Max:         durationpb.New(first(t.max, d.max, builtinMax)),
		Jitter:      first(t.jitter, d.jitter, builtinJitter),
	}
	return onFailure, retry, timeout
}

// first returns the first value that is set: the task's, the defaults', or
// the built-in one.
func first[T any](task, defaults *T, builtin T) T {
	if task != nil {
		return *task
	}
	if defaults != nil {
		return *defaults
	}
	return builtin
}

func firstPolicy(task, defaults, builtin robonetv1.FailurePolicy) robonetv1.FailurePolicy {
	if task != robonetv1.FailurePolicy_FAILURE_POLICY_UNSPECIFIED {
		return task
	}
	if defaults != robonetv1.FailurePolicy_FAILURE_POLICY_UNSPECIFIED {
		return defaults
	}
	return builtin
}
