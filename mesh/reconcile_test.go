package mesh

import (
	"reflect"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

func alive(name string) serverView {
	return serverView{Name: name, RaftAddr: name + ":1", Status: StatusAlive}
}

func TestPlanBootstrap(t *testing.T) {
	t.Parallel()
	withState := alive("b")
	withState.HasState = true
	noAddr := alive("b")
	noAddr.RaftAddr = ""
	failed := alive("c")
	failed.Status = StatusFailed

	tests := []struct {
		name    string
		self    string
		expect  int
		servers []serverView
		want    []string // bootstrap configuration; nil: no bootstrap
	}{
		{"single server", "a", 1, []serverView{alive("a")}, []string{"a"}},
		{"fewer than expected", "a", 3, []serverView{alive("a"), alive("b")}, nil},
		{"failed servers do not count", "a", 3, []serverView{alive("a"), alive("b"), failed}, nil},
		{"servers without raft address do not count", "a", 2, []serverView{alive("a"), noAddr}, nil},
		{"lowest name bootstraps", "a", 3, []serverView{alive("c"), alive("a"), alive("b")}, []string{"a", "b", "c"}},
		{"others do not", "b", 3, []serverView{alive("a"), alive("b"), alive("c")}, nil},
		{"all seen servers are included", "a", 2, []serverView{alive("a"), alive("b"), alive("c")}, []string{"a", "b", "c"}},
		{"an existing cluster prevents bootstrap", "a", 2, []serverView{alive("a"), withState, alive("c")}, nil},
		{"expect 0 never bootstraps", "a", 0, []serverView{alive("a")}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, ok := planBootstrap(tt.self, tt.expect, tt.servers)
			if ok != (tt.want != nil) {
				t.Fatalf("bootstrap = %v, want %v", ok, tt.want != nil)
			}
			var got []string
			for _, s := range cfg.Servers {
				if s.Suffrage != raft.Voter || string(s.Address) != string(s.ID)+":1" {
					t.Errorf("server %+v", s)
				}
				got = append(got, string(s.ID))
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("servers %v, want %v", got, tt.want)
			}
		})
	}
}

