package engine

import "sync"

// mailbox is an unbounded multi-producer, single-consumer queue. push never
// blocks, so the Waggler layer reporting a result never waits for a busy
// shard; memory is bounded by what is in flight (attempts dispatched,
// rows not yet written). The consumer waits on signal and takes everything
// pending at once, which batches naturally under load.
type mailbox[T any] struct {
	mu     sync.Mutex
	items  []T
	signal chan struct{} // one pending wake-up at most
}

func newMailbox[T any]() *mailbox[T] {
	return &mailbox[T]{signal: make(chan struct{}, 1)}
}

// push appends v and wakes the consumer.
func (m *mailbox[T]) push(v T) {
	m.mu.Lock()
	m.items = append(m.items, v)
	m.mu.Unlock()
	m.wake()
}

// pushAll appends vs and wakes the consumer.
func (m *mailbox[T]) pushAll(vs []T) {
	if len(vs) == 0 {
		return
	}
	m.mu.Lock()
	m.items = append(m.items, vs...)
	m.mu.Unlock()
	m.wake()
}

func (m *mailbox[T]) wake() {
	select {
	case m.signal <- struct{}{}:
	default:
	}
}

// take returns everything pending and hands back spare (emptied) as the
// next buffer, so a steady consumer allocates nothing.
func (m *mailbox[T]) take(spare []T) []T {
	clear(spare)
	m.mu.Lock()
	items := m.items
	m.items = spare[:0]
	m.mu.Unlock()
	return items
}
