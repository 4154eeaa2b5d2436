package trust

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Evidence is a kind of observation about a peer.
type Evidence int

// Kinds of evidence. Positive ones add to a peer's good mass, negative
// ones to its bad mass, each with its weight (Params.Weights); a chain
// break is a betrayal instead.
const (
	// HeartbeatOK: a heartbeat batch whose hash-chain token verified.
	HeartbeatOK Evidence = iota + 1
	// TaskCompleted: an attempt the peer ran reported an outcome (a
	// result, or an action's own error: the peer did its job).
	TaskCompleted
	// TaskFailed: an attempt failed by the peer's fault: it died, went
	// silent or lost it.
	TaskFailed
	// Replay: a replayed or reordered heartbeat.
	Replay
	// VerifyAgree: on a verified task, the peer's output agreed with the
	// majority.
	VerifyAgree
	// VerifyMismatch: on a verified task, the peer's output was outvoted.
	VerifyMismatch
	// Violation: the peer sent a message beyond the limits of the mesh's
	// streams.
	Violation
	// ChainBreak: a forged token: a betrayal (Book.Betray).
	ChainBreak
	// Misbehaviour: a worker program answered an attempt it was never
	// given, or sooner than any real work could (the node's floor).
	Misbehaviour
)

var evidenceNames = map[Evidence]string{
	HeartbeatOK: "heartbeat_ok", TaskCompleted: "task_completed", TaskFailed: "task_failed", Replay: "replay",
	VerifyAgree: "verify_agree", VerifyMismatch: "verify_mismatch", Violation: "violation", ChainBreak: "chain_break",
	Misbehaviour: "misbehaviour",
}

func (e Evidence) String() string {
	if n, ok := evidenceNames[e]; ok {
		return n
	}
	return fmt.Sprintf("evidence(%d)", int(e))
}

// Tier is how far a peer is trusted.
type Tier int

// Tiers, lowest first.
const (
	Unverified Tier = iota
	Provisional
	Established
	Trusted
)

func (t Tier) String() string {
	switch t {
	case Unverified:
		return "unverified"
	case Provisional:
		return "provisional"
	case Established:
		return "established"
	case Trusted:
		return "trusted"
	}
	return fmt.Sprintf("tier(%d)", int(t))
}

// ParseTier reads a tier's name.
func ParseTier(s string) (Tier, error) {
	for t := Unverified; t <= Trusted; t++ {
		if t.String() == s {
			return t, nil
		}
	}
	return 0, fmt.Errorf("trust: tier %q: want unverified, provisional, established or trusted", s)
}

// TierRule is what a peer needs to enter a tier: a minimum score and a
// minimum of (decayed) good evidence.
type TierRule struct {
	MinScore    float64
	MinEvidence float64
}

// Params are the reputation's parameters (DefaultParams documents them).
type Params struct {
	// HalfLife is how fast evidence is forgotten: both masses halve
	// every HalfLife.
	HalfLife time.Duration
	// Weights is each kind's weight: positive adds to the good mass,
	// negative (its absolute value) to the bad mass.
	Weights map[Evidence]float64
	// Tiers are the rules to enter Provisional, Established and Trusted
	// (index 1..3; index 0, Unverified, needs nothing).
	Tiers [4]TierRule
	// ScoreMargin and EvidenceMargin are the hysteresis: a peer leaves
	// its tier downwards only when its score falls below the tier's
	// minimum minus ScoreMargin, or its good evidence below
	// EvidenceMargin × the tier's minimum.
	ScoreMargin, EvidenceMargin float64
	// ProbationStep is how much good evidence earns a peer below the
	// dispatch tier one more concurrent attempt (Allowance).
	ProbationStep float64
}