func TestPlanReconcile(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	const stab, grace, timeout = 10 * time.Second, 30 * time.Second, 10 * time.Minute
	voter := func(id string) raft.Server {
		return raft.Server{ID: raft.ServerID(id), Address: raft.ServerAddress(id + ":1"), Suffrage: raft.Voter}
	}
	nonvoter := func(id string) raft.Server {
		s := voter(id)
		s.Suffrage = raft.Nonvoter
		return s
	}
	view := func(name string, st MemberStatus, ago time.Duration) serverView {
		v := alive(name)
		v.Status, v.Since = st, now.Add(-ago)
		return v
	}
	views := func(vs ...serverView) map[string]serverView {
		m := map[string]serverView{}
		for _, v := range vs {
			m[v.Name] = v
		}
		return m
	}
	leaving := func(v serverView) serverView {
		v.Leaving = true
		return v
	}
	moved := view("b", StatusAlive, time.Hour)
	moved.RaftAddr = "b:2"
	const confIndex = 40 // the configuration's index in every case
	atConf := func(v serverView, index uint64) serverView {
		v.ConfIndex, v.ConfKnown = index, true
		return v
	}

	tests := []struct {
		name        string
		config      []raft.Server
		servers     map[string]serverView
		missing     map[string]time.Time
		unreachable map[string]bool
		// nonvoterFor is how long the leader has seen a non-voter as one;
		// non-voters not named here: for the stabilization exactly.
		nonvoterFor map[string]time.Duration
		want        []change
	}{
		{
			name:    "in line: nothing to do",
			config:  []raft.Server{voter("a"), voter("b")},
			servers: views(view("a", StatusAlive, time.Hour), view("b", StatusAlive, time.Hour)),
		},
		{
			name:    "a new server joins as non-voter",
			config:  []raft.Server{voter("a")},
			servers: views(view("a", StatusAlive, time.Hour), view("b", StatusAlive, time.Second)),
			want:    []change{{Kind: addNonvoter, ID: "b", Address: "b:1"}},
		},
		{
			name:    "a non-voter is not promoted before it is stable",
			config:  []raft.Server{voter("a"), nonvoter("b")},
			servers: views(view("a", StatusAlive, time.Hour), view("b", StatusAlive, stab-time.Millisecond)),
		},
		{
			name:    "a stable non-voter is promoted",
			config:  []raft.Server{voter("a"), nonvoter("b")},
			servers: views(view("a", StatusAlive, time.Hour), atConf(view("b", StatusAlive, stab), confIndex)),
			want:    []change{{Kind: promote, ID: "b", Address: "b:1"}},
		},
		{
			name:    "a stable non-voter that has not replicated the configuration yet is not promoted",
			config:  []raft.Server{voter("a"), nonvoter("b")},
			servers: views(view("a", StatusAlive, time.Hour), atConf(view("b", StatusAlive, time.Hour), confIndex-1)),
		},
		{
			name:    "a stable non-voter with no configuration yet (installing a snapshot) is not promoted",
			config:  []raft.Server{voter("a"), nonvoter("b")},
			servers: views(view("a", StatusAlive, time.Hour), atConf(view("b", StatusAlive, time.Hour), 0)),
		},
		{
			name:    "a stable non-voter that advertises no configuration index (an older node) is promoted",
			config:  []raft.Server{voter("a"), nonvoter("b")},
			servers: views(view("a", StatusAlive, time.Hour), view("b", StatusAlive, stab)),
			want:    []change{{Kind: promote, ID: "b", Address: "b:1"}},
		},
		{
			name:        "a server long alive in gossip is a non-voter for the stabilization first",
			config:      []raft.Server{voter("a"), nonvoter("b")},
			servers:     views(view("a", StatusAlive, time.Hour), view("b", StatusAlive, time.Hour)),
			nonvoterFor: map[string]time.Duration{"b": stab - time.Millisecond},
		},
		{
			name:        "a non-voter the leader has not seen yet (a new term) is not promoted",
			config:      []raft.Server{voter("a"), nonvoter("b")},
			servers:     views(view("a", StatusAlive, time.Hour), view("b", StatusAlive, time.Hour)),
			nonvoterFor: map[string]time.Duration{"b": -1},
		},
		{
			name:        "a stable non-voter Raft cannot reach is not promoted",
			config:      []raft.Server{voter("a"), nonvoter("b")},
			servers:     views(view("a", StatusAlive, time.Hour), view("b", StatusAlive, time.Hour)),
			unreachable: map[string]bool{"b": true},
		},
		{
			name:    "suspect servers are left alone",
			config:  []raft.Server{voter("a"), nonvoter("b")},
			servers: views(view("a", StatusAlive, time.Hour), view("b", StatusSuspect, time.Hour)),
		},
		{
			name:    "a voter at a new address is re-added",
			config:  []raft.Server{voter("a"), voter("b")},
			servers: views(view("a", StatusAlive, time.Hour), moved),
			want:    []change{{Kind: promote, ID: "b", Address: "b:2"}},
		},
		{
			name:    "a server that says it is leaving is removed at once, while alive",
			config:  []raft.Server{voter("a"), voter("b"), voter("c")},
			servers: views(view("a", StatusAlive, time.Hour), leaving(view("b", StatusAlive, time.Hour)), view("c", StatusAlive, time.Hour)),
			want:    []change{{Kind: remove, ID: "b", Address: "b:1"}},
		},
		{
			name:   "a leaving server is neither added nor promoted, nor a replacement",
			config: []raft.Server{voter("a"), voter("b"), voter("c"), nonvoter("d")},
			servers: views(view("a", StatusAlive, time.Hour), view("b", StatusFailed, grace), view("c", StatusAlive, time.Hour),
				leaving(view("d", StatusAlive, time.Hour)), leaving(view("e", StatusAlive, time.Hour))),
			want: []change{{Kind: remove, ID: "d", Address: "d:1"}},
		},
		{
			name:    "a server that left is removed at once",
			config:  []raft.Server{voter("a"), voter("b"), voter("c")},
			servers: views(view("a", StatusAlive, time.Hour), view("b", StatusLeft, 0), view("c", StatusAlive, time.Hour)),
			want:    []change{{Kind: remove, ID: "b", Address: "b:1"}},
		},
		{
			name:    "a failed server stays during the grace",
			config:  []raft.Server{voter("a"), voter("b"), voter("c")},
			servers: views(view("a", StatusAlive, time.Hour), view("b", StatusFailed, grace-time.Millisecond), view("c", StatusAlive, time.Hour)),
		},
		{
			name:    "a failed voter stays past the grace while nothing replaces it (a partition heals with it a voter)",
			config:  []raft.Server{voter("a"), voter("b"), voter("c")},
			servers: views(view("a", StatusAlive, time.Hour), view("b", StatusFailed, timeout-time.Millisecond), view("c", StatusAlive, time.Hour)),
		},
		{
			name:    "a failed voter is removed after the timeout with no replacement",
			config:  []raft.Server{voter("a"), voter("b"), voter("c")},
			servers: views(view("a", StatusAlive, time.Hour), view("b", StatusFailed, timeout), view("c", StatusAlive, time.Hour)),
			want:    []change{{Kind: remove, ID: "b", Address: "b:1"}},
		},
		{
			name:   "a failed voter is removed after the grace when a replacement waits",
			config: []raft.Server{voter("a"), voter("b"), voter("c"), nonvoter("d")},
			servers: views(view("a", StatusAlive, time.Hour), view("b", StatusFailed, grace), view("c", StatusAlive, time.Hour),
				view("d", StatusAlive, time.Second)),
			want: []change{{Kind: remove, ID: "b", Address: "b:1"}},
		},
		{
			name:   "one replacement makes room for one failed voter",
			config: []raft.Server{voter("a"), voter("b"), voter("c"), voter("d"), voter("e")},
			servers: views(view("a", StatusAlive, time.Hour), view("b", StatusFailed, grace), view("c", StatusFailed, grace),
				view("d", StatusAlive, time.Hour), view("e", StatusAlive, time.Hour), view("f", StatusAlive, time.Second)),
			want: []change{{Kind: addNonvoter, ID: "f", Address: "f:1"}, {Kind: remove, ID: "b", Address: "b:1"}},
		},
		{
			name:    "never below quorum: of 3 voters with 2 failed only 1 goes",
			config:  []raft.Server{voter("a"), voter("b"), voter("c")},
			servers: views(view("a", StatusAlive, time.Hour), view("b", StatusFailed, time.Hour), view("c", StatusFailed, time.Hour)),
			want:    []change{{Kind: remove, ID: "b", Address: "b:1"}},
		},
		{
			name:   "never below quorum: of 5 voters with 3 failed 2 go",
			config: []raft.Server{voter("a"), voter("b"), voter("c"), voter("d"), voter("e")},
			servers: views(view("a", StatusAlive, time.Hour), view("b", StatusFailed, time.Hour),
				view("c", StatusFailed, time.Hour), view("d", StatusFailed, time.Hour), view("e", StatusAlive, time.Hour)),
			want: []change{{Kind: remove, ID: "b", Address: "b:1"}, {Kind: remove, ID: "c", Address: "c:1"}},
		},
		{
			name:    "never below quorum: of 2 voters the failed one stays",
			config:  []raft.Server{voter("a"), voter("b")},
			servers: views(view("a", StatusAlive, time.Hour), view("b", StatusFailed, time.Hour)),
		},
		{
			name:    "failed non-voters do not count against quorum",
			config:  []raft.Server{voter("a"), nonvoter("b")},
			servers: views(view("a", StatusAlive, time.Hour), view("b", StatusFailed, time.Hour)),
			want:    []change{{Kind: remove, ID: "b", Address: "b:1"}},
		},
		{
			name:    "a server gossip does not know counts as failed since first noticed",
			config:  []raft.Server{voter("a"), voter("b"), voter("c"), voter("d")},
			servers: views(view("a", StatusAlive, time.Hour), view("b", StatusAlive, time.Hour), view("c", StatusAlive, time.Hour)),
			missing: map[string]time.Time{"d": now.Add(-timeout)},
			want:    []change{{Kind: remove, ID: "d", Address: "d:1"}},
		},
		{
			name:    "the leader never removes itself",
			config:  []raft.Server{voter("a"), voter("b"), voter("c")},
			servers: views(view("a", StatusLeft, time.Hour), view("b", StatusAlive, time.Hour), view("c", StatusAlive, time.Hour)),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			since := map[string]time.Time{}
			for _, s := range tt.config {
				if s.Suffrage == raft.Voter {
					continue
				}
				d, ok := tt.nonvoterFor[string(s.ID)]
				if !ok {
					d = stab
				}
				if d >= 0 {
					since[string(s.ID)] = now.Add(-d)
				}
			}
			got := planReconcile(reconcileInput{
				Self: "a", Config: tt.config, ConfigIndex: confIndex, Servers: tt.servers, Missing: tt.missing, Now: now,
				NonvoterSince: since,
				Unreachable:   tt.unreachable, Stabilization: stab, Grace: grace, Timeout: timeout,
			})
			for i := range got {
				got[i].Reason = "" // prose, not behaviour
			}
			if len(got) == 0 && len(tt.want) == 0 {
				return
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("changes:\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestReconcilerNonvotersSince(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	srv := func(id, addr string, s raft.ServerSuffrage) raft.Server {
		return raft.Server{ID: raft.ServerID(id), Address: raft.ServerAddress(addr), Suffrage: s}
	}
	var r reconciler
	got := r.nonvotersSince([]raft.Server{srv("a", "a:1", raft.Voter), srv("b", "b:1", raft.Nonvoter)}, t0)
	if !reflect.DeepEqual(got, map[string]time.Time{"b": t0}) {
		t.Fatalf("first pass: %v", got)
	}
	// Later passes keep the first sighting.
	got = r.nonvotersSince([]raft.Server{srv("a", "a:1", raft.Voter), srv("b", "b:1", raft.Nonvoter)}, t0.Add(time.Second))
	if !got["b"].Equal(t0) {
		t.Fatalf("second pass: %v, want the first sighting %v", got["b"], t0)
	}
	// Re-added at a new address: its replication starts afresh.
	t2 := t0.Add(2 * time.Second)
	got = r.nonvotersSince([]raft.Server{srv("a", "a:1", raft.Voter), srv("b", "b:2", raft.Nonvoter)}, t2)
	if !got["b"].Equal(t2) {
		t.Fatalf("after a move: %v, want %v", got["b"], t2)
	}
	// Promoted, then a non-voter again: counted from the new sighting.
	r.nonvotersSince([]raft.Server{srv("a", "a:1", raft.Voter), srv("b", "b:2", raft.Voter)}, t0.Add(3*time.Second))
	t4 := t0.Add(4 * time.Second)
	got = r.nonvotersSince([]raft.Server{srv("a", "a:1", raft.Voter), srv("b", "b:2", raft.Nonvoter)}, t4)
	if !got["b"].Equal(t4) {
		t.Fatalf("after promotion and demotion: %v, want %v", got["b"], t4)
	}
}

func TestLaggingNonvoters(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 27, 16, 0, 0, 0, time.UTC)
	const stab = 10 * time.Second
	at := func(name string, st MemberStatus, index uint64) serverView {
		v := alive(name)
		v.Status, v.ConfIndex, v.ConfKnown = st, index, true
		return v
	}
	old := alive("f") // an older node: advertises no index
	in := reconcileInput{
		Self: "a",
		Config: []raft.Server{
			{ID: "a", Address: "a:1", Suffrage: raft.Voter}, {ID: "b", Address: "b:1", Suffrage: raft.Nonvoter},
			{ID: "c", Address: "c:1", Suffrage: raft.Nonvoter}, {ID: "d", Address: "d:1", Suffrage: raft.Nonvoter},
			{ID: "e", Address: "e:1", Suffrage: raft.Nonvoter}, {ID: "f", Address: "f:1", Suffrage: raft.Nonvoter},
			{ID: "g", Address: "g:1", Suffrage: raft.Nonvoter},
		},
		ConfigIndex: 40,
		Servers: map[string]serverView{
			"a": at("a", StatusAlive, 40),
			"b": at("b", StatusAlive, 39),  // behind: lagging
			"c": at("c", StatusAlive, 40),  // caught up
			"d": at("d", StatusAlive, 0),   // not a non-voter for long enough yet
			"e": at("e", StatusFailed, 12), // failed: its removal is another matter
			"f": old,
			"g": at("g", StatusAlive, 0), // no configuration at all yet: lagging
		},
		NonvoterSince: map[string]time.Time{"b": now.Add(-stab), "c": now.Add(-stab), "d": now.Add(-stab + time.Millisecond),
			"e": now.Add(-time.Hour), "f": now.Add(-time.Hour), "g": now.Add(-time.Hour)},
		Now: now, Stabilization: stab,
	}
	got := laggingNonvoters(in)
	if want := map[string]bool{"b": true, "g": true}; !reflect.DeepEqual(got, want) {
		t.Fatalf("lagging %v, want %v", got, want)
	}
	// The planner agrees: it promotes the others that are ready, not them.
	promoted := map[string]bool{}
	for _, c := range planReconcile(in) {
		if c.Kind == promote {
			promoted[c.ID] = true
		}
	}
	if want := map[string]bool{"c": true, "f": true}; !reflect.DeepEqual(promoted, want) {
		t.Errorf("promoted %v, want %v", promoted, want)
	}
}
