package trust

import (
	"math"
	"slices"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)

func book(t *testing.T) *Book {
	t.Helper()
	b, err := NewBook(DefaultParams(), "me")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A scripted life under the default parameters, every number worked out
// from the formula: a new peer climbs one completion at a time, holds its
// tier through a failure (hysteresis), falls after enough of them, comes
// back only by meeting the minimums again, and decays without evidence.
func TestTiersRiseAndFall(t *testing.T) {
	b := book(t)
	now := t0
	const p = "w1"
	complete := func(n int) {
		for range n {
			b.Observe(p, TaskCompleted, 1, now)
		}
	}
	want := func(step string, tier Tier, allowance int) {
		t.Helper()
		if got := b.Tier(p, now); got != tier {
			t.Fatalf("%s: tier %s, want %s (score %.3f)", step, got, tier, b.Score(p, now))
		}
		if got := b.Allowance(p, Established, 32, now); got != allowance {
			t.Fatalf("%s: allowance %d, want %d", step, got, allowance)
		}
	}
	want("new", Unverified, 1)
	complete(4)
	want("4 completions (good 4 < 5)", Unverified, 5)
	complete(1)
	want("5 completions (score 6/7)", Provisional, 6)
	complete(19)
	want("24 completions", Provisional, 25)
	complete(1)
	want("25 completions (score 26/27)", Established, 32)
	complete(5)                      // good 30
	b.Observe(p, TaskFailed, 3, now) // bad 9: score 31/41 = 0.756, above 0.8 − 0.05
	want("three failures at 30 completions", Established, 32)
	b.Observe(p, TaskFailed, 1, now) // bad 12: score 31/44 = 0.705
	want("a fourth failure", Provisional, 31)
	complete(20) // good 50: score 51/64 = 0.797 < 0.8
	want("50 completions, 12 bad", Provisional, 32)
	complete(1) // good 51: score 52/65 = 0.8
	want("51 completions, 12 bad", Established, 32)

	// Decay: two half-lives later both masses are a quarter.
	now = now.Add(48 * time.Hour)
	if s := b.Score(p, now); math.Abs(s-(1+51.0/4)/(2+51.0/4+3)) > 1e-9 {
		t.Fatalf("decayed score %v", s)
	}
	want("two half-lives later (good 12.75 < 20)", Provisional, 13)
}

// Probation's steps are not taken back by the decay of the seconds
// between a completion and the next question.
func TestAllowanceStepsSurviveDecay(t *testing.T) {
	b := book(t)
	for i := range 3 {
		b.Observe("w", TaskCompleted, 1, t0.Add(time.Duration(i)*time.Second))
	}
	if got := b.Allowance("w", Established, 32, t0.Add(10*time.Second)); got != 4 {
		t.Fatalf("three completions, 10 s later: allowance %d, want 4", got)
	}
	if got := b.Allowance("w", Established, 32, t0.Add(24*time.Hour)); got != 2 {
		t.Fatalf("three completions, a half-life later: allowance %d, want 2 (good 1.5)", got)
	}
}

func TestTrusted(t *testing.T) {
	b := book(t)
	for range 249 {
		b.Observe("w", TaskCompleted, 1, t0)
	}
	if got := b.Tier("w", t0); got != Established {
		t.Fatalf("249 completions: %s", got)
	}
	b.Observe("w", TaskCompleted, 1, t0)
	if got := b.Tier("w", t0); got != Trusted {
		t.Fatalf("250 completions: %s", got)
	}
	// Heartbeats count a little: 20 of them are one completion.
	b.Observe("h", HeartbeatOK, 100, t0)
	if s := b.Score("h", t0); math.Abs(s-6.0/7) > 1e-9 {
		t.Fatalf("100 heartbeats: score %v, want 6/7", s)
	}
}

// A betrayal drops a peer to zero at once, whatever it did before and
// after, until Reset: then it starts from nothing.
func TestBetrayal(t *testing.T) {
	b := book(t)
	for range 300 {
		b.Observe("w", TaskCompleted, 1, t0)
	}
	b.Observe("w", ChainBreak, 1, t0)
	if b.Tier("w", t0) != Unverified || b.Score("w", t0) != 0 || b.Allowance("w", Unverified, 8, t0) != 0 {
		t.Fatalf("after a chain break: %s %v %d", b.Tier("w", t0), b.Score("w", t0), b.Allowance("w", Unverified, 8, t0))
	}
	b.Observe("w", TaskCompleted, 100, t0)
	if why, ok := b.Betrayed("w"); !ok || why == "" || b.Tier("w", t0) != Unverified {
		t.Fatal("a betrayer earned trust back without a reset")
	}
	b.Reset("w")
	if b.Tier("w", t0) != Unverified || b.Score("w", t0) != 0.5 || b.Allowance("w", Established, 8, t0) != 1 {
		t.Fatalf("after reset: %s %v", b.Tier("w", t0), b.Score("w", t0))
	}
}

func TestSelfPreTrustAndPrefer(t *testing.T) {
	b := book(t)
	b.PreTrust("ops")
	if b.Tier("me", t0) != Trusted || b.Tier("ops", t0) != Trusted || b.Allowance("ops", Trusted, 8, t0) != 8 {
		t.Fatal("self and pre-trusted peers are trusted")
	}
	b.Betray("ops", "forged", t0)
	if b.Tier("ops", t0) != Unverified || b.Allowance("ops", Unverified, 8, t0) != 0 {
		t.Fatal("a pre-trusted peer that betrays loses it")
	}
	for range 30 {
		b.Observe("b", TaskCompleted, 1, t0)
	}
	b.Observe("a", TaskCompleted, 3, t0)
	b.Observe("c", TaskCompleted, 3, t0)
	b.Observe("c", TaskFailed, 1, t0)
	if got := b.Prefer([]string{"c", "a", "ops", "b", "me"}, t0); !slices.Equal(got, []string{"me", "b", "a", "c", "ops"}) {
		t.Fatalf("prefer %v", got)
	}
	v := b.View(t0)
	if len(v) != 4 || v[0].Name != "a" || v[3].Name != "ops" || v[3].Betrayed == "" || !v[3].PreTrusted || v[1].Evidence["task_completed"] != 30 {
		t.Fatalf("view %+v", v)
	}
}

// Programs are subjects of their own: vouching for every node ("*") does
// not vouch for the programs connected to them, nor does a node's own
// trust in itself; "*/*" and "NODE/*" do.
func TestProgramSubjectsPreTrust(t *testing.T) {
	b := book(t)
	b.PreTrust(AllPeers)
	for _, p := range []string{"me/gpu", "w1/gpu"} {
		if b.Tier(p, t0) != Unverified || b.Allowance(p, Established, 8, t0) != 1 {
			t.Fatalf("%s: %s, allowance %d; want a program on probation whatever its node's trust", p, b.Tier(p, t0), b.Allowance(p, Established, 8, t0))
		}
	}
	if b.Tier("w1", t0) != Trusted {
		t.Fatal("* trusts every node")
	}
	b.PreTrust(ProgramsOf("w1"))
	if b.Tier("w1/gpu", t0) != Trusted || b.Tier("w2/gpu", t0) != Unverified {
		t.Fatal("w1/* trusts w1's programs only")
	}
	b.PreTrust(AllPrograms)
	if b.Tier("w2/gpu", t0) != Trusted {
		t.Fatal("*/* trusts every program")
	}
	b.PreTrust("w3/cpu")
	if v := b.View(t0); len(v) != 1 || v[0].Name != "w3/cpu" || !v[0].PreTrusted {
		t.Fatalf("view %+v: patterns are not subjects", v)
	}
	if n, p := SplitSubject("w3/cpu"); n != "w3" || p != "cpu" || !IsProgram("w3/cpu") || IsProgram("w3") {
		t.Fatal("SplitSubject, IsProgram")
	}
}

func TestParamsValidate(t *testing.T) {
	p := DefaultParams()
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	p.Tiers[Trusted].MinScore = 0.5 // below established's
	if err := p.Validate(); err == nil {
		t.Fatal("a tier asking less than the one below was accepted")
	}
	if _, err := ParseTier("established"); err != nil {
		t.Fatal(err)
	}
	if _, err := ParseTier("godlike"); err == nil {
		t.Fatal("an unknown tier parsed")
	}
}
