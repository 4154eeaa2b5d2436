package trust

import (
	"maps"
	"math"
	"slices"
	"strings"
	"time"
)

// Book is one observer's view of its peers' trust. The caller serialises
// its calls (it is not safe for concurrent use) and passes the time.
type Book struct {
	p     Params
	peers map[string]*score
	pre   map[string]bool // pre-trusted by an operator
	self  string
}

// NewBook returns an empty book; self (may be empty) is the observing
// node, which trusts itself.
func NewBook(p Params, self string) (*Book, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return &Book{p: p, peers: map[string]*score{}, pre: map[string]bool{}, self: self}, nil
}

func (b *Book) peer(name string, now time.Time) *score {
	s := b.peers[name]
	if s == nil {
		s = &score{at: now, since: now, counts: map[Evidence]uint64{}}
		b.peers[name] = s
	}
	s.decay(now, b.p)
	return s
}

// Observe records n pieces of evidence of kind about peer. A chain break
// is a betrayal (see Betray).
func (b *Book) Observe(peer string, kind Evidence, n float64, now time.Time) {
	if kind == ChainBreak {
		b.Betray(peer, "its hash chain broke: a forged token", now)
		return
	}
	if n <= 0 {
		return
	}
	s := b.peer(peer, now)
	s.counts[kind] += uint64(math.Ceil(n))
	switch w := b.p.Weights[kind]; {
	case w > 0:
		s.good += w * n
	case w < 0:
		s.bad += -w * n
	}
	s.settle(now, b.p)
}

// Betray drops peer to zero trust at once, for reason: it stays there,
// whatever else it does, until Reset.
func (b *Book) Betray(peer, reason string, now time.Time) {
	s := b.peer(peer, now)
	s.counts[ChainBreak]++
	if s.betrayed == "" {
		s.betrayed = reason
	}
	s.good, s.bad = 0, 0
	s.settle(now, b.p)
}

// Reset forgets everything about peer: it starts from zero evidence
// (a quarantine ended).
func (b *Book) Reset(peer string) { delete(b.peers, peer) }

// Forget drops peer (it left the mesh).
func (b *Book) Forget(peer string) { delete(b.peers, peer) }

// PreTrust makes peer count as trusted whatever its evidence, unless it
// betrays. peer is a subject's name or a pattern: AllPeers ("*") every
// node, AllPrograms ("*/*") every worker program, ProgramsOf(node)
// ("NODE/*") every program of node. Vouching for a node does not vouch
// for the programs connected to it: they hold tokens, not the node's
// certificate.
func (b *Book) PreTrust(peer string) { b.pre[peer] = true }

func (b *Book) preTrusted(peer string) bool {
	if b.pre[peer] {
		return true
	}
	node, program := SplitSubject(peer)
	if program == "" {
		return b.pre[AllPeers]
	}
	return b.pre[AllPrograms] || b.pre[ProgramsOf(node)]
}

// isPattern reports whether a pre-trusted name is a pattern, not a
// subject.
func isPattern(name string) bool { return name == AllPeers || strings.HasSuffix(name, "/*") }

// Score returns peer's score (0 when betrayed, 0.5 without evidence).
func (b *Book) Score(peer string, now time.Time) float64 {
	s, ok := b.peers[peer]
	if !ok {
		return 0.5
	}
	s.decay(now, b.p)
	if s.betrayed != "" {
		return 0
	}
	return s.value()
}

// Tier returns peer's tier: trusted for the observer itself and for
// pre-trusted peers (unless betrayed).
func (b *Book) Tier(peer string, now time.Time) Tier {
	s, ok := b.peers[peer]
	betrayed := ok && s.betrayed != ""
	switch {
	case betrayed:
		return Unverified
	case peer == b.self || b.preTrusted(peer):
		return Trusted
	case !ok:
		return Unverified
	}
	s.decay(now, b.p)
	s.settle(now, b.p)
	return s.tier
}

// Betrayed reports whether peer betrayed, and why.
func (b *Book) Betrayed(peer string) (string, bool) {
	if s, ok := b.peers[peer]; ok && s.betrayed != "" {
		return s.betrayed, true
	}
	return "", false
}

// Allowance returns how many attempts at once the observer may give peer,
// which has slots: all of them at tier min or above, none once it
// betrayed, and on probation below min one plus one per ProbationStep of
// good evidence — so a new node runs one attempt at a time and earns more
// as it completes them, and a stranger never gets everything at once.
func (b *Book) Allowance(peer string, minTier Tier, slots int, now time.Time) int {
	t := b.Tier(peer, now)
	if _, betrayed := b.Betrayed(peer); betrayed {
		return 0
	}
	if t >= minTier {
		return slots
	}
	good := 0.0
	if s, ok := b.peers[peer]; ok {
		good = s.good
	}
	// (A relative tolerance of 1e-3, the decay of about two minutes:
	// the decay between observing a completion and asking, seconds,
	// must not take back a whole step — an absolute one did, from a
	// tenth of a second on.)
	return min(slots, 1+int(good/b.p.ProbationStep*(1+1e-3)))
}

// Prefer orders peers by trust, highest first (tier, then score, then
// name).
func (b *Book) Prefer(peers []string, now time.Time) []string {
	out := slices.Clone(peers)
	slices.SortStableFunc(out, func(x, y string) int {
		if tx, ty := b.Tier(x, now), b.Tier(y, now); tx != ty {
			return int(ty) - int(tx)
		}
		if sx, sy := b.Score(x, now), b.Score(y, now); sx != sy {
			if sx > sy {
				return -1
			}
			return 1
		}
		return strings.Compare(x, y)
	})
	return out
}

// PeerView is one peer as the book sees it.
type PeerView struct {
	Name       string            `json:"node"`
	Tier       string            `json:"tier"`
	Score      float64           `json:"score"`
	Good       float64           `json:"good"`
	Bad        float64           `json:"bad"`
	Evidence   map[string]uint64 `json:"evidence"`
	Betrayed   string            `json:"betrayed,omitempty"`
	PreTrusted bool              `json:"pretrusted,omitempty"`
	Self       bool              `json:"self,omitempty"`
	Since      time.Time         `json:"since"`
}

// View returns every peer the book knows (and the pre-trusted ones),
// sorted by name.
func (b *Book) View(now time.Time) []PeerView {
	names := map[string]bool{}
	for n := range b.peers {
		names[n] = true
	}
	for n := range b.pre {
		if !isPattern(n) {
			names[n] = true
		}
	}
	out := make([]PeerView, 0, len(names))
	for _, n := range slices.Sorted(maps.Keys(names)) {
		v := PeerView{Name: n, Tier: b.Tier(n, now).String(), Score: b.Score(n, now), Evidence: map[string]uint64{},
			PreTrusted: b.preTrusted(n), Self: n == b.self}
		if s, ok := b.peers[n]; ok {
			v.Good, v.Bad, v.Betrayed, v.Since = s.good, s.bad, s.betrayed, s.since
			for k, c := range s.counts {
				v.Evidence[k.String()] = c
			}
		}
		out = append(out, v)
	}
	return out
}
