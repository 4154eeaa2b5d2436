package sentinel

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"
)

// Kind is a kind of observation about a node.
type Kind int

// Kinds of observation.
const (
	// Accepted: the node accepted an attempt.
	Accepted Kind = iota + 1
	// Completed: it reported an attempt's outcome (a result, or the
	// action's own error: it did its job).
	Completed
	// Lost: an attempt it accepted and never completed (it died, went
	// silent, lost it).
	Lost
	// Failed: it failed an attempt by its own fault.
	Failed
	// Replay: a replayed or reordered heartbeat.
	Replay
	// ChainBreak: a forged hash-chain token: a betrayal.
	ChainBreak
	// CPU and Mem: resource readings from its heartbeats (Value: percent,
	// bytes).
	CPU
	Mem
	// VerifyMismatch: on a verified task its output was outvoted.
	VerifyMismatch
	// VerifyAgree: on a verified task its output agreed with the majority.
	VerifyAgree
	// Violation: it sent a message beyond the limits of the streams.
	Violation
	// Heartbeat: a heartbeat batch whose hash-chain stamp verified. No
	// detector uses it; it is evidence for the trust scores.
	Heartbeat
	// Misbehaved: a worker program answered an attempt it was never
	// given, or sooner than any real work could.
	Misbehaved
)

// Observation is one thing an observer saw a node do.
type Observation struct {
	Node       string
	Capability string // for Completed and Failed
	Kind       Kind
	Value      float64 // CPU percent, memory bytes; ignored for counts
	Count      int     // how many (0 counts as 1); for CPU and Mem, how many readings Value is the mean of
	At         time.Time
}

// Params are the detectors' parameters; DefaultParams documents each.
type Params struct {
	// Window is how far back the detectors look; Buckets is how many time
	// buckets a node's window is kept in (memory per node is fixed).
	Window  time.Duration
	Buckets int
	// MaxNodes bounds the nodes followed; beyond it the one observed
	// least recently is forgotten.
	MaxNodes int

	// MinAccepted: the lost-attempts detector speaks from this many
	// accepted attempts on; LostLow and LostHigh are the lost shares that
	// map to sub-scores 0 and 1.
	MinAccepted       int
	LostLow, LostHigh float64
	// Failure rate against the capability's peers: peers with at least
	// MinPeerAttempts outcomes, at least MinPeers of them; anomalous at a
	// robust z-score of FailZ and a failure rate of MinFailRate; MADFloor
	// bounds the deviation from below (identical peers).
	MinPeerAttempts, MinPeers int
	FailZ, MinFailRate        float64
	MADFloor                  float64
	// ReplayLimit: more replays than this in the window count.
	ReplayLimit int
	// ResourceZ: a node's mean CPU or memory this many robust deviations
	// above the other nodes' is an outlier (needs MinPeers nodes).
	ResourceZ float64
	// Weights of the detectors in the anomaly score.
	Weights map[string]float64
	// Threshold: a node whose anomaly score reaches it is anomalous.
	Threshold float64

	// Confirmations: distinct observers whose proposals a quarantine
	// needs (fewer when fewer observers exist; one for a chain break).
	Confirmations int
	// ProposalTTL: a proposal counts this long. Default: Window.
	ProposalTTL time.Duration
	// CoolDown: the Sentinel's quarantines end after it (an operator's
	// do not).
	CoolDown time.Duration
	// MaxQuarantined: at most this share of the nodes is quarantined at
	// once, so that a bug or a liar cannot empty the mesh.
	MaxQuarantined float64
}

// Detector names (Reason.Detector, Params.Weights keys).
const (
	DetectLost      = "lost"
	DetectFailures  = "failures"
	DetectChain     = "chain"
	DetectReplays   = "replays"
	DetectResources = "resources"
	DetectMismatch  = "mismatch"
	DetectViolation = "violations"
	DetectMisbehave = "misbehaviour"
)

