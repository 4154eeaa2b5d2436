package sentinel

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)

func newSentinel(t *testing.T) *Sentinel {
	t.Helper()
	s, err := New("observer", DefaultParams())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *Sentinel) times(node string, kind Kind, n int, at time.Time) {
	for range n {
		s.Observe(Observation{Node: node, Capability: "c", Kind: kind, At: at})
	}
}

func finding(fs []Finding, node string) (Finding, bool) {
	for _, f := range fs {
		if f.Node == node {
			return f, true
		}
	}
	return Finding{}, false
}

func TestLostAttempts(t *testing.T) {
	for _, c := range []struct {
		accepted, lost int
		anomalous      bool
		says           string
	}{
		{12, 6, true, "lost 6 of 12 accepted attempts"},
		{12, 2, false, "lost 2 of 12"},
		{9, 9, false, ""}, // below MinAccepted: silent
	} {
		s := newSentinel(t)
		s.times("w", Accepted, c.accepted, t0)
		s.times("w", Lost, c.lost, t0)
		f, ok := finding(s.Evaluate(t0), "w")
		if f.Anomalous != c.anomalous || (c.says == "" && ok) || (c.says != "" && (!ok || !strings.Contains(f.Reasons[0].Detail, c.says))) {
			t.Errorf("%d of %d lost: %+v", c.lost, c.accepted, f)
		}
	}
}

// Summed observations count as many: 12 accepted and 6 lost in two
// observations are what 18 single ones are.
func TestCounts(t *testing.T) {
	s := newSentinel(t)
	s.Observe(Observation{Node: "w", Kind: Accepted, Count: 12, At: t0})
	s.Observe(Observation{Node: "w", Kind: Lost, Count: 6, At: t0})
	f, ok := finding(s.Evaluate(t0), "w")
	if !ok || !f.Anomalous || !strings.Contains(f.Reasons[0].Detail, "lost 6 of 12 accepted attempts") {
		t.Fatalf("summed observations: %+v", f)
	}
}

// Five peers fail about 5 % of a capability's attempts and one 60 %: only
// it is anomalous, with its z-score; with two peers the detector is
// silent.
func TestFailuresAgainstPeers(t *testing.T) {
	s := newSentinel(t)
	for i, fails := range []int{1, 0, 1, 2, 1} {
		n := fmt.Sprintf("p%d", i)
		s.times(n, Completed, 20-fails, t0)
		s.times(n, Failed, fails, t0)
	}
	s.times("bad", Completed, 8, t0)
	s.times("bad", Failed, 12, t0)
	fs := s.Evaluate(t0)
	if len(fs) != 1 || fs[0].Node != "bad" || !fs[0].Anomalous || fs[0].Reasons[0].Detector != DetectFailures ||
		!strings.Contains(fs[0].Reasons[0].Detail, "failed 60% of c attempts") || !strings.Contains(fs[0].Reasons[0].Detail, "robust z") {
		t.Fatalf("findings %+v", fs)
	}
	two := newSentinel(t)
	two.times("p", Completed, 19, t0)
	two.times("p", Failed, 1, t0)
	two.times("bad", Failed, 20, t0)
	if fs := two.Evaluate(t0); len(fs) != 0 {
		t.Fatalf("two peers: %+v", fs)
	}
}

func TestChainReplaysMismatchesViolations(t *testing.T) {
	s := newSentinel(t)
	s.times("forger", ChainBreak, 1, t0)
	s.times("replayer", Replay, 5, t0) // at the limit: nothing
	s.times("noisy", Replay, 10, t0)   // 10: sub-score 1 × weight 0.8
	s.times("liar", VerifyMismatch, 1, t0)
	s.times("liar2", VerifyMismatch, 2, t0)
	s.times("rude", Violation, 3, t0)
	s.times("w/cheat", Misbehaved, 3, t0)
	s.times("w/slip", Misbehaved, 1, t0)
	fs := s.Evaluate(t0)
	want := map[string]bool{"forger": true, "noisy": true, "liar": false, "liar2": true, "rude": true, "w/cheat": true, "w/slip": false}
	for node, anomalous := range want {
		f, ok := finding(fs, node)
		if !ok || f.Anomalous != anomalous {
			t.Errorf("%s: %+v, want anomalous=%v", node, f, anomalous)
		}
	}
	if _, ok := finding(fs, "replayer"); ok {
		t.Error("5 replays (the limit) were reported")
	}
	if f, _ := finding(fs, "noisy"); f.Score < 0.8-1e-9 || f.Score > 0.8+1e-9 {
		t.Errorf("10 replays: score %v, want 0.8", f.Score)
	}
}

