package center

import (
	"crypto/rand"
	"strings"
	"testing"

	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"

	"github.com/robonet/robonet/internal/clock/clocktest"
	"github.com/robonet/robonet/sentinel"
	"github.com/robonet/robonet/trust"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newTestTrust(t *testing.T, self string, preTrust ...string) *Center {
	t.Helper()
	tc, err := New(Config{Self: self, Logger: zaptest.NewLogger(t), Clock: clocktest.New(), MinTier: trust.Established, PreTrust: preTrust})
	if err != nil {
		t.Fatal(err)
	}
	return tc
}

// Streams of one sender share what they learn: a stream that opens later
// starts where the others stand (not from the anchor), and tokens stamped
// before that, still in flight on it, are accepted once each.
func TestTrustCenterSharesPositions(t *testing.T) {
	sender, receiver := newTestTrust(t, "w1"), newTestTrust(t, "wag")
	receiver.anchorOf = func(peer string) (trust.Anchor, bool) { return sender.Anchor(), peer == "w1" }
	if _, ok := receiver.Verifier("stranger"); ok {
		t.Fatal("a verifier for a node without an anchor")
	}
	a, _ := receiver.Verifier("w1")
	var stamps []trust.Stamp
	for range 6000 { // beyond the gap a verifier checks from the anchor
		s, err := sender.Stamp()
		if err != nil {
			t.Fatal(err)
		}
		stamps = append(stamps, s)
	}
	for _, s := range stamps[:5990] {
		if a.Verify(s) != trust.Accepted {
			t.Fatalf("stream A: token %d", s.Token.Index)
		}
		receiver.Accepted("w1", a)
	}
	b, _ := receiver.Verifier("w1")
	for _, s := range []trust.Stamp{stamps[5985], stamps[5995]} {
		if got := b.Verify(s); got != trust.Accepted {
			t.Fatalf("stream B, token %d: %s", s.Token.Index, got)
		}
	}
}

// The leader's Sentinel turns an observer's proof into a quarantine,
// which the node commits; a released node starts again from zero trust.
func TestTrustCenterSentinelAndRelease(t *testing.T) {
	leader := newTestTrust(t, "server")
	leader.leading = func() bool { return true }
	for range 10 {
		leader.ObservedBy("wag", []sentinel.Observation{{Node: "w1", Kind: sentinel.Heartbeat}, {Node: "w2", Kind: sentinel.Completed, Capability: "c"}})
	}
	leader.ObservedBy("wag", []sentinel.Observation{{Node: "w2", Kind: sentinel.ChainBreak}})
	decided := leader.Decide(true, nil, 4)
	if len(decided) != 1 || decided[0].Action != sentinel.QuarantineNode || decided[0].Node != "w2" || !strings.Contains(decided[0].Reason, "forged") {
		t.Fatalf("decided %+v, want w2 quarantined for a forged token", decided)
	}
	leader.Committed(decided[0])
	if !leader.Distrusted("w2") || leader.Distrusted("w1") {
		t.Fatal("w2 betrayed, w1 not: the leader's book disagrees")
	}
	leader.Quarantined(map[string]bool{"w2": true})
	leader.Quarantined(map[string]bool{}) // released
	for _, v := range leader.View() {
		if v.Name == "w2" {
			t.Fatalf("after its release w2 still has evidence: %+v", v)
		}
	}
	if leader.Distrusted("w2") {
		t.Fatal("a released node is still distrusted")
	}
	// Off the leader, the Sentinel forgets: nothing is decided.
	leader.ObservedBy("wag", []sentinel.Observation{{Node: "w1", Kind: sentinel.ChainBreak}})
	if d := leader.Decide(false, nil, 4); len(d) != 0 {
		t.Fatalf("off the leader the Sentinel decided %+v", d)
	}
	if d := leader.Decide(true, nil, 4); len(d) != 0 {
		t.Fatalf("a former leader's observations decided %+v", d)
	}
}

// A node that is not the leader keeps its observations for the leader,
// bounded, and counts them in its own book (its Wagglers' allowance).
func TestTrustCenterKeepsEvidenceForTheLeader(t *testing.T) {
	tc := newTestTrust(t, "wag")
	for range 3 {
		tc.Observe(sentinel.Observation{Node: "w1", Kind: sentinel.Completed, At: tc.clock.Now()})
	}
	tc.Observe(sentinel.Observation{Node: "wag", Kind: sentinel.Completed}) // itself: not judged
	select {
	case <-tc.Ready():
	default:
		t.Fatal("no signal for waiting observations")
	}
	tc.Observe(sentinel.Observation{Node: "w1", Kind: sentinel.CPU, Value: 10, At: tc.clock.Now()})
	tc.Observe(sentinel.Observation{Node: "w1", Kind: sentinel.CPU, Value: 30, At: tc.clock.Now()})
	got := tc.Drain() // summed by node and kind: one batch, a few items
	if len(got) != 2 || got[0].Kind != sentinel.Completed || got[0].Count != 3 ||
		got[1].Kind != sentinel.CPU || got[1].Count != 2 || got[1].Value != 20 {
		t.Fatalf("drained %+v, want 3 completions and 2 CPU readings of mean 20", got)
	}
	if got := tc.Allowance("w1"); got != 4 {
		t.Fatalf("allowance after 3 completions: %d, want 1 + 3", got)
	}
	if got := newTestTrust(t, "wag", "*").Allowance("anyone"); got < 1<<30 {
		t.Fatalf("a pre-trusted node's allowance: %d, want all its slots", got)
	}
}

// A chain that runs out re-anchors inside stamps that still verify: a
// receiver accepts every stamp across several chains without learning
// anything from gossip, and the sender asks for its new anchor to be
// advertised.
func TestTrustCenterReanchors(t *testing.T) {
	sender, receiver := newTestTrust(t, "w1"), newTestTrust(t, "wag")
	short, err := trust.NewSigner(rand.Reader, trust.Options{Length: trust.MinLength})
	if err != nil {
		t.Fatal(err)
	}
	sender.signer, sender.advertise = short, short.Anchor()
	first := sender.Anchor()
	receiver.anchorOf = func(string) (trust.Anchor, bool) { return first, true } // gossip never catches up
	v, _ := receiver.Verifier("w1")
	chains := map[uint64]bool{}
	for i := range 5 * trust.MinLength {
		s, err := sender.Stamp()
		if err != nil {
			t.Fatal(err)
		}
		chains[s.Token.ChainID] = true
		if got := v.Verify(s); got != trust.Accepted {
			t.Fatalf("stamp %d (token %s): %s", i, s.Token, got)
		}
		receiver.Accepted("w1", v)
	}
	if len(chains) < 4 {
		t.Fatalf("%d chains over %d stamps of chains of %d", len(chains), 5*trust.MinLength, trust.MinLength)
	}
	select {
	case <-sender.changed:
	default:
		t.Fatal("the sender switched chains without asking to advertise its anchor")
	}
	if sender.Anchor() == first {
		t.Fatal("the advertised anchor did not change")
	}
}
