package remote

import (
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
	"github.com/robonet/robonet/sentinel"
	"github.com/robonet/robonet/trust"
)

// Trust is what the Work and Lead streams need of the node's hash-chain
// trust (HCTH, package trust). What a node sends its Wagglers (Work
// streams) and its leader (Lead streams) carries its stamps; what it
// receives from them is verified, one trust.Verifier per stream (a stream
// is ordered; the node's streams share positions through the Trust). A
// nil Trust stamps and checks nothing (tests of the streams alone).
type Trust interface {
	// Stamp returns the node's next stamp.
	Stamp() (trust.Stamp, error)
	// Verifier returns a verifier for a new stream from peer, started
	// from what this node knows of peer's chain (its published anchor,
	// or where its other streams stand); false when it knows nothing
	// yet (peer's metadata has not arrived).
	Verifier(peer string) (*trust.Verifier, bool)
	// CatchUp moves v to peer's newest published anchor and to where
	// this node's other streams from peer stand.
	CatchUp(peer string, v *trust.Verifier)
	// Accepted shares the position of v, which just accepted a stamp of
	// peer, with the node's other streams.
	Accepted(peer string, v *trust.Verifier)
	// Betrayed records that peer forged a stamp (reason says where): its
	// trust drops to zero and its streams are cut.
	Betrayed(peer, reason string)
	// Distrusted reports whether peer betrayed this node: its streams are
	// refused until it is released from quarantine.
	Distrusted(peer string) bool
	// Observe is told what a stream saw peer do.
	Observe(o sentinel.Observation)
}

// maxUnverified is how many stamps in a row a stream may carry that
// cannot be verified yet (an unknown chain: the sender restarted and its
// metadata is still on its way; or beyond the gap) before the stream is
// closed, for the sender to open it again.
const maxUnverified = 3

// stampOf returns the wire form of t's next stamp (nil without a Trust).
func stampOf(t Trust) (*robonetv1.Stamp, error) {
	if t == nil {
		return nil, nil
	}
	s, err := t.Stamp()
	if err != nil {
		return nil, err
	}
	w := s.Wire()
	return &robonetv1.Stamp{ChainId: w.ChainID, Index: w.Index, Token: w.Value, NextAnchor: w.Next}, nil
}

// stamped wraps a stream's send with the node's stamp (set puts it on a
// message): the sender's goroutine calls it in order, so the stamps on one
// stream increase.
func stamped[T any](t Trust, send func(T) error, set func(T, *robonetv1.Stamp)) func(T) error {
	if t == nil {
		return send
	}
	return func(m T) error {
		st, err := stampOf(t)
		if err != nil {
			return status.Errorf(codes.Internal, "stamping a message: %v", err)
		}
		set(m, st)
		return send(m)
	}
}

func setWorkStamp(m *robonetv1.WorkRequest, s *robonetv1.Stamp)  { m.Stamp = s }
func setLeadStamp(m *robonetv1.LeadResponse, s *robonetv1.Stamp) { m.Stamp = s }

// streamCheck verifies the stamps of one stream from peer.
type streamCheck struct {
	t          Trust
	peer, what string
	v          *trust.Verifier
	unverified int
}

// newStreamCheck starts checking a stream of peer (what names the stream
// for errors). With a nil Trust every message passes.
func newStreamCheck(t Trust, peer, what string) (*streamCheck, error) {
	c := &streamCheck{t: t, peer: peer, what: what}
	if t == nil {
		return c, nil
	}
	if t.Distrusted(peer) {
		return nil, status.Errorf(codes.PermissionDenied, "%s: node %s forged a hash-chain token and is distrusted until an operator or the cool-down releases it from quarantine", what, peer)
	}
	v, ok := t.Verifier(peer)
	if !ok {
		return nil, status.Errorf(codes.Unavailable, "%s: the hash-chain anchor of node %s is not known here yet (its metadata is on its way): open the stream again", what, peer)
	}
	c.v = v
	return c, nil
}

// check judges one message's stamp: keep reports whether to act on the
// message; err ends the stream (a forgery, a missing stamp, too many that
// cannot be verified). Replays are dropped and counted.
func (c *streamCheck) check(p *robonetv1.Stamp, heartbeat bool) (keep bool, err error) {
	if c.t == nil {
		return true, nil
	}
	now := time.Now()
	if c.t.Distrusted(c.peer) {
		return false, status.Errorf(codes.PermissionDenied, "%s: node %s is distrusted: it forged a hash-chain token", c.what, c.peer)
	}
	st, err := trust.StampFromWire(trust.StampWire{ChainID: p.GetChainId(), Index: p.GetIndex(), Value: p.GetToken(), Next: p.GetNextAnchor()})
	if err != nil {
		c.t.Observe(sentinel.Observation{Node: c.peer, Kind: sentinel.Violation, At: now})
		return false, status.Errorf(codes.InvalidArgument, "%s: every message carries the sender's hash-chain stamp: %v", c.what, err)
	}
	o := c.v.Verify(st)
	if o == trust.TooFar || o == trust.UnknownChain {
		c.t.CatchUp(c.peer, c.v)
		o = c.v.Verify(st)
	}
	if o == trust.TooFar {
		// Nothing known here is recent enough: the peer stamped more for
		// others than the gap allows since this node last heard from it.
		// Hashing forward all the way is bounded by its chain's length;
		// refusing would refuse the peer until its next chain.
		o = c.v.Jump(st)
	}
	switch o {
	case trust.Accepted:
		c.unverified = 0
		c.t.Accepted(c.peer, c.v)
		if heartbeat {
			c.t.Observe(sentinel.Observation{Node: c.peer, Kind: sentinel.Heartbeat, At: now})
		}
		return true, nil
	case trust.Replayed:
		c.t.Observe(sentinel.Observation{Node: c.peer, Kind: sentinel.Replay, At: now})
		return false, nil
	case trust.Forged:
		reason := c.what + ": token " + st.Token.String() + " does not hash to the sender's chain"
		c.t.Betrayed(c.peer, reason)
		c.t.Observe(sentinel.Observation{Node: c.peer, Kind: sentinel.ChainBreak, At: now})
		return false, status.Errorf(codes.PermissionDenied, "%s: a forged hash-chain token (%s): node %s is distrusted", c.what, st.Token, c.peer)
	}
	if c.unverified++; c.unverified >= maxUnverified {
		return false, status.Errorf(codes.Unavailable, "%s: %d stamps in a row could not be verified (%s): open the stream again", c.what, c.unverified, o)
	}
	return false, nil
}