// Resource outliers alone never reach the threshold.
func TestResourcesAlone(t *testing.T) {
	s := newSentinel(t)
	for i := range 5 {
		s.Observe(Observation{Node: fmt.Sprintf("p%d", i), Kind: CPU, Value: float64(10 + i), At: t0})
	}
	s.Observe(Observation{Node: "hog", Kind: CPU, Value: 400, At: t0})
	f, ok := finding(s.Evaluate(t0), "hog")
	if !ok || f.Anomalous || f.Reasons[0].Detector != DetectResources {
		t.Fatalf("hog: %+v", f)
	}
}

// Old observations fall out of the window; the observer never judges
// itself.
func TestWindow(t *testing.T) {
	s := newSentinel(t)
	s.times("w", ChainBreak, 1, t0)
	s.times("observer", ChainBreak, 1, t0)
	if fs := s.Evaluate(t0.Add(9 * time.Minute)); len(fs) != 1 || fs[0].Node != "w" {
		t.Fatalf("within the window: %+v", fs)
	}
	if fs := s.Evaluate(t0.Add(11 * time.Minute)); len(fs) != 0 {
		t.Fatalf("after the window: %+v", fs)
	}
}

// Memory per node stays bounded whatever the rate.
func TestBoundedMemory(t *testing.T) {
	s := newSentinel(t)
	for i := range 100_000 {
		s.Observe(Observation{Node: "w", Kind: Accepted, At: t0.Add(time.Duration(i) * 100 * time.Millisecond)})
	}
	if n := len(s.nodes["w"].buckets); n != DefaultParams().Buckets {
		t.Fatalf("%d buckets after 100,000 observations over 2.8 h", n)
	}
	p := DefaultParams()
	p.MaxNodes = 3
	small, _ := New("o", p)
	for i := range 10 {
		small.Observe(Observation{Node: fmt.Sprintf("n%d", i), Kind: Accepted, At: t0.Add(time.Duration(i) * time.Second)})
	}
	if len(small.nodes) != 3 {
		t.Fatalf("%d nodes followed, limit 3", len(small.nodes))
	}
}

func proposal(node, observer string, at time.Time, detector string) Proposal {
	return Proposal{Node: node, Observer: observer, Score: 0.9, At: at, Reasons: []Reason{{Detector: detector, Score: 1, Detail: detector + " detail"}}}
}

