package e2e_test

import (
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/robonet/robonet/node"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
	"github.com/robonet/robonet/trust"
)

// These tests run the hash-chain trust (HCTH) and the Sentinel across an
// in-process mesh: nodes that forge or replay their stamps (node.Faults),
// and a worker that tampers with verified results.

// misbehave is which node misbehaves how, from when the test says so.
type misbehave struct {
	mu      sync.Mutex
	forger  string
	replays map[string]int         // node → stamps still to replay
	last    map[string]trust.Stamp // node → its latest stamp
	done    map[string]int         // node → stamps replayed
}

func newMisbehave() *misbehave {
	return &misbehave{replays: map[string]int{}, last: map[string]trust.Stamp{}, done: map[string]int{}}
}

// faults are node's faults: a forged token once it is the forger; its
// previous stamp again while it has replays left.
func (b *misbehave) faults(nodeName string) *node.Faults {
	return &node.Faults{Stamp: func(s *trust.Stamp) {
		b.mu.Lock()
		defer b.mu.Unlock()
		switch {
		case b.forger == nodeName:
			s.Token.Value[0] ^= 0xff
		case b.replays[nodeName] > 0:
			if prev, ok := b.last[nodeName]; ok {
				b.replays[nodeName]--
				b.done[nodeName]++
				*s = prev
				return
			}
		}
		b.last[nodeName] = *s
	}}
}

func (b *misbehave) set(f func(*misbehave)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	f(b)
}

// nodeTrust is the leader's view of name, asked through via (another
// node forwards it to the leader).
func nodeTrust(t *testing.T, via robonetv1.MeshServiceClient, name string) *robonetv1.NodeTrust {
	t.Helper()
	resp, err := via.ListTrust(ctxFor(t, 10*time.Second), &robonetv1.ListTrustRequest{})
	if err != nil {
		t.Fatalf("ListTrust: %v", err)
	}
	for _, n := range resp.GetNodes() {
		if n.GetNode() == name {
			return n
		}
	}
	return nil
}

// quarantined returns the quarantine entry of name, if any.
func quarantined(t *testing.T, m *wagMesh, name string) *robonetv1.QuarantinedNode {
	t.Helper()
	resp, err := m.server.mesh.Quarantine(ctxFor(t, 10*time.Second), &robonetv1.QuarantineRequest{Op: robonetv1.QuarantineOp_QUARANTINE_OP_LIST})
	if err != nil {
		t.Fatalf("quarantine ls: %v", err)
	}
	for _, q := range resp.GetNodes() {
		if q.GetNode() == name {
			return q
		}
	}
	return nil
}

// A worker node that forges a hash-chain token on what it sends its
// Waggler is distrusted at once: its stream is cut, its trust is zero,
// the Sentinel quarantines it through Raft on the Waggler's word alone
// (a forgery is proof), and the attempts it ran run again elsewhere, each
// execution recorded once.
func TestForgedStampDistrustedAndWorkMoves(t *testing.T) {
	bad := newMisbehave()
	m := startWagMeshWith(t, func(name string, cfg *node.Config) { cfg.Faults = bad.faults(name) }, "w1", "w2", "w3")
	holder := m.waggler("")
	id := submitSpec(t, m.server.api, markSpec, `{"n": 4}`) // four tasks for six slots: room for the forger's to move
	before := m.marks.waitRuns(t, "four runs", func(r []markRun) bool { return len(r) == 4 })
	forger, ran := "", 0
	for _, r := range before {
		if r.node != holder && (forger == "" || r.node == forger) {
			forger, ran = r.node, ran+1
		}
	}
	bad.set(func(b *misbehave) { b.forger = forger })

	eventually(t, 30*time.Second, "the Sentinel to quarantine the forger", func() bool {
		q := quarantined(t, m, forger)
		return q != nil && !q.GetManual() && strings.Contains(q.GetReason(), "forged")
	})
	runs := m.marks.waitRuns(t, "the forger's attempts to run again elsewhere", func(r []markRun) bool { return len(r) >= 4+ran })
	for _, r := range runs[4:] {
		if r.node == forger {
			t.Fatalf("an attempt ran again on the forger: %+v", r)
		}
	}
	via := robonetv1.NewMeshServiceClient(m.workers[holder].conn) // not the leader: it forwards
	nt := nodeTrust(t, via, forger)
	if nt == nil || nt.GetBetrayed() == "" || nt.GetScore() != 0 || nt.GetTier() != "unverified" {
		t.Fatalf("the leader's trust in the forger: %v, want betrayed, score 0, unverified", nt)
	}
	close(m.marks.release)
	wantState(t, waitDone(t, m.server.api, id, 30*time.Second), robonetv1.InstanceState_INSTANCE_STATE_COMPLETE)
	checkOncePerExecution(t, id, m.history(id), 4)
}

