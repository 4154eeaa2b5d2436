package engine

import "sync"

// eventLog is the in-memory event stream of one held instance: the last
// size events in a ring, numbered consecutively. The owning shard appends;
// any number of watchers read concurrently and wait for the next append.
// Appending never waits for a watcher: one that falls behind the ring gets
// a snapshot instead of the events it missed.
//
// Numbering: the first log of an instance under a term starts after
// term<<32, so numbers only grow across owners and restarts (terms grow);
// a shard that holds the same instance again under the same term continues
// where its previous log ended.
type eventLog struct {
	mu   sync.Mutex
	size int
	ring []Event // grows to size, then wraps
	head int     // index of the oldest event once the ring is full
	next uint64  // the number of the next event
	// notify is closed at the next append or at close; made when a reader
	// first needs it (most events have no watcher waiting).
	notify chan struct{}
	closed bool // no more events: the instance finished or left this engine
}

func newEventLog(size int, last uint64) *eventLog {
	return &eventLog{size: size, next: last + 1}
}

// closedChan is the wait channel of a closed log.
var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// waitLocked returns the channel closed at the next append or at close;
// l.mu held.
func (l *eventLog) waitLocked() <-chan struct{} {
	if l.closed {
		return closedChan
	}
	if l.notify == nil {
		l.notify = make(chan struct{})
	}
	return l.notify
}

// append numbers ev and adds it; it returns the number.
func (l *eventLog) append(ev Event) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return 0
	}
	ev.Seq = l.next
	l.next++
	if len(l.ring) < l.size {
		if len(l.ring) == cap(l.ring) {
			l.grow()
		}
		l.ring = append(l.ring, ev)
	} else {
		l.ring[l.head] = ev
		l.head = (l.head + 1) % l.size
	}
	if l.notify != nil {
		close(l.notify)
		l.notify = nil
	}
	return ev.Seq
}

// ringStart is the ring's first capacity. Most instances (a chain of a few
// tasks) never log more; one that does gets the whole ring at once. Left to
// append, a ring of 1,024 events would be allocated and copied a dozen
// times on its way there: a seventh of all a node allocated running
// spreads of 500 tasks.
const ringStart = 64

// grow makes room in a full ring that is not yet size long: ringStart
// events at first, then size.
func (l *eventLog) grow() {
	n := l.size
	if cap(l.ring) == 0 {
		n = min(l.size, ringStart)
	}
	ring := make([]Event, len(l.ring), n)
	copy(ring, l.ring)
	l.ring = ring
}

// last returns the number of the latest event (or the one before the
// first, if there is none).
func (l *eventLog) last() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.next - 1
}

// close ends the log; waiting readers wake up.
func (l *eventLog) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		l.closed = true
		if l.notify != nil {
			close(l.notify)
			l.notify = nil
		}
	}
}

// read returns up to limit events after seq. ok is false when seq is not
// covered by the log (too old, or from another log): the reader needs a
// snapshot. wait is closed at the next append or at close; closed reports
// that no more events will come.
func (l *eventLog) read(seq uint64, limit int, buf []Event) (evs []Event, ok bool, wait <-chan struct{}, closed bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	first := l.next - uint64(len(l.ring)) // number of the oldest event held
	if seq+1 < first || seq >= l.next {
		return buf[:0], false, l.waitLocked(), l.closed
	}
	evs = buf[:0]
	for s := seq + 1; s < l.next && len(evs) < limit; s++ {
		evs = append(evs, l.ring[(l.head+int(s-first))%len(l.ring)])
	}
	return evs, true, l.waitLocked(), l.closed
}
