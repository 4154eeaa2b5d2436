package wag

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/robonet/robonet/engine/port"
)

// The Router's core alone: events in, effects out, in the style of
// engine/graph's tests. Attempts are named by their execution ID; effects
// and sends are rendered as lines.

// coreHarness drives a routeCore of term 1.
type coreHarness struct {
	t   *testing.T
	c   routeCore
	now time.Time
	// held are the instances the engine holds (the holds predicate);
	// nil: every one.
	held map[uuid.UUID]bool
}

func newCore(t *testing.T) *coreHarness {
	return &coreHarness{t: t, c: newRouteCore(1, true, DefaultResultHold), now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
}

// coreKey is the key of the attempt named name, of an instance named
// after it.
func coreKey(name string) port.AttemptKey {
	return port.AttemptKey{InstanceID: uuid.NewSHA1(uuid.Nil, []byte(name)), ExecutionID: name, Attempt: 1}
}

// coreTask is a dispatch of term 1 of the attempt name for capability.
func coreTask(name, capability string) port.TaskDispatch {
	return port.TaskDispatch{AttemptKey: coreKey(name), Term: 1, Capability: capability}
}

func (h *coreHarness) holds() func(uuid.UUID) bool {
	if h.held == nil {
		return nil
	}
	return func(id uuid.UUID) bool { return h.held[id] }
}

func (h *coreHarness) dispatch(ds ...port.TaskDispatch) []string {
	return fxLines(h.c.onDispatch(ds, h.now))
}

func (h *coreHarness) cancel(names ...string) []string {
	keys := make([]port.AttemptKey, len(names))
	for i, n := range names {
		keys[i] = coreKey(n)
	}
	return fxLines(h.c.onCancel(keys, h.now))
}

// roles sets the roles, given as capability=node@epoch.
func (h *coreHarness) roles(rs ...string) []string {
	m := map[string]Role{}
	for _, r := range rs {
		var c, node string
		var epoch uint64
		cn, e, _ := strings.Cut(r, "@")
		c, node, _ = strings.Cut(cn, "=")
		if _, err := fmt.Sscan(e, &epoch); err != nil {
			h.t.Fatalf("role %q: %v", r, err)
		}
		m[c] = Role{Node: node, Epoch: epoch}
	}
	return fxLines(h.c.onRoles(m, h.now))
}

func (h *coreHarness) result(names ...string) []string {
	var out []string
	for _, n := range names {
		out = append(out, fxLines(h.c.onResult(port.TaskResult{AttemptKey: coreKey(n), OK: true}, h.now, h.holds()))...)
	}
	return out
}

func (h *coreHarness) tick() []string { return fxLines(h.c.onTick(h.now, h.holds())) }

// send takes what node's link sends next; then the link reports out (each
// handoff taken unless out says otherwise).
func (h *coreHarness) send(node string, out sendOutcome) (sent, fx []string) {
	s := h.c.nextSend(node)
	return sendLines(s), fxLines(h.c.onSent(node, s, out, h.now))
}

// sendOK sends what node has and expects it all taken, with no effect.
func (h *coreHarness) sendOK(node string) []string {
	h.t.Helper()
	sent, fx := h.send(node, sendOutcome{})
	expect(h.t, fx)
	return sent
}

func (h *coreHarness) waiting() map[string]int {
	out := map[string]int{}
	for c, ws := range h.c.waiting {
		out[c] = len(ws)
	}
	return out
}

// fxLines renders effects, one line each.
func fxLines(fx routeFx) []string {
	var out []string
	for i, err := range fx.errs {
		if err != nil {
			out = append(out, fmt.Sprintf("error #%d: %v", i, err))
		}
	}
	for _, n := range fx.start {
		out = append(out, "start "+n)
	}
	for _, c := range fx.failovers {
		out = append(out, "failover "+c)
	}
	if len(fx.wake) > 0 {
		out = append(out, "wake "+strings.Join(fx.wake, " "))
	}
	var ps []string
	for _, p := range fx.progress {
		ps = append(ps, fmt.Sprintf("progress %s %q", p.ExecutionID, p.Message))
	}
	slices.Sort(ps) // routed again in no particular order
	out = append(out, ps...)
	for _, c := range fx.drained {
		out = append(out, "drained "+c)
	}
	for _, r := range fx.expired {
		out = append(out, "expired "+r.ExecutionID)
	}
	for _, r := range fx.failed {
		out = append(out, fmt.Sprintf("fail %s: %s", r.ExecutionID, r.Error))
	}
	for _, r := range fx.results {
		out = append(out, "result "+r.ExecutionID)
	}
	if fx.close {
		out = append(out, "close")
	}
	if fx.err != nil {
		out = append(out, fmt.Sprintf("retry: %v", fx.err))
	}
	return out
}

// expect fails the test unless got are the lines want, in order.
func expect(t testing.TB, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("effects:\n  got  %q\n  want %q", got, want)
	}
}

