package mesh

import (
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/raft"
)

// The decisions about the Raft configuration are pure functions of what
// gossip shows and what the configuration holds: no clock (now is an
// argument), no I/O. The raft loop gathers the inputs and carries out the
// returned changes; the tests drive them with tables.

// serverView is one server as gossip shows it.
type serverView struct {
	Name     string
	RaftAddr string
	Status   MemberStatus
	Since    time.Time // when it entered Status (as observed here)
	HasState bool      // advertises Raft state: already in a cluster
	Leaving  bool      // stopping gracefully (its last metadata says so)
	// ConfIndex is the index of the latest Raft configuration it
	// advertises; ConfKnown says whether it advertises one at all (servers
	// of an older encoding do not).
	ConfIndex uint64
	ConfKnown bool
}

// caughtUp reports whether v has replicated the log up to the leader's
// configuration at index confIndex (the entry that made it a non-voter, or
// a later one). A server that does not advertise its index is taken as
// caught up, as before this check existed.
func caughtUp(v serverView, confIndex uint64) bool {
	return !v.ConfKnown || v.ConfIndex >= confIndex
}

// laggingNonvoters returns the non-voters planReconcile would promote if
// they had the log up to the configuration (caughtUp), and does not: the
// one condition of promotion they miss. It asks the planner twice rather
// than repeating its conditions.
func laggingNonvoters(in reconcileInput) map[string]bool {
	promoted := map[string]bool{}
	for _, c := range planReconcile(in) {
		if c.Kind == promote {
			promoted[c.ID] = true
		}
	}
	caught := in
	caught.Servers = make(map[string]serverView, len(in.Servers))
	for name, v := range in.Servers {
		v.ConfKnown = false // taken as caught up
		caught.Servers[name] = v
	}
	out := map[string]bool{}
	for _, c := range planReconcile(caught) {
		if c.Kind == promote && !promoted[c.ID] {
			out[c.ID] = true
		}
	}
	return out
}

// planBootstrap decides whether self bootstraps the first configuration:
// only when at least expect alive servers (self included) see each other,
// none of them advertises Raft state, and self has the lowest name among
// them — so that exactly one node of a fresh cluster bootstraps. The
// caller checks that self has no Raft state and has not bootstrapped.
func planBootstrap(self string, expect int, servers []serverView) (raft.Configuration, bool) {
	if expect < 1 {
		return raft.Configuration{}, false
	}
	var cands []serverView
	for _, s := range servers {
		if s.Status != StatusAlive || s.RaftAddr == "" {
			continue
		}
		if s.HasState {
			return raft.Configuration{}, false // a cluster exists: be added to it instead
		}
		cands = append(cands, s)
	}
	if len(cands) < expect {
		return raft.Configuration{}, false
	}
	slices.SortFunc(cands, func(a, b serverView) int { return strings.Compare(a.Name, b.Name) })
	if cands[0].Name != self {
		return raft.Configuration{}, false
	}
	var cfg raft.Configuration
	for _, s := range cands {
		cfg.Servers = append(cfg.Servers, raft.Server{
			Suffrage: raft.Voter, ID: raft.ServerID(s.Name), Address: raft.ServerAddress(s.RaftAddr),
		})
	}
	return cfg, true
}

// stableNonvoter reports whether name has been a non-voter, as this leader
// saw it, for at least d.
func stableNonvoter(since map[string]time.Time, name string, now time.Time, d time.Duration) bool {
	t, ok := since[name]
	return ok && now.Sub(t) >= d
}

// changeKind is one kind of configuration change.
type changeKind int

const (
	addNonvoter changeKind = iota + 1 // a new server, or a known one at a new address
	promote                           // a stable non-voter becomes a voter
	remove                            // a left server, or a failed one past the grace
)

func (k changeKind) String() string {
	switch k {
	case addNonvoter:
		return "add-nonvoter"
	case promote:
		return "promote"
	case remove:
		return "remove"
	}
	return "unknown"
}

// change is one step the leader takes on the Raft configuration.
type change struct {
	Kind    changeKind
	ID      string
	Address string
	Reason  string
}

// reconcileInput is what the leader knows when it reconciles.
type reconcileInput struct {
	Self   string
	Config []raft.Server
	// ConfigIndex is the log index of Config.
	ConfigIndex uint64
	Servers     map[string]serverView // by name; servers in Config that gossip does not know are absent
	// Missing holds, for servers in Config that gossip does not know, when
	// this leader first noticed: they count as failed since then.
	Missing map[string]time.Time
	// NonvoterSince holds, for the non-voters of Config, when this leader
	// first saw each one as a non-voter at its current address in its
	// term: its heartbeats have had that long to fail.
	NonvoterSince map[string]time.Time
	// Unreachable holds the servers the leader's Raft heartbeats fail to
	// reach in its term (a bad certificate, a firewall): never promoted.
	Unreachable   map[string]bool
	Now           time.Time
	Stabilization time.Duration
	// Grace is how long a failed server stays before it may be removed:
	// a non-voter, or a voter a replacement waits for. Timeout is how long
	// a failed voter stays with no replacement.
	Grace, Timeout time.Duration
}

