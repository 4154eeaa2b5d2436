package wag

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"go.uber.org/zap"

	"github.com/robonet/robonet/engine"
)

// Local is the Waggler layer of one node: a Waggler per capability, with
// the node's worker pool behind it. It implements engine.Dispatcher.
type Local struct {
	cfg Config
	log *zap.Logger
	rt  *runtimeEnv

	mu       sync.RWMutex
	state    lifecycle
	wagglers map[string]*Waggler
	pools    map[string]*pool
}

type lifecycle uint8

const (
	lifecycleNew lifecycle = iota
	lifecycleRunning
	lifecycleStopped
)

var _ engine.Dispatcher = (*Local)(nil)

// New builds the Waggler layer of a node from cfg (see Config for the
// defaults). Nothing runs until Start.
func New(cfg Config) (*Local, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	l := &Local{
		cfg:      cfg,
		log:      cfg.Logger.Named("wag").With(zap.String("node", cfg.NodeName)),
		rt:       &runtimeEnv{clock: cfg.Clock, httpClient: newHTTPClient(), killGrace: defaultKillGrace},
		wagglers: make(map[string]*Waggler),
		pools:    make(map[string]*pool),
	}
	for capability, size := range cfg.Capabilities {
		w := newWaggler(cfg, capability, l.log)
		p := newPool(cfg, capability, size, l.rt, w, l.log)
		for _, wk := range p.workers() {
			if err := w.AddWorker(wk); err != nil {
				return nil, err
			}
		}
		l.wagglers[capability] = w
		l.pools[capability] = p
	}
	return l, nil
}

// Start starts the worker pools and the Wagglers' heartbeat monitors and
// returns.
func (l *Local) Start(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch l.state {
	case lifecycleRunning:
		return errors.New("wag: already started")
	case lifecycleStopped:
		return errors.New("wag: stopped; build a new one with New")
	}
	l.state = lifecycleRunning
	for _, name := range l.capabilitiesLocked() {
		l.wagglers[name].start()
		if p := l.pools[name]; p != nil {
			p.start()
		}
	}
	l.log.Info("worker pools started", zap.Any("capabilities", l.cfg.Capabilities), zap.Strings("actions", l.cfg.Registry.Names()))
	return nil
}

// Stop stops accepting work, drops what is queued, cancels what runs and
// waits — until ctx is done — for every worker goroutine and timer callback.
// Attempts dropped or cancelled this way report nothing: the engine
// re-dispatches them. Stop is idempotent; it returns the actions still
// running when ctx ran out, if any.
func (l *Local) Stop(ctx context.Context) error {
	l.mu.Lock()
	if l.state == lifecycleStopped {
		l.mu.Unlock()
		return nil
	}
	l.state = lifecycleStopped
	names := l.capabilitiesLocked()
	l.mu.Unlock()

	// Wagglers first, so that nothing a stopping worker says reaches the
	// sink; then the pools they coordinate.
	for _, name := range names {
		l.wagglers[name].close()
	}
	var errs []error
	for _, name := range names {
		if p := l.pools[name]; p != nil {
			if err := p.stop(ctx); err != nil {
				errs = append(errs, err)
			}
		}
	}
	l.rt.httpClient.CloseIdleConnections()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("wag: stop: %w", err)
	}
	l.log.Info("worker pools stopped")
	return nil
}

// Dispatch queues attempts with the Wagglers of their capabilities and
// returns; it never waits for execution. All or none are accepted: when a
// capability already has QueueSize attempts waiting, it returns an error
// wrapping ErrBusy and accepts none. An attempt whose capability no local
// pool offers is accepted and waits (the mesh may bring such a worker);
// the engine hears about it through TaskProgress. An attempt already held
// is ignored.
func (l *Local) Dispatch(ctx context.Context, tasks []engine.TaskDispatch) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(tasks) == 0 {
		return nil
	}
	l.ensureWagglers(tasks)
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.state != lifecycleRunning {
		return ErrNotRunning
	}
	groups := make(map[*Waggler][]engine.TaskDispatch)
	var order []*Waggler
	for _, d := range tasks {
		w := l.wagglers[d.Capability]
		if _, ok := groups[w]; !ok {
			if err := w.admit(); err != nil {
				return err
			}
			order = append(order, w)
		}
		groups[w] = append(groups[w], d)
	}
	for _, w := range order {
		w.enqueue(groups[w])
	}
	return nil
}

// ensureWagglers creates (and starts) a worker-less Waggler for every
// capability of tasks that this node does not serve.
func (l *Local) ensureWagglers(tasks []engine.TaskDispatch) {
	l.mu.RLock()
	missing := false
	for _, d := range tasks {
		if _, ok := l.wagglers[d.Capability]; !ok {
			missing = true
			break
		}
	}
	l.mu.RUnlock()
	if !missing {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, d := range tasks {
		if _, ok := l.wagglers[d.Capability]; ok {
			continue
		}
		w := newWaggler(l.cfg, d.Capability, l.log)
		l.wagglers[d.Capability] = w
		w.log.Warn("no local worker offers this capability: its tasks wait for one")
		if l.state == lifecycleRunning {
			w.start()
		}
	}
}

// Cancel cancels attempts wherever they are queued or running. Their
// results, if any still come, are discarded: a cancelled attempt reports
// nothing. Unknown attempts are ignored.
func (l *Local) Cancel(ctx context.Context, attempts []engine.AttemptKey) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.state != lifecycleRunning {
		return nil
	}
	for _, w := range l.wagglers {
		w.cancel(attempts)
	}
	return nil
}

// Wagglers returns a snapshot of every Waggler, by capability.
func (l *Local) Wagglers() []WagglerStatus {
	l.mu.RLock()
	defer l.mu.RUnlock()
	out := make([]WagglerStatus, 0, len(l.wagglers))
	for _, name := range l.capabilitiesLocked() {
		out = append(out, l.wagglers[name].Status())
	}
	return out
}

// Waggler returns the Waggler of a capability, or nil. The mesh uses it to
// add remote workers and to report dead ones.
func (l *Local) Waggler(capability string) *Waggler {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.wagglers[capability]
}

func (l *Local) capabilitiesLocked() []string {
	names := make([]string, 0, len(l.wagglers))
	for name := range l.wagglers {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}