// sendLines renders what a link sends.
func sendLines(s routeSend) []string {
	var out []string
	if s.roles != nil {
		var rs []string
		for _, c := range slices.Sorted(maps.Keys(s.roles)) {
			rs = append(rs, fmt.Sprintf("%s@%d", c, s.roles[c]))
		}
		out = append(out, fmt.Sprintf("roles [%s] quarantined %v", strings.Join(rs, " "), s.quar))
	}
	if len(s.cancels) > 0 {
		var ks []string
		for _, k := range s.cancels {
			ks = append(ks, k.ExecutionID)
		}
		out = append(out, "cancel "+strings.Join(ks, " "))
	}
	for _, hd := range s.hs {
		l := fmt.Sprintf("hand %s@%d", hd.ExecutionID, hd.Epoch)
		if hd.WorkerID != "" {
			l += fmt.Sprintf(" worker %s/%d", hd.WorkerID, hd.Generation)
		}
		if hd.MayRun {
			l += " may-run"
		}
		out = append(out, l)
	}
	return out
}

// An attempt of a capability no node serves waits (the engine is told,
// once) and is handed over when a node takes the role.
func TestRouteCoreWaitsForARole(t *testing.T) {
	h := newCore(t)
	expect(t, h.dispatch(coreTask("t1", "x")), `progress t1 "waiting: no node serves x"`)
	expect(t, h.dispatch(coreTask("t1", "x"))) // a duplicate: nothing
	if got := h.waiting(); !maps.Equal(got, map[string]int{"x": 1}) {
		t.Fatalf("waiting %v", got)
	}
	expect(t, h.roles("y=a@1"), "start a", "wake a") // another capability
	expect(t, h.sendOK("a"), "roles [y@1] quarantined []")
	expect(t, h.roles("y=a@1", "x=a@1"), "wake a")
	if got := h.waiting(); len(got) != 0 {
		t.Fatalf("waiting %v after x got a Waggler", got)
	}
	expect(t, h.sendOK("a"), "roles [x@1 y@1] quarantined []", "hand t1@1")
	expect(t, h.sendOK("a")) // all sent
	// The role goes: the attempt waits again, and is not announced twice.
	expect(t, h.roles("y=a@1"), "wake a")
	if got := h.waiting(); !maps.Equal(got, map[string]int{"x": 1}) {
		t.Fatalf("waiting %v", got)
	}
}

// Attempts of a term other than the core's are refused, one by one.
func TestRouteCoreRefusesOtherTerms(t *testing.T) {
	h := newCore(t)
	old := coreTask("t0", "x")
	old.Term = 0
	expect(t, h.dispatch(coreTask("t1", "x"), old),
		"error #1: stale leadership term: this router serves term 1, the attempt is of term 0",
		`progress t1 "waiting: no node serves x"`)
	if _, ok := h.c.atts[old.AttemptKey]; ok {
		t.Fatal("the attempt of term 0 was accepted")
	}
}

