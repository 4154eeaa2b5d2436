package remote

import (
	"context"
	"errors"
	"runtime"
	"sync"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// errClosed is the error of a push after the sender closed.
var errClosed = errors.New("remote: stream closed")

// sender serialises the sends of one stream (gRPC streams allow one
// sender at a time) without making anyone wait for the network: push
// queues, one goroutine sends. The queue is unbounded; its producers are
// bounded by what they have in flight (assignments, results, heartbeats
// of one interval). Messages that pile up while the stream is busy are
// coalesced (those of one kind into one, up to maxCoalesced bytes, as far
// as order allows: see coalesce), so a busy stream sends fewer, larger
// messages.
type sender[T proto.Message] struct {
	send func(T) error
	log  *zap.Logger // names the stream

	mu     sync.Mutex
	q      []item[T]
	err    error // first send error, or errClosed
	wake   chan struct{}
	closed chan struct{} // closed by close
	done   chan struct{} // closed when the goroutine returns
}

// item is a queued message; done, if not nil, is closed once the message
// was sent or dropped.
type item[T proto.Message] struct {
	v    T
	done chan struct{}
}

// maxCoalesced bounds a coalesced message, well under the gRPC message
// limit of any node.
const maxCoalesced = 1 << 20

// newSender starts a sender of send's stream; log (with the stream's
// name) hears of a message that can never be sent (not encodable, or too
// large).
func newSender[T proto.Message](send func(T) error, log *zap.Logger) *sender[T] {
	s := &sender[T]{send: send, log: log, wake: make(chan struct{}, 1), closed: make(chan struct{}), done: make(chan struct{})}
	go s.run()
	return s
}

// push queues v; it fails once the stream broke or the sender closed.
func (s *sender[T]) push(v T) error { return s.enqueue(item[T]{v: v}) }

// pushAndWait queues v and waits until it was handed to the stream (or
// dropped: the stream broke, the sender closed) or ctx ends.
func (s *sender[T]) pushAndWait(ctx context.Context, v T) error {
	it := item[T]{v: v, done: make(chan struct{})}
	if err := s.enqueue(it); err != nil {
		return err
	}
	select {
	case <-it.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

func (s *sender[T]) enqueue(it item[T]) error {
	s.mu.Lock()
	if s.err != nil {
		err := s.err
		s.mu.Unlock()
		return err
	}
	s.q = append(s.q, it)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
	return nil
}

func (s *sender[T]) run() {
	defer close(s.done)
	for {
		select {
		case <-s.closed:
			return
		case <-s.wake:
		}
		// The push that woke us is rarely alone: a Waggler host's slots
		// finish and report in bursts. Yielding once lets producers that
		// are ready to run push before we drain, so their messages go as
		// one (a fifth as many on a busy host's Lead stream). On an idle
		// node nothing else is runnable and this returns at once.
		runtime.Gosched()
		for {
			s.mu.Lock()
			q := s.q
			s.q = nil
			s.mu.Unlock()
			if len(q) == 0 {
				break
			}
			q = coalesce(q)
			for i, it := range q {
				err := s.send(it.v)
				if err == nil {
					if it.done != nil {
						close(it.done)
					}
					continue
				}
				if c := status.Code(err); c == codes.Internal || c == codes.ResourceExhausted {
					// gRPC could not encode it (a string that is not
					// UTF-8, say), or it is larger than a message may
					// be. The stream ends as on any send error, is
					// opened again and the message sent again, to fail
					// again: a bug or a misconfiguration, said once per
					// stream rather than passed over as the network's
					// weather.
					s.log.Error("a message cannot be sent (it cannot be encoded, or it is too large): the stream is closed, and will be again when the message is sent again", zap.Error(err))
				}
				// The error first, then the waiters (this message's
				// included): pushAndWait reads it once its message is
				// done.
				s.mu.Lock()
				if s.err == nil {
					s.err = err
				}
				dropped := append(q[i:], s.q...)
				s.q = nil
				s.mu.Unlock()
				release(dropped)
				return
			}
		}
	}
}

// close stops the sender (what is queued is dropped) and waits for its
// goroutine.
func (s *sender[T]) close() {
	s.mu.Lock()
	if s.err == nil {
		s.err = errClosed
	}
	select {
	case <-s.closed:
	default:
		close(s.closed)
	}
	s.mu.Unlock()
	<-s.done
	s.mu.Lock()
	dropped := s.q
	s.q = nil
	s.mu.Unlock()
	release(dropped)
}

// coalesce merges queued messages of one kind (see mergeInto): each into
// the latest earlier message of its kind that it may reach by overtaking
// only messages it may overtake (see overtakes) — so a stream whose
// producers interleave kinds (a result, a start, a result...) still sends
// one message per kind and drain, and nothing arrives before what it must
// follow. Items someone waits for are sent as they are.
func coalesce[T proto.Message](q []item[T]) []item[T] {
	if len(q) < 2 {
		return q
	}
	q = dropAnswered(q)
	if len(q) < 2 {
		return q
	}
	out := q[:1]
	sizes := []int{proto.Size(q[0].v)}
	counts := []int{batchLen(q[0].v)} // items, within MaxBatchItems
	for _, it := range q[1:] {
		n, c := proto.Size(it.v), batchLen(it.v)
		merged := false
		for j := len(out) - 1; j >= 0 && it.done == nil; j-- {
			if out[j].done == nil && sizes[j]+n <= maxCoalesced && counts[j]+c <= MaxBatchItems && mergeInto(out[j].v, it.v) {
				sizes[j] += n
				counts[j] += c
				merged = true
				break
			}
			if !overtakes(it.v, out[j].v) {
				break
			}
		}
		if !merged {
			out = append(out, it)
			sizes = append(sizes, n)
			counts = append(counts, c)
		}
	}
	return out
}

// release closes the done channels of dropped items.
func release[T proto.Message](items []item[T]) {
	for _, it := range items {
		if it.done != nil {
			close(it.done)
		}
	}
}

// ctxRecv reads a stream on a goroutine of its own so that a handler's
// Recv also returns when its context ends — the node stopping ends the
// streams others hold open to it instead of waiting for them to hang up.
// The goroutine exits when the stream's Recv fails, which it does once the
// handler has returned.
type ctxRecv[T any] struct {
	ctx context.Context
	ch  chan recvd[T]
}

type recvd[T any] struct {
	v   T
	err error
}

func newCtxRecv[T any](ctx context.Context, recv func() (T, error)) *ctxRecv[T] {
	r := &ctxRecv[T]{ctx: ctx, ch: make(chan recvd[T])}
	go func() {
		for {
			v, err := recv()
			select {
			case r.ch <- recvd[T]{v, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	return r
}

// Recv returns the next message, the stream's error, or the context's
// cause once it ends.
func (r *ctxRecv[T]) Recv() (T, error) {
	select {
	case m := <-r.ch:
		return m.v, m.err
	case <-r.ctx.Done():
		var zero T
		return zero, context.Cause(r.ctx)
	}
}