func TestBallot(t *testing.T) {
	b, err := NewBallot(DefaultParams())
	if err != nil {
		t.Fatal(err)
	}
	none := map[string]Quarantine{}
	b.Add(proposal("w", "o1", t0, DetectLost))
	b.Add(proposal("w", "o1", t0, DetectLost)) // the same observer again
	if ds := b.Decide(t0, 3, 10, none); len(ds) != 0 {
		t.Fatalf("one observer of three: %+v", ds)
	}
	if ds := b.Decide(t0, 1, 10, none); len(ds) != 1 || ds[0].Node != "w" {
		t.Fatalf("the only observer: %+v", ds)
	}
	b.Add(proposal("w", "o2", t0.Add(time.Minute), DetectLost))
	ds := b.Decide(t0.Add(time.Minute), 3, 10, none)
	if len(ds) != 1 || ds[0].Action != QuarantineNode || len(ds[0].Observers) != 2 {
		t.Fatalf("two observers of three: %+v", ds)
	}
	// Proposals expire.
	if ds := b.Decide(t0.Add(11*time.Minute), 3, 10, none); len(ds) != 0 {
		t.Fatalf("expired proposals: %+v", ds)
	}
	// A broken chain needs one observer.
	b.Add(proposal("forger", "o1", t0, DetectChain))
	if ds := b.Decide(t0, 3, 10, none); len(ds) != 1 || ds[0].Node != "forger" || !strings.Contains(ds[0].Reason, "proof seen by o1: chain detail") {
		t.Fatalf("a chain break: %+v", ds)
	}
	// So does being outvoted on two verified attempts (score 1), not on one.
	one := proposal("liar1", "o1", t0, DetectMismatch)
	one.Reasons[0].Score = 0.6
	b.Add(one)
	b.Add(proposal("liar2", "o1", t0, DetectMismatch))
	if ds := b.Decide(t0, 3, 10, map[string]Quarantine{"forger": {Since: t0}}); len(ds) != 1 || ds[0].Node != "liar2" {
		t.Fatalf("verification mismatches: %+v", ds)
	}
	b.Forget("liar1")
	// Already quarantined: nothing; the Sentinel's are released after the
	// cool-down, an operator's never.
	q := map[string]Quarantine{
		"forger": {Since: t0, Reason: "x"},
		"ops":    {Since: t0, Reason: "y", Manual: true},
	}
	if ds := b.Decide(t0.Add(29*time.Minute), 3, 10, q); len(ds) != 0 {
		t.Fatalf("during the cool-down: %+v", ds)
	}
	ds = b.Decide(t0.Add(30*time.Minute), 3, 10, q)
	if len(ds) != 1 || ds[0].Node != "forger" || ds[0].Action != ReleaseNode {
		t.Fatalf("after the cool-down: %+v", ds)
	}
}

// Never more than half the nodes at once, the most anomalous first.
func TestBallotLimit(t *testing.T) {
	b, _ := NewBallot(DefaultParams())
	for i, score := range []float64{0.9, 0.95, 0.85} {
		p := proposal(fmt.Sprintf("n%d", i), "o", t0, DetectChain)
		p.Score = score
		b.Add(p)
	}
	ds := b.Decide(t0, 1, 4, map[string]Quarantine{})
	if len(ds) != 2 || ds[0].Node != "n1" || ds[1].Node != "n0" {
		t.Fatalf("4 nodes, 3 proposals: %+v", ds)
	}
	if ds := b.Decide(t0, 1, 4, map[string]Quarantine{"n1": {Since: t0}, "n0": {Since: t0}}); len(ds) != 0 {
		t.Fatalf("half already quarantined: %+v", ds)
	}
}

// A worker program is quarantined on one observer's word (only its
// capability's Waggler sees it), and programs neither count against the
// nodes' share nor take its room.
func TestBallotPrograms(t *testing.T) {
	b, _ := NewBallot(DefaultParams())
	b.Add(proposal("w1/cheat", "o1", t0, DetectMisbehave))
	b.Add(proposal("w2", "o1", t0, DetectLost))
	q := map[string]Quarantine{"w1/old": {Since: t0}, "w3/old": {Since: t0}, "w4": {Since: t0}}
	ds := b.Decide(t0, 3, 4, q)
	if len(ds) != 1 || ds[0].Node != "w1/cheat" || ds[0].Action != QuarantineNode {
		t.Fatalf("one observer of three on a program (and on a node): %+v", ds)
	}
	b.Add(proposal("w2", "o2", t0, DetectLost))
	q["w1/cheat"] = Quarantine{Since: t0}
	if ds := b.Decide(t0, 3, 4, q); len(ds) != 1 || ds[0].Node != "w2" {
		t.Fatalf("one node of four quarantined, three programs: room for a second node: %+v", ds)
	}
}

func BenchmarkObserve(b *testing.B) {
	s, _ := New("o", DefaultParams())
	at := t0
	for b.Loop() {
		s.Observe(Observation{Node: "w", Capability: "c", Kind: Completed, At: at})
		at = at.Add(time.Millisecond)
	}
}

func BenchmarkEvaluate1000Nodes(b *testing.B) {
	s, _ := New("o", DefaultParams())
	for i := range 1000 {
		n := fmt.Sprintf("n%d", i)
		s.times(n, Accepted, 20, t0)
		s.times(n, Completed, 19, t0)
		s.times(n, Failed, 1, t0)
	}
	for b.Loop() {
		s.Evaluate(t0)
	}
}
