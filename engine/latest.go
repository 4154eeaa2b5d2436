package engine

import (
	"context"
	"sync"
	"time"

	"github.com/robonet/robonet/engine/port"
)

// latestTTL bounds how long a cached "latest version" answers a submission
// that names a workflow without a version. This engine's own registrations
// invalidate the entry at once, and while it leads no one else registers;
// the bound covers only a deposed leader's registration racing the start
// of this term.
const latestTTL = time.Second

// latestVersions caches, per workflow name, the plan of its newest version,
// so that a submission by name does not read the store (a round trip and
// the version's whole IR) every time.
type latestVersions struct {
	mu  sync.Mutex
	by  map[string]latestEntry
	gen uint64 // counts registrations; a read that spans one is not cached
}

type latestEntry struct {
	pe *planEntry
	at time.Time
}

// get returns the cached latest version of name, or nil and the
// generation to pass to put with what the caller reads from the store.
func (l *latestVersions) get(name string, now time.Time) (*planEntry, uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e, ok := l.by[name]; ok && now.Sub(e.at) < latestTTL {
		return e.pe, 0
	}
	return nil, l.gen
}

// put caches pe as the latest version of name, as read at now, unless a
// version was registered since get returned gen: what was read may
// predate it.
func (l *latestVersions) put(name string, pe *planEntry, now time.Time, gen uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if gen != l.gen {
		return
	}
	if l.by == nil {
		l.by = make(map[string]latestEntry)
	}
	l.by[name] = latestEntry{pe: pe, at: now}
}

// forget drops name's entry: a version of it was just registered.
func (l *latestVersions) forget(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.by, name)
	l.gen++
}

// latest returns the plan of name's newest registered version.
func (e *Engine) latest(ctx context.Context, name string) (*planEntry, error) {
	now := e.cfg.Clock.Now()
	pe, gen := e.latestVersions.get(name, now)
	if pe != nil {
		return pe, nil
	}
	wfs, err := e.cfg.Store.ListWorkflows(ctx, port.WorkflowFilter{Name: name, Limit: 1})
	if err != nil {
		return nil, err
	}
	if len(wfs) == 0 {
		return nil, port.ErrNotFound
	}
	if pe, err = e.q.plans.add(wfs[0]); err != nil {
		return nil, err
	}
	e.latestVersions.put(name, pe, now, gen)
	return pe, nil
}
