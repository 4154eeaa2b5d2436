package wag

import (
	"testing"
	"time"

	"github.com/robonet/robonet/sentinel"
)

func TestWorkerSubject(t *testing.T) {
	for id, want := range map[string]string{
		"n1/code.exec/3":        "n1",
		"n1/text/gpu-box-2":     "n1/gpu-box",
		"n1/text/p.1-7":         "n1/p.1",
		"n1/text/odd":           "n1/odd", // not a pool's slot name, but not the node's either
		"n1":                    "n1",
		"n1/text":               "n1",
		"n1/ai.inference/a-b-1": "n1/a-b",
		"n1/text/gpu-box~p1-3":  "n1/gpu-box", // a program connected with the worker token gpu-box
		"n1/text/~p1-3":         "n1/~p1",
	} {
		if got := WorkerSubject(id); got != want {
			t.Errorf("WorkerSubject(%q) = %q, want %q", id, got, want)
		}
	}
}

// A worker program is on probation of its own: one attempt at a time
// however trusted its node, more as it earns them; it is bounded by its
// node's allowance too, so a node on probation gains nothing by
// connecting programs under many names. What it is given, completes and
// loses counts against the program (a completion for its node too).
func TestWagglerProgramProbation(t *testing.T) {
	tr := &fakeTrust{allow: map[string]int{"n/gpu": 1, "m": 2}}
	own := newFakeWorker("n/code.exec/1")
	gpu := []*fakeWorker{newFakeWorker("n/code.exec/gpu-1"), newFakeWorker("n/code.exec/gpu-2"), newFakeWorker("n/code.exec/gpu-3")}
	many := []*fakeWorker{newFakeWorker("m/code.exec/a-1"), newFakeWorker("m/code.exec/b-1"), newFakeWorker("m/code.exec/c-1")}
	h := newHarnessWith(t, tr, append(append([]*fakeWorker{own}, gpu...), many...)...)
	h.dispatch("a", "b", "c", "d", "e", "f", "g")
	count := func(fws []*fakeWorker) []Assignment {
		var out []Assignment
		for _, fw := range fws {
			select {
			case a := <-fw.runs:
				out = append(out, a)
			default:
			}
		}
		return out
	}
	own.assigned(t)
	if got := count(gpu); len(got) != 1 {
		t.Fatalf("a program on probation runs %d at once, want 1", len(got))
	}
	if got := count(many); len(got) != 2 {
		t.Fatalf("three programs of a node allowed two run %d at once, want 2", len(got))
	}
	tr.mu.Lock()
	tr.allow["n/gpu"] = 2 // it earned one more
	tr.mu.Unlock()
	h.clk.Advance(time.Second)
	if got := count(gpu); len(got) != 1 {
		t.Fatalf("allowed two, the program got %d more, want 1", len(got))
	}
	if k := tr.kinds("n/gpu"); k[sentinel.Accepted] != 2 {
		t.Fatalf("the program's observations %v, want 2 accepted", k)
	}
	if k := tr.kinds("n"); k[sentinel.Accepted] != 1 {
		t.Fatalf("the node's observations %v, want 1 accepted (its own worker's)", k)
	}
}

// Completions count for the program and its node, losses for the program
// alone; a program's misbehaviour counts against it; a quarantined
// program is given no new attempt while its node's workers go on.
func TestWagglerProgramEvidenceAndQuarantine(t *testing.T) {
	tr := &fakeTrust{}
	own, prog := newFakeWorker("n/code.exec/1"), newFakeWorker("n/code.exec/gpu-1")
	h := newHarnessWith(t, tr, prog)
	h.dispatch("a")
	a := prog.assigned(t)
	prog.report(h.w, a, "done")
	if kp, kn := tr.kinds("n/gpu"), tr.kinds("n"); kp[sentinel.Completed] != 1 || kn[sentinel.Completed] != 1 {
		t.Fatalf("a completion: the program's %v, the node's %v; want one each", kp, kn)
	}
	h.dispatch("b")
	b := prog.assigned(t)
	h.clk.Advance(4 * time.Second) // silent: declared dead, b is lost
	if kp, kn := tr.kinds("n/gpu"), tr.kinds("n"); kp[sentinel.Lost] != 1 || kn[sentinel.Lost] != 0 {
		t.Fatalf("a loss: the program's %v, the node's %v; want the program's alone", kp, kn)
	}
	prog.report(h.w, b, "late") // back: it takes work again
	h.w.Misbehaved(prog.id, TooFast)
	h.w.Misbehaved(own.id, Unsolicited) // a node's own slot runs no program: ignored
	if kp, kn := tr.kinds("n/gpu"), tr.kinds("n"); kp[sentinel.Misbehaved] != 1 || kn[sentinel.Misbehaved] != 0 {
		t.Fatalf("misbehaviour: the program's %v, the node's %v", kp, kn)
	}

	if err := h.w.AddWorker(own); err != nil {
		t.Fatal(err)
	}
	for len(own.runs) > 0 || len(prog.runs) > 0 { // b, queued again, went to one of them
		select {
		case x := <-own.runs:
			own.report(h.w, x, "done")
		case x := <-prog.runs:
			prog.report(h.w, x, "done")
		}
	}
	h.w.Quarantine(map[string]bool{"n/gpu": true})
	h.dispatch("c", "d")
	own.assigned(t)
	prog.idle(t)
}

// A worker the Waggler first hears of from an inherited attempt (a
// predecessor's handoff) is judged as its subject too: the program's
// completion counts for the program, not for a nameless subject.
func TestInheritedWorkerKeepsItsSubject(t *testing.T) {
	tr := &fakeTrust{}
	h := newHarnessWith(t, tr)
	d := task("echo", "inherited")
	d.AttemptKey = testKey("inherited")
	const prog = "n/code.exec/gpu-1"
	h.w.Inherit([]Handoff{{TaskDispatch: d, WorkerID: prog, Generation: 5}})
	h.w.Report(Report{Key: d.AttemptKey, Generation: 5, WorkerID: prog, OK: true, Output: "done"})
	if rs := h.sink.Results(); len(rs) != 1 || rs[0].AttemptKey != d.AttemptKey {
		t.Fatalf("results %+v, want the inherited attempt's", rs)
	}
	if kp, kn, none := tr.kinds("n/gpu"), tr.kinds("n"), tr.kinds(""); kp[sentinel.Completed] != 1 || kn[sentinel.Completed] != 1 || len(none) != 0 {
		t.Fatalf("the program's %v, the node's %v, a nameless subject's %v: want one completion each for the program and its node", kp, kn, none)
	}
}
