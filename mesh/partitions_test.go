package mesh

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
)

// partState builds a control state of count partitions with the given
// owners: owners[p] is "node@epoch/term" ("" leaves p unassigned).
func partState(count int, owners ...string) ControlState {
	s := newControlState()
	s.PartitionCount = count
	for p, o := range owners {
		if o == "" {
			continue
		}
		var a PartitionAssignment
		var node string
		if _, err := fmt.Sscanf(o, "%1s@%d/%d", &node, &a.Epoch, &a.Term); err != nil {
			panic(o + ": " + err.Error())
		}
		a.Node = node
		s.Partitions[p] = a
	}
	return s
}

// repeat returns n copies of o.
func repeat(n int, o string) []string { return slices.Repeat([]string{o}, n) }

// loads counts the partitions each server owns after applying moves to s.
func loads(s ControlState, moves []PartitionMove) map[string]int {
	owner := map[int]string{}
	for p, a := range s.Partitions {
		owner[p] = a.Node
	}
	for _, mv := range moves {
		owner[mv.Partition] = mv.Node
	}
	out := map[string]int{}
	for _, n := range owner {
		out[n]++
	}
	return out
}

func TestPlanPartitions(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name      string
		state     ControlState
		eligible  []string
		why       map[string]string
		term      uint64
		everyTerm bool
		leader    string
		want      []string // "partition node epoch reason"
		loads     map[string]int
	}{
		{name: "no count: nothing", state: partState(0), eligible: []string{"a"}, term: 2},
		{name: "no eligible server: nothing", state: partState(4, "a@3/2"), term: 3},
		{name: "first placement on one server", state: partState(3), eligible: []string{"a"}, term: 2,
			want: []string{"0 a 3 first placement", "1 a 3 first placement", "2 a 3 first placement"}, loads: map[string]int{"a": 3}},
		{name: "first placement over two, any order", state: partState(5), eligible: []string{"b", "a", "b"}, term: 2,
			want:  []string{"0 a 3 first placement", "1 b 3 first placement", "2 a 3 first placement", "3 b 3 first placement", "4 a 3 first placement"},
			loads: map[string]int{"a": 3, "b": 2}},
		{name: "first placement of 16 over three: 6/5/5", state: partState(16), eligible: []string{"c", "b", "a"}, term: 7,
			loads: map[string]int{"a": 6, "b": 5, "c": 5}},
		{name: "stable: nothing", state: partState(4, "a@3/2", "b@3/2", "a@5/4", "b@3/2"), eligible: []string{"a", "b"}, term: 9},
		{name: "stable with everyTerm in the same term: nothing", state: partState(2, "a@3/2", "a@3/2"), eligible: []string{"a"}, term: 2, everyTerm: true},
		{name: "a failed owner's partitions go to the least loaded", state: partState(6, "a@3/2", "b@3/2", "c@3/2", "a@3/2", "b@3/2", "c@9/2"),
			eligible: []string{"a", "b"}, why: map[string]string{"c": "failed"}, term: 4,
			want:  []string{"2 a 5 owner c is not an eligible server (failed)", "5 b 10 owner c is not an eligible server (failed)"},
			loads: map[string]int{"a": 3, "b": 3}},
		{name: "an owner not eligible, reason unknown", state: partState(2, "a@3/2", "q@3/2"), eligible: []string{"a", "b"}, term: 2,
			want: []string{"1 b 4 owner q is not an eligible server"}, loads: map[string]int{"a": 1, "b": 1}},
		{name: "orphans go to the least loaded first", state: partState(6, "a@3/2", "a@3/2", "a@3/2", "c@3/2", "c@3/2", "c@3/2"),
			eligible: []string{"a", "b"}, term: 5,
			want:  []string{"3 b 6 owner c is not an eligible server", "4 b 6 owner c is not an eligible server", "5 b 6 owner c is not an eligible server"},
			loads: map[string]int{"a": 3, "b": 3}},
		{name: "unassigned partitions go to the least loaded", state: partState(7, repeat(4, "a@3/2")...),
			eligible: []string{"a", "b"}, term: 6,
			want:  []string{"4 b 7 first placement", "5 b 7 first placement", "6 b 7 first placement"},
			loads: map[string]int{"a": 4, "b": 3}},
		{name: "a server joins: only as many move as balance needs, the highest first", state: partState(7, repeat(7, "a@3/2")...),
			eligible: []string{"a", "b"}, term: 6,
			want:  []string{"4 b 7 rebalance: b joined", "5 b 7 rebalance: b joined", "6 b 7 rebalance: b joined"},
			loads: map[string]int{"a": 4, "b": 3}},
		{name: "a third server joins 8/8", state: partState(16, slices.Concat(repeat(8, "a@3/2"), repeat(8, "b@3/2"))...),
			eligible: []string{"a", "b", "c"}, term: 3,
			want: []string{
				"5 c 4 rebalance: c joined", "6 c 4 rebalance: c joined", "7 c 4 rebalance: c joined",
				"14 c 4 rebalance: c joined", "15 c 4 rebalance: c joined",
			}, loads: map[string]int{"a": 5, "b": 6, "c": 5}},
		{name: "balanced within one: nothing", state: partState(5, "a@3/2", "a@3/2", "a@3/2", "b@3/2", "b@3/2"), eligible: []string{"a", "b"}, term: 3},
		{name: "leader placement: all to the leader, with new epochs", state: partState(3, "a@3/2", "b@8/2", "a@3/2"),
			eligible: []string{"b"}, why: map[string]string{"a": "not the leader"}, term: 9, everyTerm: true,
			want: []string{
				"0 b 10 owner a is not an eligible server (not the leader)", "1 b 10 new leadership term 9",
				"2 b 10 owner a is not an eligible server (not the leader)",
			}, loads: map[string]int{"b": 3}},
		{name: "more servers than partitions: the leader gets one", state: partState(2, "a@3/2", "b@3/2"),
			eligible: []string{"a", "b", "c"}, leader: "c", term: 4,
			want: []string{"0 c 5 the leader c runs the schedules and sweeps"}, loads: map[string]int{"b": 1, "c": 1}},
		{name: "the leader owning one already: nothing", state: partState(2, "a@3/2", "b@3/2"),
			eligible: []string{"a", "b", "c"}, leader: "b", term: 4},
		{name: "everyTerm keeps owners, with epochs above the term", state: partState(2, "a@12/2", "b@3/2"),
			eligible: []string{"a", "b"}, term: 5, everyTerm: true,
			want: []string{"0 a 13 new leadership term 5", "1 b 6 new leadership term 5"}, loads: map[string]int{"a": 1, "b": 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := partitionInput{State: tc.state, Eligible: tc.eligible, Why: tc.why, Term: tc.term, Now: now, EveryTerm: tc.everyTerm, Leader: tc.leader}
			moves := planPartitions(in)
			var got []string
			for _, mv := range moves {
				if mv.Term != tc.term || !mv.At.Equal(now) {
					t.Fatalf("move %+v: want term %d at %v", mv, tc.term, now)
				}
				if prev := tc.state.Partitions[mv.Partition].Epoch; mv.Epoch != max(prev, tc.term)+1 {
					t.Fatalf("move %+v: epoch not max(%d, %d)+1", mv, prev, tc.term)
				}
				got = append(got, fmt.Sprintf("%d %s %d %s", mv.Partition, mv.Node, mv.Epoch, mv.Reason))
			}
			if !slices.IsSortedFunc(moves, func(a, b PartitionMove) int { return a.Partition - b.Partition }) {
				t.Fatalf("moves not in partition order: %q", got)
			}
			if tc.want != nil || len(got) > 0 && tc.loads == nil {
				slices.Sort(got)
				want := slices.Clone(tc.want)
				slices.Sort(want)
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("plan = %q, want %q", got, tc.want)
				}
			}
			if tc.loads != nil {
				if l := loads(tc.state, moves); !maps.Equal(l, tc.loads) {
					t.Fatalf("loads %v, want %v", l, tc.loads)
				}
			}
			// Applying the plan, then planning again in the same term,
			// changes nothing; and the plan applies.
			f := newFSM(nil)
			f.state = tc.state.clone()
			if len(moves) > 0 {
				if err := f.apply(1, AssignPartitions(moves).Encode()); err != nil {
					t.Fatalf("the plan does not apply: %v", err)
				}
			}
			in.State = f.State()
			if again := planPartitions(in); len(again) != 0 {
				t.Fatalf("planning again: %+v", again)
			}
		})
	}
}