// A worker node that replays a stamp it already used: the message is
// ignored, the replay counted as evidence against it — not a betrayal:
// it keeps working.
func TestReplayedStampIgnoredAndCounted(t *testing.T) {
	bad := newMisbehave()
	m := startWagMeshWith(t, func(name string, cfg *node.Config) { cfg.Faults = bad.faults(name) }, "w1", "w2")
	holder := m.waggler("")
	replayer := "w1"
	if holder == replayer {
		replayer = "w2"
	}
	// Its heartbeats verified and counted by the leader first, so that its
	// pool's stream to the Waggler and the Waggler's Lead session to the
	// leader both carry messages: replays sent during start-up can go
	// uncounted (the replayed stamp's own message never arrived, so the
	// first "replay" is that token's first sight; or observations are lost
	// with a Lead session that is opened again, as they are sent at most
	// once), and the count below is exact.
	eventually(t, 30*time.Second, "the replayer's heartbeats to be verified", func() bool {
		nt := nodeTrust(t, m.server.mesh, replayer)
		return nt != nil && nt.GetEvidence()["heartbeat_ok"] > 0
	})
	// Idle, the node's pool sends only its empty heartbeat batches (its
	// liveness): three of them go out with the previous batch's stamp.
	const replays = 3
	bad.set(func(b *misbehave) { b.replays[replayer] = replays })
	eventually(t, 30*time.Second, "the replays and the verified heartbeats to be counted by the leader", func() bool {
		nt := nodeTrust(t, m.server.mesh, replayer)
		return nt != nil && nt.GetEvidence()["replay"] == replays && nt.GetEvidence()["heartbeat_ok"] > 0
	})
	if nt := nodeTrust(t, m.server.mesh, replayer); nt.GetBetrayed() != "" {
		t.Fatalf("the replayer: %v, want not betrayed", nt)
	}
	if q := quarantined(t, m, replayer); q != nil {
		t.Fatalf("a few replays quarantined %s: %v", replayer, q)
	}
	id := submitSpec(t, m.server.api, markSpec, `{"n": 4}`) // four slots: the replayer runs two
	m.marks.waitRuns(t, "the replayer to run its share", func(r []markRun) bool {
		n := 0
		for _, x := range r {
			if x.node == replayer {
				n++
			}
		}
		return n == 2
	})
	m.finish(id, 4)
}

// verifiedDoubles doubles 21 n times, each on verify: 2.
var verifiedDoubles = testdataSpec("verified_doubles.yaml")

// wantDoubled waits for an instance of verifiedDoubles and checks that
// each of its n outputs is the honest one.
func wantDoubled(t *testing.T, m *wagMesh, id string, n int) {
	t.Helper()
	want := strings.TrimSuffix(strings.Repeat("42, ", n), ", ")
	wantOutputs(t, waitDone(t, m.server.api, id, 60*time.Second), `{"doubled": [`+want+`]}`)
}

// A worker that tampers with its results on verify: 2 tasks is outvoted
// each time it takes part; outvoted twice, the Sentinel quarantines it,
// and from then on it runs nothing while the others' results stand. No
// node is vouched for here: every node starts on probation (one attempt
// at a time). Released, it works again with its trust started from zero.
func TestTamperedVerifiedResultsQuarantined(t *testing.T) {
	runs := map[string]*atomic.Int64{"w1": {}, "w2": {}, "liar": {}}
	m := startWagMeshWith(t, func(name string, cfg *node.Config) {
		cfg.TrustPeers = nil
		if c, ok := runs[name]; ok {
			cfg.Wag.Registry = doubler(t, name == "liar", c)
		}
	}, "w1", "w2", "liar")
	m.waggler("")
	// Six verified attempts at once keep every node busy: the liar takes
	// part in some, and the tie-breaking runs outvote it.
	for i := 0; quarantined(t, m, "liar") == nil; i++ {
		if i == 5 {
			t.Fatalf("30 verified attempts and the liar is not quarantined; it ran %d, its trust: %v", runs["liar"].Load(), nodeTrust(t, m.server.mesh, "liar"))
		}
		id := submitSpec(t, m.server.api, verifiedDoubles, `{"n": 6}`)
		wantDoubled(t, m, id, 6)
		if runs["liar"].Load() >= 2 {
			// Outvoted at least twice: the Sentinel decides within a tick
			// or two.
			eventually(t, 10*time.Second, "the Sentinel to quarantine the liar", func() bool { return quarantined(t, m, "liar") != nil })
		}
	}
	q := quarantined(t, m, "liar")
	if q.GetManual() || !strings.Contains(q.GetReason(), "outvoted") {
		t.Fatalf("the liar's quarantine: %v, want the Sentinel's, naming the verification mismatches", q)
	}
	if nt := nodeTrust(t, m.server.mesh, "liar"); nt.GetEvidence()["verify_mismatch"] < 2 {
		t.Fatalf("the leader's evidence on the liar: %v", nt)
	}
	// Quarantined: it receives nothing; the honest pair's results stand.
	liarRuns := runs["liar"].Load()
	id := submitSpec(t, m.server.api, verifiedDoubles, `{"n": 4}`)
	wantDoubled(t, m, id, 4)
	if got := runs["liar"].Load(); got != liarRuns {
		t.Fatalf("the quarantined liar ran %d attempts", got-liarRuns)
	}
	// Released: its trust starts from zero.
	if _, err := m.server.mesh.Quarantine(ctxFor(t, 30*time.Second), &robonetv1.QuarantineRequest{
		Op: robonetv1.QuarantineOp_QUARANTINE_OP_RELEASE, Node: "liar"}); err != nil {
		t.Fatal(err)
	}
	var last *robonetv1.NodeTrust
	deadline := time.Now().Add(10 * time.Second)
	for last = nodeTrust(t, m.server.mesh, "liar"); last != nil && (last.GetEvidence()["verify_mismatch"] > 0 || last.GetTier() != "unverified"); last = nodeTrust(t, m.server.mesh, "liar") {
		if time.Now().After(deadline) {
			t.Fatalf("the liar's trust 10 s after its release: %v, want started again from zero", last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
