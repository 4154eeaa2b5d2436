package trust

import "fmt"

// Outcome is what a Verifier made of a stamp.
type Outcome int

// Outcomes of Verify.
const (
	// Accepted: a genuine token, later than the last accepted.
	Accepted Outcome = iota + 1
	// Replayed: a token at or before the last accepted one (a replay, or
	// a message reordered): ignored. Not a betrayal.
	Replayed
	// Forged: the token is not the sender's, or an index no honest
	// sender uses, of a chain the receiver knows: a betrayal. The
	// verifier stays broken until Reset.
	Forged
	// TooFar: more than the verifier's maximum gap after the last
	// accepted token; not verified (the receiver may fetch a fresher
	// anchor). Not a betrayal.
	TooFar
	// UnknownChain: a chain the receiver knows no anchor of (the sender
	// restarted): not verified; the receiver looks up the sender's
	// published anchor and calls Learn. Not a betrayal.
	UnknownChain
)

func (o Outcome) String() string {
	switch o {
	case Accepted:
		return "accepted"
	case Replayed:
		return "replayed"
	case Forged:
		return "forged"
	case TooFar:
		return "too far"
	case UnknownChain:
		return "unknown chain"
	}
	return fmt.Sprintf("outcome(%d)", int(o))
}

// DefaultMaxGap is a Verifier's default bound on the gap it verifies:
// 4,096 hashes, about 0.5 ms.
const DefaultMaxGap = 4096

// Counts are a Verifier's outcomes so far.
type Counts struct {
	Accepted, Replays, Forgeries, TooFar, Unknown uint64
}

// Verifier checks one sender's stamps on one ordered channel (a stream).
// It keeps a known token of the sender's chain — the latest it accepted
// or was given — and a floor: the index of the last token it accepted.
// A token above the floor is genuine when hashing the later of it and the
// known token down to the earlier gives the earlier (a gap of g costs g
// hashes, bounded by maxGap); a token at or below the floor is a replay.
// Several verifiers of one sender, one per stream, share what they learn
// through Positions (NewVerifierAt, Advance): a stream that opens late
// starts from a recent token, not from the anchor, and still accepts the
// earlier tokens still in flight on it. A stamp that announces the
// sender's next chain, on a token that verifies, makes the verifier
// accept that chain's tokens (from its anchor) and move to it. A Verifier
// is not safe for concurrent use.
type Verifier struct {
	cur      Anchor
	floor    uint32     // index of the last token accepted here (0: none)
	knownIdx uint32     // a genuine token of cur: its index and value
	knownVal [Size]byte //
	next     *Anchor
	maxGap   uint32
	broken   bool
	counts   Counts
}

// NewVerifier starts from a sender's published anchor. maxGap 0 means
// DefaultMaxGap.
func NewVerifier(a Anchor, maxGap uint32) *Verifier {
	if maxGap == 0 {
		maxGap = DefaultMaxGap
	}
	return &Verifier{cur: a, knownVal: a.Value, maxGap: maxGap}
}

// Position is what a Verifier knows of its sender's chain: a genuine
// token (and the announced next chain), for another verifier of the same
// sender to start from (NewVerifierAt) or catch up with (Advance) instead
// of hashing all the way from the anchor.
type Position struct {
	Anchor Anchor
	Index  uint32
	Value  [Size]byte
	Next   *Anchor
}

// Position returns what v knows.
func (v *Verifier) Position() Position {
	p := Position{Anchor: v.cur, Index: v.knownIdx, Value: v.knownVal}
	if v.next != nil {
		n := *v.next
		p.Next = &n
	}
	return p
}

// Later reports whether p is further along the sender's chains than q:
// on the same chain at a higher index, or on the chain q announced.
func (p Position) Later(q Position) bool {
	if p.Anchor.ChainID == q.Anchor.ChainID {
		return p.Index > q.Index || (p.Next != nil && q.Next == nil)
	}
	return q.Next != nil && q.Next.ChainID == p.Anchor.ChainID
}

// NewVerifierAt starts a verifier of a new stream from a position another
// verifier of the same sender reached: with nothing accepted yet, so the
// stream's first tokens may be earlier than the position (stamped before,
// still in flight) and are accepted once each.
func NewVerifierAt(p Position, maxGap uint32) *Verifier {
	v := NewVerifier(p.Anchor, maxGap)
	v.knownIdx, v.knownVal = p.Index, p.Value
	if p.Next != nil {
		n := *p.Next
		v.next = &n
	}
	return v
}