// A session that breaks while handing attempts over is closed and retried;
// the new session gets everything of its node again — what the old one
// took too, as the host may have lost it — marked as attempts that may
// run (or with the worker that runs them, when a Waggler said).
func TestRouteCoreBrokenLinkHandsEverythingAgain(t *testing.T) {
	h := newCore(t)
	h.roles("x=a@1")
	h.sendOK("a")
	h.dispatch(coreTask("t1", "x"), coreTask("t2", "x"), coreTask("t3", "x"))
	broke := errors.New("stream broke")
	sent, fx := h.send("a", sendOutcome{errs: []error{nil, nil, broke}})
	expect(t, sent, "hand t1@1", "hand t2@1", "hand t3@1")
	expect(t, fx, "close", "retry: stream broke")
	h.c.onStarted([]Started{{Key: coreKey("t2"), WorkerID: "w/x/0", Generation: 7}})

	h.c.onOpened("a")
	expect(t, h.sendOK("a"), "roles [x@1] quarantined []",
		"hand t1@1 may-run", "hand t2@1 worker w/x/0/7", "hand t3@1 may-run")
	expect(t, h.sendOK("a"))
}

// A session that breaks on SetRoles or Cancel hands nothing over: the
// handoffs, sent on the next session, are not marked as attempts that may
// run.
func TestRouteCoreBrokenBeforeHandoffs(t *testing.T) {
	h := newCore(t)
	h.roles("x=a@1")
	h.dispatch(coreTask("t1", "x"))
	sent, fx := h.send("a", sendOutcome{rolesErr: errors.New("stream broke")})
	expect(t, sent, "roles [x@1] quarantined []", "hand t1@1")
	expect(t, fx, "close", "retry: stream broke")
	h.c.onOpened("a")
	expect(t, h.sendOK("a"), "roles [x@1] quarantined []", "hand t1@1")

	h.dispatch(coreTask("t2", "x"))
	h.cancel("t1")
	sent, fx = h.send("a", sendOutcome{cancelErr: errors.New("stream broke")})
	expect(t, sent, "cancel t1", "hand t2@1")
	expect(t, fx, "close", "retry: stream broke")
	h.c.onOpened("a")
	// The cancel that failed, and the same again as a recent cancel of
	// the node's capability (harmless).
	expect(t, h.sendOK("a"), "roles [x@1] quarantined []", "cancel t1 t1", "hand t2@1")
}

// A handoff the Waggler refuses (busy, or not the Waggler yet) is sent
// again after a backoff, without closing the session, and is not marked
// as one that may run: the Waggler did not take it.
func TestRouteCoreRefusedHandoffIsSentAgain(t *testing.T) {
	h := newCore(t)
	h.roles("x=a@1")
	h.dispatch(coreTask("t1", "x"), coreTask("t2", "x"))
	sent, fx := h.send("a", sendOutcome{errs: []error{ErrBusy, nil}})
	expect(t, sent, "roles [x@1] quarantined []", "hand t1@1", "hand t2@1")
	expect(t, fx, "retry: wag: queue full")
	expect(t, h.sendOK("a"), "hand t1@1")
}

// A handoff too large for a message fails the attempt; one a newer leader
// refused (stale term) is not sent again.
func TestRouteCoreTooLargeFails(t *testing.T) {
	h := newCore(t)
	h.roles("x=a@1")
	h.dispatch(coreTask("t1", "x"), coreTask("t2", "x"), coreTask("t3", "x"))
	sent, fx := h.send("a", sendOutcome{errs: []error{ErrTooLarge, port.ErrStaleTerm, nil}})
	expect(t, sent, "roles [x@1] quarantined []", "hand t1@1", "hand t2@1", "hand t3@1")
	expect(t, fx, "fail t1: wag: too large for a message")
	expect(t, h.sendOK("a"))
	if _, ok := h.c.atts[coreKey("t1")]; ok || h.c.bl.inflight["x"] != 2 {
		t.Fatalf("the failed attempt is still counted: in flight %d", h.c.bl.inflight["x"])
	}
}