// Every placement over any number of servers is balanced, whatever the
// owners before: sizes differ by at most one, and only partitions of
// servers above the balanced size or not eligible move.
func TestPlanPartitionsBalances(t *testing.T) {
	names := []string{"a", "b", "c", "d", "e"}
	for count := 1; count <= 20; count++ {
		for n := 1; n <= len(names); n++ {
			for seed := range 20 {
				s := newControlState()
				s.PartitionCount = count
				for p := range count {
					if k := (p*7 + seed*3) % (len(names) + 2); k < len(names) {
						s.Partitions[p] = PartitionAssignment{Node: names[k], Epoch: uint64(k + 1), Term: 1}
					}
				}
				eligible := names[:n]
				before := loads(s, nil)
				moves := planPartitions(partitionInput{State: s, Eligible: eligible, Term: 3, Now: time.Unix(0, 0)})
				after := loads(s, moves)
				lo, hi := count, 0
				for _, e := range eligible {
					lo, hi = min(lo, after[e]), max(hi, after[e])
				}
				total := 0
				for _, e := range eligible {
					total += after[e]
				}
				if hi-lo > 1 || total != count {
					t.Fatalf("count %d over %v (seed %d): loads %v", count, eligible, seed, after)
				}
				for _, mv := range moves {
					from := s.Partitions[mv.Partition].Node
					if slices.Contains(eligible, from) && before[from] <= (count+n-1)/n {
						t.Fatalf("count %d over %v (seed %d): partition %d moved off %s at %d (loads before %v)",
							count, eligible, seed, mv.Partition, from, before[from], before)
					}
				}
			}
		}
	}
}

