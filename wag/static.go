package wag

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"sync"
)

// StaticDirectory is a Directory of one node that holds the Waggler roles
// it is given: a program that embeds the Waggler layer without a mesh, and
// tests. A mesh uses the Raft control state instead (package node).
type StaticDirectory struct {
	node string
	host *WagglerHost

	mu      sync.Mutex
	roles   map[string]Role
	changed chan struct{}
}

var _ Directory = (*StaticDirectory)(nil)

// NewStaticDirectory returns a directory in which node (whose Waggler host
// is host) holds no role yet.
func NewStaticDirectory(node string, host *WagglerHost) *StaticDirectory {
	return &StaticDirectory{node: node, host: host, roles: map[string]Role{}, changed: make(chan struct{})}
}

// Assign makes this node the Waggler of capability at epoch.
func (d *StaticDirectory) Assign(capability string, epoch uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.roles[capability] = Role{Node: d.node, Epoch: epoch}
	close(d.changed)
	d.changed = make(chan struct{})
}

// Quarantined implements Directory: a mesh of one quarantines nobody.
func (d *StaticDirectory) Quarantined() []string { return nil }

// Roles implements Directory.
func (d *StaticDirectory) Roles() map[string]Role {
	d.mu.Lock()
	defer d.mu.Unlock()
	return maps.Clone(d.roles)
}

// Changed implements Directory.
func (d *StaticDirectory) Changed() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.changed
}

// Open implements Directory: a session with this node's host.
func (d *StaticDirectory) Open(_ context.Context, node string, owner Owner, up Uplink) (Link, error) {
	if node != d.node {
		return nil, fmt.Errorf("wag: node %s is not reachable from a static directory of %s", node, d.node)
	}
	return d.host.OpenOwner(owner, up)
}

// LocalTarget is the source of a Waggler on this node: every pool works
// for it directly.
func LocalTarget(w *Waggler) TargetSource {
	return TargetSource{Key: w.name + "@" + strconv.FormatUint(w.epoch, 10), New: func(func() []Running) Target { return w }}
}

// TargetKey is the TargetSource.Key of the Waggler of capability at epoch
// on node, wherever the pool runs.
func TargetKey(node, capability string, epoch uint64) string {
	return node + "/" + capability + "@" + strconv.FormatUint(epoch, 10)
}

// FollowLocal attaches each pool of workers to the Waggler of its
// capability on host whenever host's roles change: the wiring of a node
// whose Wagglers and workers are all its own. (Across a mesh, package node
// attaches pools to remote Wagglers too.)
func FollowLocal(workers *WorkerHost, host *WagglerHost) {
	attach := func() {
		for capability := range workers.Capabilities() {
			if w := host.Waggler(capability); w != nil {
				workers.Attach(capability, LocalTarget(w))
			}
		}
	}
	host.OnRoles(attach)
	attach()
}
