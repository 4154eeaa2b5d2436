package wag

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"go.uber.org/zap"

	"github.com/robonet/robonet/internal/lifecycle"
)

// WorkerHost runs this node's worker pools, one per capability it serves
// (--capability NAME=SIZE). A pool is not welded to a Waggler: it works for
// whichever Waggler its capability has now (Attach), on this node or
// another, and when that changes its slots keep running what they run and
// register it with the successor, which adopts it.
type WorkerHost struct {
	cfg Config
	log *zap.Logger
	rt  *runtimeEnv

	life lifecycle.Base

	mu       sync.Mutex
	pools    map[string][]*pool      // capability → its pools: the node's own first, then external ones
	targets  map[string]TargetSource // capability → the Waggler its pools work for
	onChange []func()                // told when pools come or go
}

// TargetSource is the Waggler of a capability as the pools should reach
// it: Key names it (a node and epoch), and New builds a pool's Target —
// the same *Waggler for every pool when it runs on this node, a stream per
// pool when it runs on another. running lists what that pool's slots run.
type TargetSource struct {
	Key string
	New func(running func() []Running) Target
}

// NewWorkerHost builds the pools of cfg.Capabilities; nothing runs until
// Start.
func NewWorkerHost(cfg Config) (*WorkerHost, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	var as *execUser
	if cfg.Exec.User != "" {
		var err error
		if as, err = lookupExecUser(cfg.Exec.User); err != nil {
			return nil, fmt.Errorf("wag: invalid config: %w", err)
		}
	}
	h := &WorkerHost{
		cfg: cfg,
		log: cfg.Logger.Named("worker").With(zap.String("node", cfg.NodeName)),
		rt: &runtimeEnv{clock: cfg.Clock, httpClient: newHTTPClient(), killGrace: defaultKillGrace, logs: cfg.TaskLogs,
			exec: newExecRules(cfg.NodeName, cfg.Exec, as), execRefused: cfg.Metrics.ExecRefused},
		pools:   make(map[string][]*pool),
		targets: make(map[string]TargetSource),
	}
	for capability, size := range cfg.Capabilities {
		h.pools[capability] = []*pool{newPool(cfg, capability, size, h.rt, h.log)}
	}
	return h, nil
}

// Capabilities returns the capabilities served here with their slots,
// external pools included.
func (h *WorkerHost) Capabilities() map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string]int, len(h.pools))
	for c, ps := range h.pools {
		for _, p := range ps {
			out[c] += len(p.slots)
		}
	}
	return out
}

// OnChange registers f, called (outside any lock) whenever a pool is added
// or removed: the node advertises its capabilities again.
func (h *WorkerHost) OnChange(f func()) {
	h.mu.Lock()
	h.onChange = append(h.onChange, f)
	h.mu.Unlock()
}

// ErrPoolExists is returned by AddPool for a pool name already serving the
// capability on this node.
var ErrPoolExists = errors.New("pool exists")

// AddPool adds a pool of size slots for capability whose actions are reg's
// (an external worker program: its handlers forward to it). Its slots are
// named node/capability/name-N. The pool works for the capability's
// current Waggler at once. remove stops it (what it runs is cancelled) and
// takes it out.
func (h *WorkerHost) AddPool(capability, name string, size int, reg *Registry) (remove func(ctx context.Context) error, err error) {
	cfg := h.cfg
	cfg.Capabilities = map[string]int{capability: size}
	cfg.Registry = reg
	cfg.poolName = name
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	p := newPool(cfg, capability, size, h.rt, h.log.With(zap.String("pool", name)))
	h.mu.Lock()
	if !h.life.Running() {
		h.mu.Unlock()
		return nil, ErrNotRunning
	}
	for _, q := range h.pools[capability] {
		if q.slots[0].id == p.slots[0].id {
			h.mu.Unlock()
			return nil, fmt.Errorf("wag: a pool named %q already serves %s on this node: %w", name, capability, ErrPoolExists)
		}
	}
	h.pools[capability] = append(h.pools[capability], p)
	src, ok := h.targets[capability]
	watchers := slices.Clone(h.onChange)
	p.start()
	h.mu.Unlock()
	if ok {
		p.attachTo(src)
	}
	for _, f := range watchers {
		f()
	}
	h.log.Info("pool added", zap.String("capability", capability), zap.String("pool", name), zap.Int("slots", size))
	return func(ctx context.Context) error {
		h.mu.Lock()
		h.pools[capability] = slices.DeleteFunc(h.pools[capability], func(q *pool) bool { return q == p })
		if len(h.pools[capability]) == 0 {
			delete(h.pools, capability)
			delete(h.targets, capability)
		}
		watchers := slices.Clone(h.onChange)
		h.mu.Unlock()
		// Stopped first, so that nothing runs there any more when the
		// Waggler fails its attempts over.
		err := p.stop(ctx)
		p.leave()
		for _, f := range watchers {
			f()
		}
		h.log.Info("pool removed", zap.String("capability", capability), zap.String("pool", name))
		return err
	}, nil
}

// Start starts the worker goroutines and heartbeat tickers.
func (h *WorkerHost) Start(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.life.Start("wag: worker host"); err != nil {
		return err
	}
	for _, ps := range h.pools {
		for _, p := range ps {
			p.start()
		}
	}
	h.log.Info("worker pools started", zap.Any("capabilities", h.cfg.Capabilities), zap.Strings("actions", h.cfg.Registry.Names()))
	return nil
}

// Stop cancels what runs and waits — until ctx is done — for every worker
// goroutine and timer callback. What was cancelled reports nothing: the
// engine dispatches it again. Every call waits for the first and returns
// its error.
func (h *WorkerHost) Stop(ctx context.Context) error {
	return h.life.Stop(ctx, func(lifecycle.State) error {
		h.mu.Lock()
		var pools []*pool
		for _, ps := range h.pools {
			pools = append(pools, ps...)
		}
		h.mu.Unlock()
		var errs []error
		for _, p := range pools {
			p.attach(nil)
			if err := p.stop(ctx); err != nil {
				errs = append(errs, err)
			}
		}
		h.rt.httpClient.CloseIdleConnections()
		if err := errors.Join(errs...); err != nil {
			return fmt.Errorf("wag: stop: %w", err)
		}
		h.log.Info("worker pools stopped")
		return nil
	})
}

// AttachedTo returns the key of the Waggler the pools of capability work
// for ("" for none, or no pools).
func (h *WorkerHost) AttachedTo(capability string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.targets[capability].Key
}

// Attach makes src the Waggler the pools of capability work for. The
// slots register with it, with what they run; reports kept while a pool
// had no Waggler go to it. Pools already working for src.Key are left
// alone.
func (h *WorkerHost) Attach(capability string, src TargetSource) {
	h.mu.Lock()
	ps := slices.Clone(h.pools[capability])
	running := h.life.Running()
	if running && len(ps) > 0 {
		h.targets[capability] = src
	}
	h.mu.Unlock()
	if !running {
		return
	}
	for _, p := range ps {
		p.attachTo(src)
	}
	if len(ps) > 0 {
		h.log.Debug("pools attached to their waggler", zap.String("capability", capability), zap.String("waggler", src.Key), zap.Int("pools", len(ps)))
	}
}