// Advance moves v's known token to p when p is later on the same chain,
// or onto the chain v's sender announced (keeping v's floor on the
// current one): a later stamp then costs a short gap.
func (v *Verifier) Advance(p Position) {
	switch {
	case v.broken:
	case p.Anchor.ChainID == v.cur.ChainID:
		if p.Index > v.knownIdx {
			v.knownIdx, v.knownVal = p.Index, p.Value
		}
		if v.next == nil && p.Next != nil {
			n := *p.Next
			v.next = &n
		}
	case v.next != nil && p.Anchor.ChainID == v.next.ChainID:
		v.cur, v.next = p.Anchor, nil
		v.floor, v.knownIdx, v.knownVal = 0, p.Index, p.Value
		if p.Next != nil {
			n := *p.Next
			v.next = &n
		}
	}
}

// Verify checks s.
func (v *Verifier) Verify(s Stamp) Outcome { return v.count(v.verify(s, v.maxGap)) }

// count adds an outcome to the verifier's counts and returns it.
func (v *Verifier) count(o Outcome) Outcome {
	switch o {
	case Accepted:
		v.counts.Accepted++
	case Replayed:
		v.counts.Replays++
	case Forged:
		v.counts.Forgeries++
	case TooFar:
		v.counts.TooFar++
	case UnknownChain:
		v.counts.Unknown++
	}
	return o
}

// verify checks s, hashing at most ahead tokens forward from the known
// token (or from the next chain's anchor); a token behind the known one
// is always within maxGap.
func (v *Verifier) verify(s Stamp, ahead uint32) Outcome {
	if v.broken {
		return Forged
	}
	t := s.Token
	switch {
	case t.ChainID == v.cur.ChainID:
		if t.Index == 0 || t.Index > v.cur.Length {
			v.broken = true
			return Forged
		}
		if t.Index <= v.floor {
			return Replayed
		}
		genuine := false
		if t.Index >= v.knownIdx {
			gap := t.Index - v.knownIdx
			if gap > ahead {
				return TooFar
			}
			genuine = hashN(t.Value, gap) == v.knownVal
		} else {
			// Earlier than the known token: that token hashes down to it.
			gap := v.knownIdx - t.Index
			if gap > v.maxGap {
				return TooFar
			}
			genuine = hashN(v.knownVal, gap) == t.Value
		}
		if !genuine {
			v.broken = true
			return Forged
		}
		v.floor = t.Index
		if t.Index > v.knownIdx {
			v.knownIdx, v.knownVal = t.Index, t.Value
		}
		if n := s.Next; n != nil && n.ChainID != v.cur.ChainID && n.Length >= MinLength && n.Length <= MaxLength {
			a := *n
			v.next = &a
		}
		return Accepted
	case v.next != nil && t.ChainID == v.next.ChainID:
		// The announced next chain, verified from its anchor.
		if t.Index == 0 || t.Index > v.next.Length {
			v.broken = true
			return Forged
		}
		if t.Index > ahead {
			return TooFar
		}
		if hashN(t.Value, t.Index) != v.next.Value {
			v.broken = true
			return Forged
		}
		v.cur, v.next = *v.next, nil
		v.floor, v.knownIdx, v.knownVal = t.Index, t.Index, t.Value
		return Accepted
	}
	return UnknownChain
}

// Jump verifies a stamp Verify found TooFar because it lies further ahead
// of the known token than the maximum gap: a sender that stamped many
// messages to others while this receiver heard nothing of it (a Waggler
// host the leader had no stream from for a while). Jump hashes the whole
// gap, but only forward from the known token (or from the announced next
// chain's anchor), and the known token moves to the stamp's: the hashing a
// sender can cause on one chain is bounded by the chain's length. Tokens
// earlier than the known one are still bounded by the maximum gap, as in
// Verify: each of those costs its distance again.
func (v *Verifier) Jump(s Stamp) Outcome { return v.count(v.verify(s, MaxLength)) }

// Learn moves to a sender's newly published anchor (it restarted, or
// re-anchored while this receiver heard nothing); a no-op for the chain
// already verified. A broken verifier stays broken: a betrayal ends only
// with Reset.
func (v *Verifier) Learn(a Anchor) {
	if a.ChainID == v.cur.ChainID {
		return
	}
	v.cur, v.floor, v.knownIdx, v.knownVal, v.next = a, 0, 0, a.Value, nil
}

// Reset starts over from a, forgetting a betrayal (the sender was released
// from quarantine and starts from zero trust).
func (v *Verifier) Reset(a Anchor) {
	v.broken = false
	v.cur, v.floor, v.knownIdx, v.knownVal, v.next = a, 0, 0, a.Value, nil
}

// Broken reports whether v saw a betrayal.
func (v *Verifier) Broken() bool { return v.broken }

// Counts returns the outcomes so far.
func (v *Verifier) Counts() Counts { return v.counts }
