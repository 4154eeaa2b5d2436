package wag

import (
	"context"
	"maps"
	"slices"
	"sync"
	"testing"

	"go.uber.org/zap/zaptest"

	"github.com/robonet/robonet/engine"
)

// fakeDir is a Directory whose roles the test sets; every session it opens
// records what the Router sends on it.
type fakeDir struct {
	mu      sync.Mutex
	roles   map[string]Role
	changed chan struct{}
	links   map[string]*fakeLink
}

func newFakeDir() *fakeDir {
	return &fakeDir{roles: map[string]Role{}, changed: make(chan struct{}), links: map[string]*fakeLink{}}
}

func (d *fakeDir) set(capability, node string, epoch uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.roles[capability] = Role{Node: node, Epoch: epoch}
	close(d.changed)
	d.changed = make(chan struct{})
}

func (d *fakeDir) Roles() map[string]Role {
	d.mu.Lock()
	defer d.mu.Unlock()
	return maps.Clone(d.roles)
}

func (d *fakeDir) Quarantined() []string { return nil }

func (d *fakeDir) Changed() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.changed
}

func (d *fakeDir) Open(_ context.Context, node string, _ uint64, _ Uplink) (Link, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	l := &fakeLink{}
	d.links[node] = l
	return l, nil
}

func (d *fakeDir) link(node string) *fakeLink {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.links[node]
}

type fakeLink struct {
	mu         sync.Mutex
	dispatched []engine.AttemptKey
	cancelled  []engine.AttemptKey
}

func (l *fakeLink) SetRoles(map[string]uint64, []string) error { return nil }
func (l *fakeLink) Dispatch(hs []Handoff) []error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, h := range hs {
		l.dispatched = append(l.dispatched, h.AttemptKey)
	}
	return make([]error, len(hs))
}
func (l *fakeLink) Cancel(keys []engine.AttemptKey) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cancelled = append(l.cancelled, keys...)
	return nil
}
func (l *fakeLink) Ack(uint64) {}
func (l *fakeLink) Close()     {}

func (l *fakeLink) has(cancelled bool, key engine.AttemptKey) bool {
	if l == nil {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if cancelled {
		return slices.Contains(l.cancelled, key)
	}
	return slices.Contains(l.dispatched, key)
}

// A cancel reaches the Waggler that held the attempt, and — as the cancel
// may have reached only it, or no Waggler at all — every Waggler that takes
// the capability's role afterwards: a worker registering a copy of the
// attempt with the successor is then told to stop it.
func TestRouterTellsSuccessorsRecentCancels(t *testing.T) {
	dir := newFakeDir()
	dir.set("code.exec", "a", 1)
	r, err := NewRouter(RouterConfig{Term: 1, Sink: newSink(), Directory: dir, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Stop(context.Background()) }()

	d := task("sleep", "1s")
	d.Term = 1
	r.Dispatch(t.Context(), []engine.TaskDispatch{d})
	waitUntil(t, "the dispatch on a", func() bool { return dir.link("a").has(false, d.AttemptKey) })
	if err := r.Cancel(t.Context(), 1, []engine.AttemptKey{d.AttemptKey}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the cancel on a", func() bool { return dir.link("a").has(true, d.AttemptKey) })

	dir.set("code.exec", "b", 2) // a fails; b succeeds it
	waitUntil(t, "the cancel told to the successor b", func() bool { return dir.link("b").has(true, d.AttemptKey) })
	if dir.link("b").has(false, d.AttemptKey) {
		t.Fatal("the cancelled attempt was handed to the successor")
	}
}