// planReconcile returns the changes that bring the Raft configuration in
// line with membership:
//
//   - alive servers not in the configuration are added as non-voters (and
//     re-added when their Raft address changed);
//   - non-voters alive for at least Stabilization, and non-voters of this
//     leader's configuration for as long, are promoted unless Raft cannot
//     reach them: a voter that never replicates could cost the quorum (a
//     node with the gossip key but no valid certificate must not be able
//     to stall the cluster). A server long alive in gossip is still a
//     non-voter for Stabilization first, so that the leader's heartbeats
//     have had the time to fail. And only once it has the log up to the
//     configuration that made it a non-voter (it advertises the index of
//     its latest configuration, ConfIndex): a voter still installing a
//     snapshot or far behind counts in the quorum but cannot vote for a
//     commit, so one more failure would stall the cluster;
//   - servers that left gracefully, or say they are leaving, are removed at
//     once (a leaving server waits for it, so that its vote still counts
//     for the removal), and a leaving server is neither added nor
//     promoted;
//   - failed non-voters (or ones gossip no longer knows) are removed once
//     failed for Grace;
//   - failed voters stay through ordinary partitions, so that a healed
//     server is a voter again as soon as Raft reaches it (Consul's
//     autopilot is the model): one is removed once failed for Grace only
//     when a replacement waits for its place (an alive server that is not
//     a voter yet, one replacement per removal), otherwise once failed for
//     Timeout; and only as many as keep the remaining voters at or above
//     the quorum of the current voters — so the removals can never be what
//     loses the quorum; the rest wait for a later pass.
//
// The leader never removes itself. Changes come in a deterministic order.
func planReconcile(in reconcileInput) []change {
	var out []change
	inConfig := make(map[string]raft.Server, len(in.Config))
	voters := 0
	for _, s := range in.Config {
		inConfig[string(s.ID)] = s
		if s.Suffrage == raft.Voter {
			voters++
		}
	}

	names := make([]string, 0, len(in.Servers))
	for name := range in.Servers {
		names = append(names, name)
	}
	slices.Sort(names)
	replacements := 0 // alive servers waiting to be voters
	for _, name := range names {
		v := in.Servers[name]
		if v.Status != StatusAlive || v.Leaving || v.RaftAddr == "" || name == in.Self {
			continue
		}
		cur, ok := inConfig[name]
		if !ok || cur.Suffrage != raft.Voter {
			replacements++
		}
		switch {
		case !ok:
			out = append(out, change{Kind: addNonvoter, ID: name, Address: v.RaftAddr, Reason: "alive server not in the configuration"})
		case string(cur.Address) != v.RaftAddr:
			// Same server at a new address (restarted on another port): a
			// non-voter re-add updates the address; promotion follows.
			if cur.Suffrage == raft.Voter {
				out = append(out, change{Kind: promote, ID: name, Address: v.RaftAddr, Reason: "voter moved to a new address"})
			} else {
				out = append(out, change{Kind: addNonvoter, ID: name, Address: v.RaftAddr, Reason: "non-voter moved to a new address"})
			}
		case cur.Suffrage != raft.Voter && in.Now.Sub(v.Since) >= in.Stabilization &&
			stableNonvoter(in.NonvoterSince, name, in.Now, in.Stabilization) && !in.Unreachable[name] &&
			caughtUp(v, in.ConfigIndex):
			out = append(out, change{Kind: promote, ID: name, Address: v.RaftAddr, Reason: "stable for " + in.Stabilization.String()})
		}
	}

	// Removals, in configuration order sorted by name.
	cfg := slices.Clone(in.Config)
	slices.SortFunc(cfg, func(a, b raft.Server) int { return strings.Compare(string(a.ID), string(b.ID)) })
	var deadVoters []change
	for _, s := range cfg {
		name := string(s.ID)
		if name == in.Self {
			continue
		}
		v, known := in.Servers[name]
		var failedSince time.Time
		switch {
		case known && (v.Status == StatusLeft || v.Leaving):
			reason := "left"
			if v.Status != StatusLeft {
				reason = "leaving"
			}
			out = append(out, change{Kind: remove, ID: name, Address: string(s.Address), Reason: reason})
			if s.Suffrage == raft.Voter {
				voters--
			}
			continue
		case known && v.Status == StatusFailed:
			failedSince = v.Since
		case !known:
			since, ok := in.Missing[name]
			if !ok {
				continue
			}
			failedSince = since
		default:
			continue
		}
		failedFor := in.Now.Sub(failedSince)
		if failedFor < in.Grace {
			continue
		}
		c := change{Kind: remove, ID: name, Address: string(s.Address), Reason: "failed for longer than " + in.Grace.String()}
		switch {
		case s.Suffrage != raft.Voter:
			out = append(out, c)
		case failedFor >= in.Timeout:
			c.Reason = "failed for longer than " + in.Timeout.String() + " with no replacement"
			deadVoters = append(deadVoters, c)
		case replacements > 0:
			replacements--
			c.Reason += "; a replacement server waits"
			deadVoters = append(deadVoters, c)
		}
	}
	// Removing k failed voters leaves voters-k; keep that at or above the
	// quorum of the current voters.
	allowed := max(voters-(voters/2+1), 0)
	out = append(out, deadVoters[:min(allowed, len(deadVoters))]...)
	return out
}