func TestConfigPartitions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		count     int
		set       bool
		placement PartitionPlacement
		want      int    // after defaults
		err       string // part of the error, "" for none
	}{
		{name: "default", want: DefaultPartitions},
		{name: "given", count: 8, set: true, want: 8},
		{name: "given without the flag", count: 8, want: 8},
		{name: "the bound", count: MaxPartitions, set: true, want: MaxPartitions},
		{name: "zero given explicitly", set: true, err: "partitions 0 outside 1..1024"},
		{name: "over the bound", count: MaxPartitions + 1, set: true, err: "partitions 1025 outside 1..1024"},
		{name: "negative", count: -1, err: "partitions -1 outside"},
		{name: "balanced", count: 4, placement: PlaceBalanced, want: 4},
		{name: "unknown placement", placement: 7, want: DefaultPartitions, err: "unknown partition placement 7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := TestConfig("n")
			cfg.Partitions, cfg.PartitionsSet, cfg.PartitionPlacement = tc.count, tc.set, tc.placement
			_, err := New(cfg)
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("New: %v, want %q", err, tc.err)
			}
			if d := cfg.WithDefaults(); tc.want != 0 && d.Partitions != tc.want {
				t.Fatalf("partitions after defaults %d, want %d", d.Partitions, tc.want)
			}
		})
	}
}

// A server that creates a mesh sets the count it was given; an explicit
// count that matches passes CheckPartitions.
func TestNewMeshSetsItsPartitionCount(t *testing.T) {
	t.Parallel()
	m := startSingleWith(t, "", func(c *Config) { c.Partitions, c.PartitionsSet = 5, true })
	defer func() { _ = m.Halt() }()
	if got := m.PartitionCount(); got != 5 {
		t.Fatalf("partition count %d, want 5", got)
	}
	owned, ok := m.State().PartitionsOwnedBy("solo", m.Leader().Term)
	if !ok || len(owned) != 5 {
		t.Fatalf("owned %v (complete: %v)", owned, ok)
	}
	if err := m.CheckPartitions(); err != nil {
		t.Fatal(err)
	}
}

// TestMeshCreatedBeforePartitions: a server whose Raft state comes from a
// mesh created before partitions existed (bootstrapped, no count) sets one
// partition when it leads, whatever it was started with, and
// CheckPartitions refuses the explicit count it was given.
func TestMeshCreatedBeforePartitions(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	addr := raft.ServerAddress(net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))

	// The Raft state an older version leaves behind: a bootstrapped log
	// with no partition count.
	rdir := filepath.Join(dir, "raft")
	if err := os.MkdirAll(rdir, 0o700); err != nil {
		t.Fatal(err)
	}
	bolt, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(rdir, "raft.db")})
	if err != nil {
		t.Fatal(err)
	}
	snaps, err := raft.NewFileSnapshotStore(rdir, 2, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	_, trans := raft.NewInmemTransport(addr)
	rc := raft.DefaultConfig()
	rc.LocalID = "solo"
	err = raft.BootstrapCluster(rc, bolt, bolt, snaps, trans,
		raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: "solo", Address: addr}}})
	if cerr := bolt.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}

	m := startSingleWith(t, dir, func(c *Config) { c.RaftPort, c.Partitions, c.PartitionsSet = port, 16, true })
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := m.Stop(ctx); err != nil {
			t.Error(err)
		}
	}()
	if got := m.PartitionCount(); got != 1 {
		t.Fatalf("partition count %d, want 1", got)
	}
	if a := m.State().Partitions[0]; a.Node != "solo" || a.Epoch <= a.Term {
		t.Fatalf("partition 0: %+v", a)
	}
	err = m.CheckPartitions()
	want := "this mesh was created with 1 partition; this node was started with --partitions 16; " +
		"the count never changes after a mesh is created: drop the flag or pass --partitions 1"
	if !errors.Is(err, ErrPartitionCountMismatch) || !strings.Contains(err.Error(), want) {
		t.Fatalf("CheckPartitions: %v", err)
	}
}