// A cancelled attempt still queued is never sent, nor cancelled on the
// node; one already sent is cancelled there.
func TestRouteCoreCancel(t *testing.T) {
	h := newCore(t)
	h.roles("x=a@1")
	h.sendOK("a")
	h.dispatch(coreTask("sent", "x"))
	expect(t, h.sendOK("a"), "hand sent@1")
	h.dispatch(coreTask("queued", "x"), coreTask("next", "x"))
	expect(t, h.cancel("queued", "sent", "unknown"), "wake a")
	expect(t, h.sendOK("a"), "cancel sent", "hand next@1")
	if h.c.bl.inflight["x"] != 1 {
		t.Fatalf("in flight %d, want 1", h.c.bl.inflight["x"])
	}
	// A waiting attempt cancelled waits no more.
	h.dispatch(coreTask("w", "y"))
	expect(t, h.cancel("w"))
	if got := h.waiting(); len(got) != 0 {
		t.Fatalf("waiting %v", got)
	}
}

// An attempt cancelled while its handoff is on its way may be on the
// Waggler already: it is cancelled there.
func TestRouteCoreCancelWhileHandingOver(t *testing.T) {
	h := newCore(t)
	h.roles("x=a@1")
	h.dispatch(coreTask("t1", "x"), coreTask("t2", "x"))
	s := h.c.nextSend("a")
	expect(t, sendLines(s), "roles [x@1] quarantined []", "hand t1@1", "hand t2@1")
	expect(t, h.cancel("t1", "t2"), "wake a")
	expect(t, fxLines(h.c.onSent("a", s, sendOutcome{errs: []error{nil, ErrBusy}}, h.now)))
	// t2 was refused, but the answer came after the cancel: it is sent too.
	expect(t, h.sendOK("a"), "cancel t1 t2")
	// Once the answer came, a cancel of a queued attempt is not sent.
	h.dispatch(coreTask("t3", "x"))
	expect(t, h.cancel("t3"), "wake a")
	expect(t, h.sendOK("a"))
}

// A cancel the session failed to send is sent on the next one, before the
// cancels queued since.
func TestRouteCoreFailedCancelIsSentAgain(t *testing.T) {
	h := newCore(t)
	h.roles("x=a@1")
	h.dispatch(coreTask("t1", "x"), coreTask("t2", "x"))
	h.sendOK("a")
	h.cancel("t1")
	s := h.c.nextSend("a")
	expect(t, sendLines(s), "cancel t1")
	h.cancel("t2") // while t1's is on the wire
	expect(t, fxLines(h.c.onSent("a", s, sendOutcome{cancelErr: errors.New("stream broke")}, h.now)), "close", "retry: stream broke")
	expect(t, h.sendOK("a"), "cancel t1 t2")
}

// A role moving to another node moves the attempts queued for the old one
// and those it took; both nodes are told their new role sets, and the new
// Waggler the recent cancels of the capability.
func TestRouteCoreRoleMoves(t *testing.T) {
	h := newCore(t)
	h.roles("x=a@1")
	h.dispatch(coreTask("took", "x"), coreTask("gone", "x"))
	h.sendOK("a")
	h.cancel("gone")
	h.sendOK("a")
	h.dispatch(coreTask("queued", "x"))
	expect(t, h.roles("x=b@2"), "start b", "failover x", "wake a b")
	expect(t, h.sendOK("a"), "roles [] quarantined []")
	expect(t, h.sendOK("b"), "roles [x@2] quarantined []", "cancel gone", "hand took@2 may-run", "hand queued@2")
	// Same node, new epoch: handed again, not a failover.
	expect(t, h.roles("x=b@3"), "wake a b")
	expect(t, h.sendOK("b"), "roles [x@3] quarantined []", "cancel gone", "hand took@3 may-run", "hand queued@3 may-run")
	// Another capability moves: x's Waggler is not told its cancels again.
	expect(t, h.roles("x=b@3", "y=b@1"), "wake a b")
	expect(t, h.sendOK("b"), "roles [x@3 y@1] quarantined []")
	// Cancels are remembered for rememberCancels only.
	h.now = h.now.Add(rememberCancels)
	expect(t, h.roles("x=c@4"), "start c", "failover x", "wake a b c")
	expect(t, h.sendOK("c"), "roles [x@4] quarantined []", "hand took@4 may-run", "hand queued@4 may-run")
}