// DefaultParams are the defaults:
//
//   - evidence halves every 24 h;
//   - weights: heartbeat_ok +0.05, task_completed +1, verify_agree +2;
//     task_failed −3, replay −2, violation −10, misbehaviour −10,
//     verify_mismatch −20 (slow to rise, fast to fall);
//   - tiers: provisional at score ≥ 0.6 and evidence ≥ 5, established at
//     0.8 and 25, trusted at 0.95 and 250;
//   - hysteresis: down only below the minimum score − 0.05, or below 80 %
//     of the minimum evidence;
//   - probation: one more concurrent attempt per unit of good evidence
//     (a new node runs one attempt at a time, two after its first
//     completion, and so on, until it reaches the dispatch tier).
func DefaultParams() Params {
	return Params{
		HalfLife: 24 * time.Hour,
		Weights: map[Evidence]float64{
			HeartbeatOK: 0.05, TaskCompleted: 1, VerifyAgree: 2,
			TaskFailed: -3, Replay: -2, Violation: -10, Misbehaviour: -10, VerifyMismatch: -20,
		},
		Tiers: [4]TierRule{
			{},
			{MinScore: 0.6, MinEvidence: 5},
			{MinScore: 0.8, MinEvidence: 25},
			{MinScore: 0.95, MinEvidence: 250},
		},
		ScoreMargin: 0.05, EvidenceMargin: 0.8, ProbationStep: 1,
	}
}

// Validate checks p.
func (p Params) Validate() error {
	var errs []error
	if p.HalfLife <= 0 {
		errs = append(errs, errors.New("HalfLife must be positive"))
	}
	for t := Provisional; t <= Trusted; t++ {
		r := p.Tiers[t]
		if r.MinScore <= 0 || r.MinScore >= 1 || r.MinEvidence < 0 {
			errs = append(errs, fmt.Errorf("tier %s: minimum score %v must be in (0, 1), minimum evidence %v not negative", t, r.MinScore, r.MinEvidence))
		}
		if prev := p.Tiers[t-1]; t > Provisional && (r.MinScore < prev.MinScore || r.MinEvidence < prev.MinEvidence) {
			errs = append(errs, fmt.Errorf("tier %s asks less than tier %s", t, t-1))
		}
	}
	if p.ScoreMargin < 0 || p.EvidenceMargin <= 0 || p.EvidenceMargin > 1 {
		errs = append(errs, errors.New("ScoreMargin must not be negative and EvidenceMargin must be in (0, 1]"))
	}
	if p.ProbationStep <= 0 {
		errs = append(errs, errors.New("ProbationStep must be positive"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("trust: %w", err)
	}
	return nil
}

// score is one peer's reputation: the decayed masses of good and bad
// evidence as of at, the tier it holds, and the undecayed counts.
type score struct {
	good, bad float64
	at        time.Time
	tier      Tier
	since     time.Time // in tier since
	counts    map[Evidence]uint64
	betrayed  string // why, when betrayed
}

// decay brings the masses to now.
func (s *score) decay(now time.Time, p Params) {
	if !s.at.IsZero() && now.After(s.at) {
		f := math.Exp2(-float64(now.Sub(s.at)) / float64(p.HalfLife))
		s.good *= f
		s.bad *= f
	}
	if now.After(s.at) {
		s.at = now
	}
}

// value is the beta-reputation score: (1 + good) / (2 + good + bad).
func (s *score) value() float64 { return (1 + s.good) / (2 + s.good + s.bad) }

// settle moves the tier: up as soon as a higher tier's rule is met, down
// only past the hysteresis of the tier held.
func (s *score) settle(now time.Time, p Params) {
	if s.betrayed != "" {
		s.setTier(Unverified, now)
		return
	}
	v := s.value()
	up := s.tier
	for t := s.tier + 1; t <= Trusted; t++ {
		if r := p.Tiers[t]; v >= r.MinScore && s.good >= r.MinEvidence {
			up = t
		}
	}
	if up > s.tier {
		s.setTier(up, now)
		return
	}
	t := s.tier
	for t > Unverified {
		r := p.Tiers[t]
		if v >= r.MinScore-p.ScoreMargin && s.good >= r.MinEvidence*p.EvidenceMargin {
			break
		}
		t--
	}
	s.setTier(t, now)
}

func (s *score) setTier(t Tier, now time.Time) {
	if t != s.tier || s.since.IsZero() {
		s.tier, s.since = t, now
	}
}
