package trust

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"testing"
)

// seeded is a deterministic stream of bytes (for ids and seeds).
func seeded(s string) *bytes.Reader {
	var b []byte
	v := sha256.Sum256([]byte(s))
	for range 4096 {
		b = append(b, v[:]...)
		v = sha256.Sum256(v[:])
	}
	return bytes.NewReader(b)
}

func seedOf(s string) [Size]byte { return sha256.Sum256([]byte(s)) }

// Tokens are H^(N-k)(seed), checked against hashing from the seed.
func TestChainTokens(t *testing.T) {
	for _, n := range []uint32{64, 65, 100, 1000} {
		seed := seedOf("chain")
		c, err := NewChain(7, seed, n)
		if err != nil {
			t.Fatal(err)
		}
		if c.Anchor().Value != hashN(seed, n) || c.Anchor().Length != n || c.Anchor().ChainID != 7 {
			t.Fatalf("n=%d: anchor %+v", n, c.Anchor())
		}
		for k := uint32(1); k <= n; k++ {
			tok, err := c.Next()
			if err != nil {
				t.Fatalf("n=%d token %d: %v", n, k, err)
			}
			if tok.Index != k || tok.Value != hashN(seed, n-k) {
				t.Fatalf("n=%d: token %d is wrong", n, k)
			}
		}
		if _, err := c.Next(); !errors.Is(err, ErrExhausted) {
			t.Fatalf("n=%d: after the last token: %v", n, err)
		}
	}
	if _, err := NewChain(1, seedOf("x"), MinLength-1); err == nil {
		t.Fatal("a chain shorter than MinLength")
	}
}

