package mesh

import (
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
	"go.uber.org/zap"
)

// rawEvent is a memberlist callback, copied out of memberlist's locks.
type rawEvent struct {
	kind EventKind
	name string
	addr string
	meta []byte
	at   time.Time
}

// eventQueue is an unbounded FIFO between memberlist's callbacks (which
// must not block: they run under memberlist's locks) and the event loop.
// It grows only while the event loop is behind, by at most the number of
// membership changes in that time.
type eventQueue struct {
	mu    sync.Mutex
	items []rawEvent
	ready chan struct{}
}

func newEventQueue() *eventQueue { return &eventQueue{ready: make(chan struct{}, 1)} }

func (q *eventQueue) push(e rawEvent) {
	q.mu.Lock()
	q.items = append(q.items, e)
	q.mu.Unlock()
	signal(q.ready)
}

func (q *eventQueue) drain() []rawEvent {
	q.mu.Lock()
	defer q.mu.Unlock()
	items := q.items
	q.items = nil
	return items
}

// delegate serves memberlist the local metadata. The mesh sends no user
// messages and keeps no extra push/pull state.
type delegate struct{ m *Mesh }

func (d *delegate) NodeMeta(limit int) []byte                  { return d.m.encodeLocalMeta(limit) }
func (d *delegate) NotifyMsg([]byte)                           {}
func (d *delegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (d *delegate) LocalState(join bool) []byte                { return nil }
func (d *delegate) MergeRemoteState(buf []byte, join bool)     {}

// eventDelegate queues memberlist's membership callbacks. NotifyLeave
// cannot tell a graceful leave from a death (memberlist v0.7 passes a Node
// whose State is never updated), so it queues "failed" and the event loop
// turns it into "left" when the node's last metadata says it was leaving.
type eventDelegate struct{ m *Mesh }

func (d *eventDelegate) push(kind EventKind, n *memberlist.Node) {
	d.m.queue.push(rawEvent{kind: kind, name: n.Name, addr: gossipAddr(n), meta: slices.Clone(n.Meta), at: time.Now()})
}

func (d *eventDelegate) NotifyJoin(n *memberlist.Node)   { d.push(EventJoin, n) }
func (d *eventDelegate) NotifyUpdate(n *memberlist.Node) { d.push(EventUpdate, n) }
func (d *eventDelegate) NotifyLeave(n *memberlist.Node)  { d.push(EventFailed, n) }

// eventLoop applies membership callbacks to the member table, fans them
// out to subscribers and wakes the Raft loop.
func (m *Mesh) eventLoop() {
	for {
		select {
		case <-m.stopCh:
			return
		case <-m.queue.ready:
		}
		for _, e := range m.queue.drain() {
			m.handleEvent(e)
		}
		if m.cfg.Server {
			signal(m.wakeRaft)
		} else {
			m.leadership.publish(m.gossipLeadership())
		}
	}
}

func (m *Mesh) handleEvent(e rawEvent) {
	meta, st, err := decodeWire(e.meta)
	if err != nil {
		m.log.Warn("undecodable member metadata", zap.String("member", e.name), zap.Error(err))
		meta = NodeMeta{Name: e.name}
	}
	meta.Name = e.name
	status := StatusAlive
	switch e.kind {
	case EventLeave:
		status = StatusLeft
	case EventFailed:
		status = StatusFailed
		if st.Leaving { // memberlist does not tell left from dead; the node said it was leaving
			e.kind, status = EventLeave, StatusLeft
		}
	}
	lead := m.leadership.current()

	m.mu.Lock()
	r, ok := m.members[e.name]
	if !ok {
		r = &memberRecord{since: e.at}
		m.members[e.name] = r
	}
	if r.Status != status {
		r.since = e.at
	}
	r.NodeMeta = meta
	r.GossipAddr = e.addr
	r.Status = status
	r.status = st
	ev := Event{Kind: e.kind, Member: m.memberLocked(r, lead), At: e.at}
	m.publishLocked(ev)
	m.mu.Unlock()

	if e.kind != EventUpdate {
		m.log.Info("membership", zap.String("event", string(e.kind)), zap.String("member", e.name),
			zap.String("addr", e.addr))
	}
}

// subscriber is one Subscribe call: a bounded buffer that drops its oldest
// event when full, so a slow subscriber never holds up gossip.
type subscriber struct {
	ch      chan Event
	dropped uint64
	closed  bool
}

// Subscribe delivers membership events from now on. A subscriber that
// falls more than Config.EventBuffer events behind loses the oldest ones
// (counted and logged). The channel is closed by the cancel function or
// when the mesh stops.
func (m *Mesh) Subscribe() (<-chan Event, func()) {
	s := &subscriber{ch: make(chan Event, m.cfg.EventBuffer)}
	m.mu.Lock()
	if m.life.State().Stopped() {
		s.closed = true
		close(s.ch)
	} else {
		m.subs[s] = struct{}{}
	}
	m.mu.Unlock()
	cancel := func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		if !s.closed {
			s.closed = true
			delete(m.subs, s)
			close(s.ch)
		}
	}
	return s.ch, cancel
}