// DefaultParams are the defaults:
//
//   - a 10-minute window in 10 buckets, 10,000 nodes at most;
//   - lost attempts: from 10 accepted on, 10 % lost scores 0 and 50 %
//     scores 1 (linear between);
//   - failures against peers: peers with 10 outcomes, at least 3 of them;
//     z = (rate − median) / (1.4826 · max(MAD, 0.01)); anomalous when
//     z ≥ 3.5 and the rate ≥ 20 %, scoring 0.5 at z = 3.5 up to 1 at 7;
//   - a chain break scores 1 at once; replays beyond 5 in the window
//     score up to 1 at 10;
//   - resources: a mean CPU or memory 5 robust deviations above the other
//     nodes' scores 0.5;
//   - verification: one mismatch scores 0.6, two or more 1;
//   - violations: a third each, up to 1 at 3; a worker program's
//     misbehaviour the same;
//   - weights: resources 0.4, replays 0.8, violations and misbehaviour
//     0.9, the rest 1;
//     the anomaly score is 1 − Π(1 − weight · sub-score), so resources
//     alone never reach the threshold of 0.8, and one mismatch alone does
//     not either;
//   - quarantine: 2 confirming observers (1 for a chain break, for a
//     worker program, or when the mesh has one), proposals live for the
//     window, a 30-minute cool-down, at most half the nodes quarantined
//     at once (programs apart).
func DefaultParams() Params {
	return Params{
		Window: 10 * time.Minute, Buckets: 10, MaxNodes: 10_000,
		MinAccepted: 10, LostLow: 0.1, LostHigh: 0.5,
		MinPeerAttempts: 10, MinPeers: 3, FailZ: 3.5, MinFailRate: 0.2, MADFloor: 0.01,
		ReplayLimit: 5, ResourceZ: 5,
		Weights: map[string]float64{
			DetectLost: 1, DetectFailures: 1, DetectChain: 1, DetectMismatch: 1,
			DetectReplays: 0.8, DetectViolation: 0.9, DetectMisbehave: 0.9, DetectResources: 0.4,
		},
		Threshold:     0.8,
		Confirmations: 2, CoolDown: 30 * time.Minute, MaxQuarantined: 0.5,
	}
}

