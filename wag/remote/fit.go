package remote

import (
	"fmt"
	"iter"

	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
	"github.com/robonet/robonet/wag"
)

// Message limits between nodes. Each end of a Waggler stream says the
// largest message its node takes, its message-bytes (LeadOpen and
// LeadReady, WorkRegister and WorkReady), and a sender never sends one
// larger than the smaller of that and its own. What a sender merges stays
// far below either (maxCoalesced, runs); what cannot fit alone
// — a result or report whose output, a handoff or assignment whose input,
// is larger than a node with a smaller message-bytes takes — fails its
// attempt with an error that names the setting. Sent anyway, the receiver
// would refuse it and end the stream, and the sender would send it again
// on the next one, for ever, with everything queued behind it.

// envelopeRoom is what a message adds to the one item it carries: the
// tags and lengths of the messages around it (a few bytes each), the
// hash-chain stamp (about 100 bytes) and gRPC's framing.
const envelopeRoom = 256

// said is a node's own limit (an option, 0: not said) as it tells a peer.
func said(own int) uint64 { return uint64(max(own, 0)) }

// limit is the largest message one end may send the other: the smaller of
// this node's (own) and the peer's, either 0 when it was not said (no
// limit known).
func limit(own int, peer uint64) int {
	p := int(min(peer, 1<<40))
	switch {
	case own <= 0:
		return p
	case p == 0:
		return own
	default:
		return min(own, p)
	}
}

// fieldRoom bounds what one field of a message takes besides its
// contents: a tag (one byte for our field numbers) and a length or a
// varint value (at most ten).
const fieldRoom = 11

// keyBound bounds proto.Size of an attempt key.
func keyBound(k *robonetv1.AttemptKey) int {
	return len(k.GetInstanceId()) + len(k.GetExecutionId()) + 3*fieldRoom
}

// dispatchBound bounds proto.Size of a Dispatch, computed from its
// variable-length fields (proto.Size walks the whole message, a cost
// every attempt would pay on the leader and the Waggler's node; a bound
// within a few hundred bytes is as good for a limit of megabytes).
func dispatchBound(d *robonetv1.Dispatch) int {
	n := keyBound(d.GetKey()) + len(d.GetWorkflow()) + len(d.GetTask()) + len(d.GetCapability()) + len(d.GetAction()) +
		len(d.GetInputJson()) + len(d.GetGroup()) + len(d.GetNode()) + 13*fieldRoom
	for _, a := range d.GetAvoid() {
		n += len(a) + fieldRoom
	}
	return n
}

// handoffBound bounds proto.Size of a Handoff.
func handoffBound(h *robonetv1.Handoff) int {
	return dispatchBound(h.GetDispatch()) + len(h.GetWorkerId()) + 5*fieldRoom
}

// slotAssignmentBound bounds proto.Size of a SlotAssignment.
func slotAssignmentBound(sa *robonetv1.SlotAssignment) int {
	return dispatchBound(sa.GetAssignment().GetDispatch()) + len(sa.GetWorkerId()) + 4*fieldRoom
}

// resultBound bounds proto.Size of a WagResult.
func resultBound(r *robonetv1.WagResult) int {
	return keyBound(r.GetKey()) + len(r.GetOutputJson()) + len(r.GetError()) + len(r.GetWorkerId()) + 8*fieldRoom
}

// reportBound bounds proto.Size of a Report.
func reportBound(r *robonetv1.Report) int {
	return keyBound(r.GetKey()) + len(r.GetOutputJson()) + len(r.GetError()) + len(r.GetWorkerId()) + 10*fieldRoom
}

// fits reports whether a message carrying one item of itemSize bytes (a
// result, report, handoff or assignment: its bound) is within limit bytes
// (0: no limit), and the message's size.
func fits(itemSize, limit int) (size int, ok bool) {
	size = itemSize + envelopeRoom
	return size, limit == 0 || size <= limit
}

// tooLarge is the error of an attempt whose message of size bytes, for
// its what (output, input), is over limit on its way to to (a node, "the
// leader x").
func tooLarge(what string, size, limit int, to string) error {
	return fmt.Errorf("%w: the attempt's %s makes a message of %d bytes, and messages to %s are at most %d bytes (the smaller message-bytes of the two nodes): "+
		"give every node the same message-bytes, larger than output-bytes and eval-result-bytes", wag.ErrTooLarge, what, size, to, limit)
}

// runs yields the runs [start, end) that items of the given sizes split
// into: at most maxPerRequest items and maxCoalesced bytes each — one
// larger item makes a run alone — so that what a node queued up (results
// or reports sent again to a new session, thousands of handoffs at once)
// crosses in messages a peer takes. It allocates nothing: it runs for
// every result a host sends.
func runs(sizes []int) iter.Seq2[int, int] {
	return func(yield func(start, end int) bool) {
		start, bytes := 0, 0
		for i, n := range sizes {
			if i > start && (i-start == maxPerRequest || bytes+n > maxCoalesced) {
				if !yield(start, i) {
					return
				}
				start, bytes = i, 0
			}
			bytes += n
		}
		if start < len(sizes) {
			yield(start, len(sizes))
		}
	}
}

// outcomesWithin encodes attempts' outcomes (results, reports) for a peer,
// to, that takes messages of up to lim bytes. One that cannot be encoded,
// or whose message would be larger, is sent as the failure failed makes of
// it: the attempt fails rather than the stream. It returns the encodings
// and their sizes (for runs).
func outcomesWithin[I any, P proto.Message](items []I, lim int, to string, log *zap.Logger,
	encode func(I) (P, error), bound func(P) int, failed func(I, error) P) ([]P, []int) {
	ps := make([]P, len(items))
	sizes := make([]int, len(items))
	for i, it := range items {
		p, err := encode(it)
		n := 0
		if err == nil {
			n = bound(p)
			if size, ok := fits(n, lim); !ok {
				err = tooLarge("output", size, lim, to)
			}
		}
		if err != nil {
			log.Warn("an attempt's outcome cannot be sent; it is sent as a failure", zap.Error(err))
			p = failed(it, err)
			n = bound(p)
		}
		ps[i], sizes[i] = p, n
	}
	return ps, sizes
}

// warnIfLimitsDiffer tells the operator, once per stream, that the two
// nodes of a stream take messages of different sizes: an attempt whose
// input or output fits one but not the other will fail.
func warnIfLimitsDiffer(log *zap.Logger, own int, peer uint64, peerNode string) {
	if own <= 0 || peer == 0 || uint64(own) == peer {
		return
	}
	log.Warn("this node and its peer take messages of different sizes: attempts whose input or output is larger than the smaller will fail; give every node the same message-bytes",
		zap.String("peer", peerNode), zap.Int("message_bytes", own), zap.Uint64("peer_message_bytes", peer))
}