// publishLocked delivers ev to every subscriber without blocking: only
// this goroutine sends, so after taking the oldest event out there is
// always room.
func (m *Mesh) publishLocked(ev Event) {
	for s := range m.subs {
		select {
		case s.ch <- ev:
			continue
		default:
		}
		select {
		case <-s.ch:
			s.dropped++
			m.log.Warn("slow membership subscriber: dropped its oldest event",
				zap.Uint64("dropped_total", s.dropped))
		default:
		}
		select {
		case s.ch <- ev:
		default:
		}
	}
}

func (m *Mesh) closeSubscribers() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for s := range m.subs {
		s.closed = true
		close(s.ch)
	}
	clear(m.subs)
}

// leaderBroadcast holds the latest Leadership and hands it to subscribers
// through channels of capacity one that always hold the newest value: a
// publish replaces a value the subscriber has not read yet. Intermediate
// values may be lost; the latest never is.
type leaderBroadcast struct {
	mu     sync.Mutex
	cur    Leadership
	subs   map[chan Leadership]struct{}
	closed bool
}

func newLeaderBroadcast() *leaderBroadcast {
	return &leaderBroadcast{subs: map[chan Leadership]struct{}{}}
}

func (b *leaderBroadcast) current() Leadership {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.cur
}

// publish stores l and reports whether it changed anything.
func (b *leaderBroadcast) publish(l Leadership) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || l == b.cur {
		return false
	}
	b.cur = l
	for ch := range b.subs {
		select { // take out the stale value, if unread
		case <-ch:
		default:
		}
		ch <- l // room is guaranteed: publishers hold mu, readers only take
	}
	return true
}

func (b *leaderBroadcast) subscribe() (<-chan Leadership, func()) {
	ch := make(chan Leadership, 1)
	b.mu.Lock()
	defer b.mu.Unlock()
	ch <- b.cur
	if b.closed {
		close(ch)
		return ch, func() {}
	}
	b.subs[ch] = struct{}{}
	return ch, func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if _, ok := b.subs[ch]; ok {
			delete(b.subs, ch)
			close(ch)
		}
	}
}

func (b *leaderBroadcast) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	for ch := range b.subs {
		close(ch)
	}
	clear(b.subs)
}

// Leadership delivers this node's view of the leadership: the current
// value at once, then every change. Values may be coalesced — a reader
// that falls behind sees only the newest — but the newest is never lost,
// so acting on each received value (not on edges) cannot leave two
// runloops. The channel is closed by the cancel function or when the mesh
// stops (after a final "not leader" value).
func (m *Mesh) Leadership() (<-chan Leadership, func()) { return m.leadership.subscribe() }

// Leader returns this node's current view of the leadership.
func (m *Mesh) Leader() Leadership { return m.leadership.current() }

// gossipLeadership is a worker's view: the alive server that advertises
// leadership in the highest term.
func (m *Mesh) gossipLeadership() Leadership {
	m.mu.Lock()
	defer m.mu.Unlock()
	var best Leadership
	for _, r := range m.members {
		if r.Status != StatusAlive || !r.status.Leader || r.status.Term < best.Term {
			continue
		}
		if r.status.Term == best.Term && best.Leader != "" && r.Name > best.Leader {
			continue // deterministic choice between two claims of one term (transient)
		}
		best = Leadership{Leader: r.Name, Term: r.status.Term, LeaderGRPC: r.GRPCAddr}
	}
	return best
}
