package wag

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/robonet/robonet/engine/port"
	"github.com/robonet/robonet/internal/clock"
	"github.com/robonet/robonet/wag/tasklog"
)

// Handler runs one action for one attempt. It must honour ctx: when ctx is
// done (cancelled, timed out, node stopping) it should return promptly, or
// its worker abandons it after the cancel grace. The output is normalized
// with value.Normalize and must encode to at most MaxOutputBytes of JSON.
// A panic is contained and fails the attempt.
type Handler func(ctx context.Context, call *Call) (any, error)

// Call is what a handler gets to know about its attempt.
type Call struct {
	Key        port.AttemptKey
	Task       string
	Index      int32 // spread index, -1 for a plain task
	Capability string
	Action     string
	// Workflow names the workflow of the attempt.
	Workflow string
	// Worker is the id of the slot running the call
	// ("node/capability/N"), and Slot its number N within its pool.
	Worker string
	Slot   int
	// Timeout bounds the attempt (0: none); the pool cancels the call's
	// context when it runs out.
	Timeout time.Duration
	// Input is the task's evaluated `with`, a canonical value. Read-only: it
	// may share structure with other tasks' data.
	Input any
	// Progress reports how far the action has come; the latest report rides
	// the attempt's next heartbeat. Safe to call from any goroutine; never nil.
	Progress func(Progress)
	// MaxOutputBytes is the output limit of this node: handlers that read
	// output from elsewhere should stop reading past it.
	MaxOutputBytes int

	rt  *runtimeEnv
	pid atomic.Int64 // process whose CPU and memory heartbeats report, 0 if none

	log     *zap.Logger // the pool's; nil: Logger returns a no-op logger
	logOnce sync.Once
	logger  *zap.Logger
}

// Logger returns a logger carrying the attempt's fields (instance, task,
// attempt, worker). It is built on first use: most actions never log, and
// a logger per attempt built in advance cost a node about a tenth of its
// allocation at full speed. Safe to call from any goroutine.
func (c *Call) Logger() *zap.Logger {
	c.logOnce.Do(func() {
		if c.log == nil {
			c.logger = zap.NewNop()
			return
		}
		c.logger = c.log.With(attemptFields(c.Key, zap.String("worker", c.Worker))...)
	})
	return c.logger
}

// IdempotencyKey is the key to deduplicate side effects with: dispatch is
// at-least-once, so the same attempt may run more than once (execution id +
// attempt).
func (c *Call) IdempotencyKey() string { return c.Key.IdempotencyKey() }

// setPID names the process whose resources heartbeats report (0: none).
func (c *Call) setPID(pid int) { c.pid.Store(int64(pid)) }

// runtime returns the node's runtime environment, or a default one for calls
// built outside a worker (handler unit tests).
func (c *Call) runtime() *runtimeEnv {
	if c.rt != nil {
		return c.rt
	}
	return defaultRuntime
}

// maxOutput is MaxOutputBytes or its default.
func (c *Call) maxOutput() int {
	if c.MaxOutputBytes > 0 {
		return c.MaxOutputBytes
	}
	return DefaultMaxOutputBytes
}

// progress calls Progress if set.
func (c *Call) progress(p Progress) {
	if c.Progress != nil {
		c.Progress(p)
	}
}

// runtimeEnv is what the built-in actions share on one node.
type runtimeEnv struct {
	clock      clock.Clock
	httpClient *http.Client
	killGrace  time.Duration // exec: SIGTERM → SIGKILL
	// cgroupParent names the cgroup v2 directory exec attempts get
	// sub-cgroups of ("" for none); nil detects a delegated one (Linux).
	cgroupParent func() string
	// logs keeps exec attempts' output; nil: none kept.
	logs *tasklog.Store
	// exec is the node's exec policy; nil: any program, as the node's user.
	exec *execRules
	// execRefused counts the exec attempts the policy refused; nil: none
	// counted.
	execRefused prometheus.Counter
}

// countRefusal counts an exec attempt the policy refused.
func (rt *runtimeEnv) countRefusal() {
	if rt.execRefused != nil {
		rt.execRefused.Inc()
	}
}

var defaultRuntime = &runtimeEnv{clock: clock.System(), httpClient: newHTTPClient(), killGrace: defaultKillGrace}

// Registry maps action names to handlers. It is safe for concurrent use;
// register handlers before the node starts.
type Registry struct {
	mu       sync.RWMutex
	handlers map[string]Handler
}

// ErrActionExists is returned by Register for a name already taken.
var ErrActionExists = errors.New("action already registered")

// actionRE is the action name syntax of workflow specs.
var actionRE = regexp.MustCompile(`^[a-z][a-z0-9_.-]*$`)

// BuiltinActions are the names of the built-in actions, sorted. A worker
// program may not claim them unless its node allows it: a workflow that
// asks for exec expects robonode's exec, not whatever a program does with
// its input (and its env).
func BuiltinActions() []string { return slices.Sorted(maps.Keys(builtins)) }

// builtins are the built-in actions by name.
var builtins = map[string]Handler{"exec": execAction, "http": httpAction, "sleep": sleepAction, "echo": echoAction}

// NewRegistry returns a registry holding the built-in actions: exec, http,
// sleep and echo.
func NewRegistry() *Registry {
	r := NewEmptyRegistry()
	for name, h := range builtins {
		if err := r.Register(name, h); err != nil {
			panic(err) // the built-in names are valid and distinct
		}
	}
	return r
}

// NewEmptyRegistry returns a registry with no actions.
func NewEmptyRegistry() *Registry { return &Registry{handlers: make(map[string]Handler)} }

// Register adds an action. Names follow the spec syntax (e.g. "resize" or
// "img.resize"); a name is registered once.
func (r *Registry) Register(name string, h Handler) error {
	if !actionRE.MatchString(name) {
		return fmt.Errorf("wag: action name %q: use lowercase letters, digits, '_', '.' and '-', starting with a letter", name)
	}
	if h == nil {
		return fmt.Errorf("wag: action %q: nil handler", name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.handlers[name]; ok {
		return fmt.Errorf("wag: action %q: %w", name, ErrActionExists)
	}
	r.handlers[name] = h
	return nil
}

// Lookup returns the handler of an action.
func (r *Registry) Lookup(name string) (Handler, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	h, ok := r.handlers[name]
	return h, ok
}

// Names returns the registered action names, sorted.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := make([]string, 0, len(r.handlers))
	for n := range r.handlers {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// echoAction returns its input unchanged.
func echoAction(_ context.Context, call *Call) (any, error) { return call.Input, nil }