func signer(t *testing.T, length uint32) *Signer {
	t.Helper()
	s, err := NewSigner(seeded(t.Name()), Options{Length: length})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// take returns the signer's next n stamps.
func take(t *testing.T, s *Signer, n int) []Stamp {
	t.Helper()
	stamps := make([]Stamp, n)
	for i := range stamps {
		st, err := s.Next()
		if err != nil {
			t.Fatal(err)
		}
		stamps[i] = st
	}
	return stamps
}

func TestVerifierOutcomes(t *testing.T) {
	s := signer(t, 256)
	v := NewVerifier(s.Anchor(), 8)
	stamps := take(t, s, 40)
	expect := func(st Stamp, want Outcome) {
		t.Helper()
		if got := v.Verify(st); got != want {
			t.Fatalf("token %d: %s, want %s", st.Token.Index, got, want)
		}
	}
	expect(stamps[0], Accepted)
	expect(stamps[1], Accepted)
	expect(stamps[5], Accepted) // a gap of 4
	expect(stamps[3], Replayed) // before the last accepted: a reorder
	expect(stamps[5], Replayed) // the same again: a replay
	expect(stamps[20], TooFar)  // a gap of 15 > 8
	expect(stamps[13], Accepted)

	other := stamps[14]
	other.Token.ChainID++ // a chain it knows nothing of
	expect(other, UnknownChain)

	forged := stamps[14]
	forged.Token.Value[0] ^= 1
	expect(forged, Forged)
	expect(stamps[14], Forged) // broken until reset
	if !v.Broken() {
		t.Fatal("not broken after a forgery")
	}
	c := v.Counts()
	if c.Accepted != 4 || c.Replays != 2 || c.Forgeries != 2 || c.TooFar != 1 || c.Unknown != 1 {
		t.Fatalf("counts %+v", c)
	}
	v.Reset(s.Anchor()) // back at the anchor: index 6 is within the gap
	expect(stamps[5], Accepted)

	// Indexes no honest sender uses are forgeries.
	for _, idx := range []uint32{0, 257} {
		w := NewVerifier(s.Anchor(), 8)
		bad := stamps[0]
		bad.Token.Index = idx
		if got := w.Verify(bad); got != Forged {
			t.Fatalf("index %d: %s", idx, got)
		}
	}
}

// Another verifier of the same sender starts where one stands.
func TestVerifierAt(t *testing.T) {
	s := signer(t, 256)
	v := NewVerifier(s.Anchor(), 8)
	for range 30 { // far beyond the maxGap from the anchor
		st, _ := s.Next()
		if got := v.Verify(st); got != Accepted {
			t.Fatalf("%s", got)
		}
	}
	w := NewVerifierAt(v.Position(), 8)
	st, _ := s.Next()
	if got := w.Verify(st); got != Accepted {
		t.Fatalf("a verifier started at another's position: %s", got)
	}
	if got := NewVerifier(s.Anchor(), 8).Verify(st); got != TooFar {
		t.Fatalf("one started at the anchor: %s, want too far", got)
	}
}

// A stream that opens late starts from another stream's position: the
// tokens stamped before it, still in flight on it, are accepted once each
// (hashing the known token down to them), a forgery among them is caught,
// and a replay on the stream is not accepted twice.
func TestVerifierAtAcceptsEarlierTokensOnce(t *testing.T) {
	s := signer(t, 256)
	var stamps []Stamp
	for range 20 {
		st, _ := s.Next()
		stamps = append(stamps, st)
	}
	a := NewVerifier(s.Anchor(), 8)
	for _, st := range stamps[:18] {
		if got := a.Verify(st); got != Accepted {
			t.Fatalf("stream A, token %d: %s", st.Token.Index, got)
		}
	}
	b := NewVerifierAt(a.Position(), 8) // knows token 18, accepted nothing
	for _, i := range []int{14, 16, 19} {
		if got := b.Verify(stamps[i]); got != Accepted {
			t.Fatalf("stream B, token %d: %s", stamps[i].Token.Index, got)
		}
	}
	if got := b.Verify(stamps[16]); got != Replayed {
		t.Fatalf("token 17 again on stream B: %s, want replayed", got)
	}
	forged := NewVerifierAt(a.Position(), 8)
	bad := stamps[15]
	bad.Token.Value[0] ^= 1
	if got := forged.Verify(bad); got != Forged {
		t.Fatalf("a forged earlier token: %s", got)
	}
	if got := NewVerifierAt(a.Position(), 8).Verify(stamps[5]); got != TooFar {
		t.Fatalf("a token more than the gap before the position: %s, want too far", got)
	}
}

// A verifier far behind catches up with another's position (Advance): the
// next token costs a short gap instead of being too far; Later orders
// positions, including onto an announced chain.
func TestAdvance(t *testing.T) {
	s := signer(t, 256)
	lead := NewVerifier(s.Anchor(), 8)
	slow := NewVerifier(s.Anchor(), 8)
	var st Stamp
	for range 40 {
		st, _ = s.Next()
		if got := lead.Verify(st); got != Accepted {
			t.Fatal(got)
		}
	}
	st, _ = s.Next()
	if got := slow.Verify(st); got != TooFar {
		t.Fatalf("41 tokens from the anchor: %s, want too far", got)
	}
	if !lead.Position().Later(slow.Position()) || slow.Position().Later(lead.Position()) {
		t.Fatal("Later does not order the positions")
	}
	slow.Advance(lead.Position())
	if got := slow.Verify(st); got != Accepted {
		t.Fatalf("after Advance: %s", got)
	}
	before := slow.Position()
	slow.Advance(before) // not later: nothing moves
	if slow.Position() != before {
		t.Fatal("Advance to the same position moved the verifier")
	}
	next := Anchor{ChainID: s.Anchor().ChainID + 1, Length: 256}
	p := Position{Anchor: s.Anchor(), Index: 3, Next: &next}
	if !(Position{Anchor: next, Index: 1}).Later(p) {
		t.Fatal("a position on the announced chain is not later")
	}
}

// A Signer re-anchors across exhaustion: receivers that see every
// message, or every third, accept them all; one that missed the whole
// announcement window meets an unknown chain and recovers by learning the
// published anchor.
func TestReanchoringKeepsTrust(t *testing.T) {
	s := signer(t, MinLength)
	all := NewVerifier(s.Anchor(), 0)
	third := NewVerifier(s.Anchor(), 0)
	late := NewVerifier(s.Anchor(), 0)
	chains := map[uint64]bool{}
	for i := range 1000 {
		st, err := s.Next()
		if err != nil {
			t.Fatalf("stamp %d: %v", i, err)
		}
		chains[st.Token.ChainID] = true
		if got := all.Verify(st); got != Accepted {
			t.Fatalf("stamp %d (chain %d, index %d): %s", i, st.Token.ChainID, st.Token.Index, got)
		}
		if i%3 == 0 {
			if got := third.Verify(st); got != Accepted {
				t.Fatalf("every third, stamp %d: %s", i, got)
			}
		}
		if i < 20 {
			late.Verify(st)
		}
	}
	if len(chains) < 15 {
		t.Fatalf("only %d chains for 1,000 stamps of %d-token chains", len(chains), MinLength)
	}
	if all.Broken() || third.Broken() || all.Counts().Forgeries > 0 {
		t.Fatal("re-anchoring broke trust")
	}
	st, _ := s.Next()
	if got := late.Verify(st); got != UnknownChain {
		t.Fatalf("a receiver that missed the windows: %s, want unknown chain", got)
	}
	late.Learn(s.Anchor())
	st, _ = s.Next()
	if got := late.Verify(st); got != Accepted {
		t.Fatalf("after learning the published anchor: %s", got)
	}
}

func TestWire(t *testing.T) {
	s := signer(t, MinLength)
	a := s.Anchor()
	got, err := DecodeAnchor(a.Encode())
	if err != nil || got != a {
		t.Fatalf("anchor round trip: %+v %v", got, err)
	}
	if _, err := DecodeAnchor(a.Encode()[:10]); err == nil {
		t.Fatal("a short anchor decoded")
	}
	for range 60 { // into the announcement window
		st, _ := s.Next()
		back, err := StampFromWire(st.Wire())
		if err != nil || back.Token != st.Token || (st.Next == nil) != (back.Next == nil) || (st.Next != nil && *st.Next != *back.Next) {
			t.Fatalf("stamp round trip: %+v %v", back, err)
		}
	}
	if _, err := StampFromWire(StampWire{}); !errors.Is(err, ErrNoStamp) {
		t.Fatalf("an empty stamp: %v", err)
	}
	if _, err := StampFromWire(StampWire{ChainID: 1, Index: 1, Value: []byte("short")}); err == nil {
		t.Fatal("a short token decoded")
	}
}

func BenchmarkSignerNext(b *testing.B) {
	s, err := NewSigner(seeded("bench"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := s.Next(); err != nil {
			b.Fatal(err)
		}
	}
}

// benchVerify verifies a stream of stamps of which the receiver sees
// every every-th: the cost per message received.
func benchVerify(b *testing.B, every int) {
	s, err := NewSigner(seeded("bench"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	anchor := s.Anchor()
	stamps := make([]Stamp, 1<<14) // well before the chain re-anchors
	for i := range stamps {
		stamps[i], _ = s.Next()
	}
	var v *Verifier
	i := len(stamps)
	for b.Loop() {
		if i >= len(stamps) {
			v, i = NewVerifier(anchor, 0), every-1
		}
		if got := v.Verify(stamps[i]); got != Accepted {
			b.Fatalf("%s", got)
		}
		i += every
	}
}

func BenchmarkVerifyConsecutive(b *testing.B) { benchVerify(b, 1) }
func BenchmarkVerifyGap64(b *testing.B)       { benchVerify(b, 64) }

// A receiver that heard nothing while its sender stamped more than the gap
// for others jumps forward to a genuine token (hashing the whole gap once),
// refuses a forged far token for good, and still bounds what lies behind
// what it knows: a jump never hashes backward.
func TestJump(t *testing.T) {
	s := signer(t, 1024)
	behind := NewVerifier(s.Anchor(), 8)
	stamps := take(t, s, 300)
	far := stamps[299]
	if got := behind.Verify(far); got != TooFar {
		t.Fatalf("300 tokens from the anchor: %s, want too far", got)
	}
	if got := behind.Jump(far); got != Accepted {
		t.Fatalf("jumping to a genuine token: %s", got)
	}
	if got := behind.Verify(stamps[299]); got != Replayed {
		t.Fatalf("the same token again: %s, want replayed", got)
	}
	next, _ := s.Next()
	if got := behind.Verify(next); got != Accepted {
		t.Fatalf("the token after the jump: %s (a short gap now)", got)
	}
	if got := behind.Jump(stamps[100]); got != Replayed {
		t.Fatalf("a jump back behind what was accepted: %s, want replayed", got)
	}
	fresh := NewVerifierAt(behind.Position(), 8) // knows token 301, accepted nothing
	if got := fresh.Jump(stamps[10]); got != TooFar {
		t.Fatalf("a jump backward, far before the known token: %s, want too far (never hashed)", got)
	}

	forger := NewVerifier(s.Anchor(), 8)
	bad := stamps[200]
	bad.Token.Value[0] ^= 1
	if got := forger.Jump(bad); got != Forged || !forger.Broken() {
		t.Fatalf("jumping to a forged token: %s (broken %v), want forged", got, forger.Broken())
	}
	if got := forger.Jump(stamps[250]); got != Forged {
		t.Fatalf("after a forgery: %s, want forged (the verifier stays broken)", got)
	}
}