// Validate checks p.
func (p Params) Validate() error {
	var errs []error
	if p.Window <= 0 || p.Buckets < 1 || p.MaxNodes < 1 {
		errs = append(errs, errors.New("the window, buckets and max nodes must be positive"))
	}
	if p.MinAccepted < 1 || p.LostLow < 0 || p.LostHigh <= p.LostLow || p.LostHigh > 1 {
		errs = append(errs, errors.New("MinAccepted must be positive and 0 <= LostLow < LostHigh <= 1"))
	}
	if p.MinPeerAttempts < 1 || p.MinPeers < 2 || p.FailZ <= 0 || p.MADFloor <= 0 || p.ResourceZ <= 0 {
		errs = append(errs, errors.New("MinPeerAttempts, FailZ, MADFloor and ResourceZ must be positive, MinPeers at least 2"))
	}
	if p.Threshold <= 0 || p.Threshold > 1 || p.Confirmations < 1 || p.CoolDown <= 0 || p.MaxQuarantined <= 0 || p.MaxQuarantined > 1 {
		errs = append(errs, errors.New("the threshold and the quarantined share must be in (0, 1], the confirmations and the cool-down positive"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("sentinel: %w", err)
	}
	return nil
}

// bucket is a slice of a node's window.
type bucket struct {
	start              time.Time
	accepted, lost     int
	replays, breaks    int
	mismatches, agrees int
	violations         int
	misbehaved         int
	cpuSum, memSum     float64
	cpuN, memN         int
	outcomes           map[string][2]int // capability → completed, failed
}

// node is what one observer follows of a node.
type node struct {
	buckets []bucket // ring, by bucket start
	seen    time.Time
}

// Sentinel is one observer's detectors. It is not safe for concurrent
// use (the caller serialises) and takes the time from observations and
// arguments.
type Sentinel struct {
	self  string
	p     Params
	width time.Duration
	nodes map[string]*node
}

// New returns the detectors of observer self (never judged).
func New(self string, p Params) (*Sentinel, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return &Sentinel{self: self, p: p, width: p.Window / time.Duration(p.Buckets), nodes: map[string]*node{}}, nil
}

// Observe records o.
func (s *Sentinel) Observe(o Observation) {
	if o.Node == "" || o.Node == s.self {
		return
	}
	n := s.nodes[o.Node]
	if n == nil {
		if len(s.nodes) >= s.p.MaxNodes {
			s.evictOldest()
		}
		n = &node{}
		s.nodes[o.Node] = n
	}
	if o.At.After(n.seen) {
		n.seen = o.At
	}
	b := s.bucketOf(n, o.At)
	if b == nil {
		return // older than the window
	}
	cnt := max(o.Count, 1)
	switch o.Kind {
	case Accepted:
		b.accepted += cnt
	case Lost:
		b.lost += cnt
	case Completed, Failed:
		if b.outcomes == nil {
			b.outcomes = map[string][2]int{}
		}
		c := b.outcomes[o.Capability]
		if o.Kind == Completed {
			c[0] += cnt
		} else {
			c[1] += cnt
		}
		b.outcomes[o.Capability] = c
	case Replay:
		b.replays += cnt
	case ChainBreak:
		b.breaks += cnt
	case CPU:
		if finite(o.Value) {
			b.cpuSum += o.Value * float64(cnt)
			b.cpuN += cnt
		}
	case Mem:
		if finite(o.Value) {
			b.memSum += o.Value * float64(cnt)
			b.memN += cnt
		}
	case VerifyMismatch:
		b.mismatches += cnt
	case VerifyAgree:
		b.agrees += cnt
	case Violation:
		b.violations += cnt
	case Misbehaved:
		b.misbehaved += cnt
	}
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) && f >= 0 }

// bucketOf returns the bucket of at in n's ring, starting it if needed;
// nil for a time before the window of the newest bucket.
func (s *Sentinel) bucketOf(n *node, at time.Time) *bucket {
	start := at.Truncate(s.width)
	for i := range n.buckets {
		if n.buckets[i].start.Equal(start) {
			return &n.buckets[i]
		}
	}
	if len(n.buckets) < s.p.Buckets {
		n.buckets = append(n.buckets, bucket{start: start})
		return &n.buckets[len(n.buckets)-1]
	}
	// Reuse the oldest bucket, if this one is newer.
	oldest := 0
	for i := range n.buckets {
		if n.buckets[i].start.Before(n.buckets[oldest].start) {
			oldest = i
		}
	}
	if !start.After(n.buckets[oldest].start) {
		return nil
	}
	n.buckets[oldest] = bucket{start: start}
	return &n.buckets[oldest]
}

func (s *Sentinel) evictOldest() {
	var name string
	var at time.Time
	for k, n := range s.nodes {
		if name == "" || n.seen.Before(at) {
			name, at = k, n.seen
		}
	}
	delete(s.nodes, name)
}

// Forget drops a node (it left the mesh).
func (s *Sentinel) Forget(node string) { delete(s.nodes, node) }

// Reset starts a node from zero (it was released from quarantine).
func (s *Sentinel) Reset(node string) { delete(s.nodes, node) }

// window is a node's totals over the window ending at now.
type window struct {
	accepted, lost, replays, breaks, mismatches, agrees, violations, misbehaved int
	cpu, mem                                                                    float64 // means; NaN without readings
	outcomes                                                                    map[string][2]int
}

func (s *Sentinel) total(n *node, now time.Time) window {
	w := window{outcomes: map[string][2]int{}}
	var cpuSum, memSum float64
	var cpuN, memN int
	from := now.Add(-s.p.Window)
	for _, b := range n.buckets {
		if !b.start.Add(s.width).After(from) || b.start.After(now) {
			continue
		}
		w.accepted += b.accepted
		w.lost += b.lost
		w.replays += b.replays
		w.breaks += b.breaks
		w.mismatches += b.mismatches
		w.agrees += b.agrees
		w.violations += b.violations
		w.misbehaved += b.misbehaved
		cpuSum, cpuN = cpuSum+b.cpuSum, cpuN+b.cpuN
		memSum, memN = memSum+b.memSum, memN+b.memN
		for c, o := range b.outcomes {
			t := w.outcomes[c]
			w.outcomes[c] = [2]int{t[0] + o[0], t[1] + o[1]}
		}
	}
	w.cpu, w.mem = math.NaN(), math.NaN()
	if cpuN > 0 {
		w.cpu = cpuSum / float64(cpuN)
	}
	if memN > 0 {
		w.mem = memSum / float64(memN)
	}
	return w
}

// Reason is one detector's finding about a node.
type Reason struct {
	Detector string  `json:"detector"`
	Score    float64 `json:"score"`
	Detail   string  `json:"detail"`
}

// Finding is a node's anomaly score and why.
type Finding struct {
	Node      string   `json:"node"`
	Score     float64  `json:"score"`
	Anomalous bool     `json:"anomalous"`
	Reasons   []Reason `json:"reasons"`
}

// Evaluate runs the detectors over every node's window ending at now and
// returns the nodes with a nonzero score, highest first (then by name).
func (s *Sentinel) Evaluate(now time.Time) []Finding {
	totals := make(map[string]window, len(s.nodes))
	for name, n := range s.nodes {
		totals[name] = s.total(n, now)
	}
	reasons := map[string][]Reason{}
	add := func(node, detector string, score float64, format string, args ...any) {
		if score > 0 {
			reasons[node] = append(reasons[node], Reason{Detector: detector, Score: min(score, 1), Detail: fmt.Sprintf(format, args...)})
		}
	}
	for name, w := range totals {
		if w.accepted >= s.p.MinAccepted && w.lost > 0 {
			share := float64(w.lost) / float64(w.accepted)
			add(name, DetectLost, (share-s.p.LostLow)/(s.p.LostHigh-s.p.LostLow),
				"lost %d of %d accepted attempts in %v (%.0f%%)", w.lost, w.accepted, s.p.Window, 100*share)
		}
		if w.breaks > 0 {
			add(name, DetectChain, 1, "forged %d hash-chain token(s): a betrayal", w.breaks)
		}
		if w.replays > s.p.ReplayLimit {
			add(name, DetectReplays, float64(w.replays-s.p.ReplayLimit)/float64(s.p.ReplayLimit),
				"%d replayed or reordered heartbeats in %v (more than %d)", w.replays, s.p.Window, s.p.ReplayLimit)
		}
		switch {
		case w.mismatches >= 2:
			add(name, DetectMismatch, 1, "outvoted on %d verified attempts (agreed on %d)", w.mismatches, w.agrees)
		case w.mismatches == 1:
			add(name, DetectMismatch, 0.6, "outvoted on 1 verified attempt (agreed on %d)", w.agrees)
		}
		if w.violations > 0 {
			add(name, DetectViolation, float64(w.violations)/3, "%d messages beyond the limits of the streams", w.violations)
		}
		if w.misbehaved > 0 {
			add(name, DetectMisbehave, float64(w.misbehaved)/3, "%d answers to attempts it was never given, or sooner than any real work could", w.misbehaved)
		}
	}
	s.failures(totals, add)
	s.resources(totals, add)

	var out []Finding
	for node, rs := range reasons {
		keep := 1.0
		for _, r := range rs {
			keep *= 1 - s.p.Weights[r.Detector]*r.Score
		}
		score := 1 - keep
		sort.Slice(rs, func(i, j int) bool {
			return rs[i].Score > rs[j].Score || (rs[i].Score == rs[j].Score && rs[i].Detector < rs[j].Detector)
		})
		out = append(out, Finding{Node: node, Score: score, Anomalous: score >= s.p.Threshold-1e-12, Reasons: rs})
	}
	slices.SortFunc(out, func(a, b Finding) int {
		if a.Score != b.Score {
			if a.Score > b.Score {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Node, b.Node)
	})
	return out
}

// failures compares, per capability, each node's failure rate with its
// peers' by a robust z-score.
func (s *Sentinel) failures(totals map[string]window, add func(string, string, float64, string, ...any)) {
	rates := map[string]map[string]float64{} // capability → node → rate
	for name, w := range totals {
		for c, o := range w.outcomes {
			if n := o[0] + o[1]; n >= s.p.MinPeerAttempts {
				if rates[c] == nil {
					rates[c] = map[string]float64{}
				}
				rates[c][name] = float64(o[1]) / float64(n)
			}
		}
	}
	for c, byNode := range rates {
		if len(byNode) < s.p.MinPeers {
			continue
		}
		vals := make([]float64, 0, len(byNode))
		for _, r := range byNode {
			vals = append(vals, r)
		}
		med, mad := medianMAD(vals)
		for name, r := range byNode {
			z := (r - med) / (1.4826 * max(mad, s.p.MADFloor))
			if z >= s.p.FailZ && r >= s.p.MinFailRate {
				add(name, DetectFailures, 0.5+0.5*(z-s.p.FailZ)/s.p.FailZ,
					"failed %.0f%% of %s attempts against a median of %.0f%% among %d peers (robust z %.1f)", 100*r, c, 100*med, len(byNode), z)
			}
		}
	}
}

// resources finds nodes whose mean CPU or memory stands far above the
// others'.
func (s *Sentinel) resources(totals map[string]window, add func(string, string, float64, string, ...any)) {
	for _, res := range []struct {
		name string
		get  func(window) float64
	}{{"CPU", func(w window) float64 { return w.cpu }}, {"memory", func(w window) float64 { return w.mem }}} {
		var vals []float64
		for _, w := range totals {
			if v := res.get(w); !math.IsNaN(v) {
				vals = append(vals, v)
			}
		}
		if len(vals) < s.p.MinPeers {
			continue
		}
		med, mad := medianMAD(vals)
		for name, w := range totals {
			v := res.get(w)
			if math.IsNaN(v) {
				continue
			}
			if z := (v - med) / (1.4826 * max(mad, s.p.MADFloor*max(med, 1))); z >= s.p.ResourceZ {
				add(name, DetectResources, 0.5, "mean %s %.0f against a median of %.0f (robust z %.1f)", res.name, v, med, z)
			}
		}
	}
}

// medianMAD returns the median of vals and their median absolute
// deviation from it.
func medianMAD(vals []float64) (median, mad float64) {
	v := slices.Clone(vals)
	slices.Sort(v)
	median = mid(v)
	dev := make([]float64, len(v))
	for i, x := range v {
		dev[i] = math.Abs(x - median)
	}
	slices.Sort(dev)
	return median, mid(dev)
}

func mid(sorted []float64) float64 {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}