// A handoff in flight while its attempt moves away is not taken as sent by
// the old node.
func TestRouteCoreMovedWhileSending(t *testing.T) {
	h := newCore(t)
	h.roles("x=a@1")
	h.dispatch(coreTask("t1", "x"))
	s := h.c.nextSend("a")
	h.roles("x=b@2")
	expect(t, fxLines(h.c.onSent("a", s, sendOutcome{}, h.now)))
	expect(t, h.sendOK("b"), "roles [x@2] quarantined []", "hand t1@2 may-run")
}

// A change of the quarantine is sent to every node with its roles.
func TestRouteCoreQuarantine(t *testing.T) {
	h := newCore(t)
	h.roles("x=a@1", "y=b@1")
	h.sendOK("a")
	h.sendOK("b")
	expect(t, fxLines(h.c.onQuarantine([]string{"c"})), "wake a b")
	expect(t, fxLines(h.c.onQuarantine([]string{"c"}))) // unchanged
	expect(t, h.sendOK("a"), "roles [x@1] quarantined [c]")
	expect(t, h.sendOK("b"), "roles [y@1] quarantined [c]")
}

// A role change while SetRoles is on the wire is sent after it.
func TestRouteCoreRoleChangeWhileSending(t *testing.T) {
	h := newCore(t)
	h.roles("x=a@1")
	s := h.c.nextSend("a")
	h.roles("x=a@1", "y=a@1")
	expect(t, fxLines(h.c.onSent("a", s, sendOutcome{}, h.now)))
	expect(t, h.sendOK("a"), "roles [x@1 y@1] quarantined []")
}

// Results go to the engine — those of instances it does not hold yet
// parked, and delivered in the order they came once it holds them, or
// given up after resultHold. The attempts are done either way.
func TestRouteCoreParksResults(t *testing.T) {
	h := newCore(t)
	h.roles("x=a@1")
	h.dispatch(coreTask("r1", "x"), coreTask("r2", "x"), coreTask("r3", "x"), coreTask("r4", "x"))
	h.sendOK("a")
	h.held = map[uuid.UUID]bool{coreKey("r3").InstanceID: true}
	expect(t, h.result("r1", "r2", "r3"), "result r3")
	if len(h.c.atts) != 1 || h.c.bl.inflight["x"] != 1 {
		t.Fatalf("%d attempts, %d in flight after three results; want 1", len(h.c.atts), h.c.bl.inflight["x"])
	}
	expect(t, h.tick()) // the engine holds neither yet
	h.now = h.now.Add(time.Second)
	expect(t, h.result("r4"))
	h.held[coreKey("r2").InstanceID] = true
	h.held[coreKey("r1").InstanceID] = true
	expect(t, h.tick(), "result r1", "result r2")
	expect(t, h.tick())
	h.held = map[uuid.UUID]bool{}
	h.now = h.now.Add(DefaultResultHold - time.Nanosecond)
	expect(t, h.tick())
	h.now = h.now.Add(time.Nanosecond)
	expect(t, h.tick(), "expired r4")
	// A result of no attempt the core knows still goes to the engine.
	h.held = nil
	expect(t, h.result("stranger"), "result stranger")
}

// A capability the engine was told saturated is reported drained when a
// result or a cancel brings its backlog to half the limit.
func TestRouteCoreDrains(t *testing.T) {
	h := newCore(t)
	h.dispatch(coreTask("t1", "x"), coreTask("t2", "x"), coreTask("t3", "x"))
	h.c.bl.gated["x"] = 3 // Saturated said so at 3
	expect(t, h.result("t1"), "result t1")
	expect(t, h.cancel("t2"), "drained x")
	expect(t, h.cancel("t3"))
}
