package e2e_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

const chainSpec = `
name: chain
version: 1
inputs:
  word: {type: string, default: robo}
tasks:
  first:
    capability: code.exec
    action: exec
    with: {argv: [sh, -c, 'printf "%s" "$1" | tr a-z A-Z', first, "${{ inputs.word }}"]}
  second:
    needs: [first]
    capability: core
    action: echo
    with: {upper: "${{ tasks.first.output }}", length: "${{ size(tasks.first.output) }}"}
  third:
    needs: [second]
    capability: code.exec
    action: exec
    with:
      argv: [sh, -c, 'echo "{\"word\": \"$1\", \"doubled\": $(( $2 * 2 ))}"', third, "${{ tasks.second.output.upper }}", "${{ string(tasks.second.output.length) }}"]
outputs:
  result: ${{ tasks.third.output }}
  upper: ${{ tasks.second.output.upper }}
`

// TestSequentialChain: each task's output feeds the next one.
func TestSequentialChain(t *testing.T) {
	forEachStore(t, func(t *testing.T, store storeKind) {
		tn := startNode(t, store)
		in := run(t, tn, chainSpec, `{"word": "mesh"}`)
		wantOutputs(t, in, `{"result": {"word": "MESH", "doubled": 8}, "upper": "MESH"}`)
		for _, name := range []string{"first", "second", "third"} {
			if tk := task(t, in, name); tk.GetStatus() != robonetv1.TaskStatus_TASK_STATUS_COMPLETED || tk.GetAttempt() != 1 {
				t.Errorf("task %s: %v attempt %d, want completed on attempt 1", name, tk.GetStatus(), tk.GetAttempt())
			}
		}
	})
}

// The two branches meet through files: each creates its marker and waits
// for the other's, so the workflow only completes if they run at the same
// time.
var parallelSpec = testdataSpec("parallel.yaml")

// TestParallelBranchesJoined: two branches run concurrently and a join
// sees both results.
func TestParallelBranchesJoined(t *testing.T) {
	forEachStore(t, func(t *testing.T, store storeKind) {
		tn := startNode(t, store)
		in := run(t, tn, parallelSpec, fmt.Sprintf(`{"dir": %q}`, t.TempDir()))
		wantOutputs(t, in, `{"sum": 64, "both": [42, 22]}`)
	})
}

// Item n sleeps n tenths of a second, so instances finish in the order
// 1, 2, 3, 4, 5 while the list is 5, 1, 4, 2, 3.
var spreadSpec = testdataSpec("spread.yaml")

// TestSpreadKeepsOrder: a spread's results come in the order of its list,
// not in the order its instances finished.
func TestSpreadKeepsOrder(t *testing.T) {
	forEachStore(t, func(t *testing.T, store storeKind) {
		tn := startNode(t, store)
		in := run(t, tn, spreadSpec, "")
		wantOutputs(t, in, `{"count": 5, "squares": [
			{"index": 0, "square": 25}, {"index": 1, "square": 1}, {"index": 2, "square": 16},
			{"index": 3, "square": 4}, {"index": 4, "square": 9}]}`)
		sq := task(t, in, "square")
		if !sq.GetSpread() || sq.GetWidth() != 5 || sq.GetDone() != 5 || sq.GetFailed() != 0 {
			t.Errorf("spread summary: spread=%v width %d done %d failed %d, want 5/5/0", sq.GetSpread(), sq.GetWidth(), sq.GetDone(), sq.GetFailed())
		}
		if p := in.GetProgress(); p.GetTotal() != 6 || p.GetDone() != 6 || p.GetRunning() != 0 {
			t.Errorf("progress %v, want 6 of 6 done", p)
		}
	})
}

var emptySpreadSpec = testdataSpec("empty_spread.yaml")

// TestEmptySpread: a spread over an empty list resolves at once to [] and
// its dependents run.
func TestEmptySpread(t *testing.T) {
	forEachStore(t, func(t *testing.T, store storeKind) {
		tn := startNode(t, store)
		in := run(t, tn, emptySpreadSpec, "")
		wantOutputs(t, in, `{"after": {"count": 0, "results": []}}`)
	})
}

// Guards two levels deep: small | large → (huge | medium); pick takes the
// one branch that ran.
var guardsSpec = testdataSpec("guards.yaml")

// TestNestedGuards: nested when-guards pick exactly one branch; the others
// are skipped and the join still runs.
func TestNestedGuards(t *testing.T) {
	cases := []struct {
		size    int
		kind    string
		skipped []string
	}{
		{5, "small", []string{"large", "huge", "medium"}},
		{50, "medium", []string{"small", "huge"}},
		{5000, "huge", []string{"small", "medium"}},
	}
	forEachStore(t, func(t *testing.T, store storeKind) {
		tn := startNode(t, store)
		for _, c := range cases {
			in := run(t, tn, guardsSpec, fmt.Sprintf(`{"size": %d}`, c.size))
			wantOutputs(t, in, fmt.Sprintf(`{"kind": %q}`, c.kind))
			for _, name := range c.skipped {
				if st := task(t, in, name).GetStatus(); st != robonetv1.TaskStatus_TASK_STATUS_SKIPPED {
					t.Errorf("size %d: task %s is %v, want skipped", c.size, name, st)
				}
			}
		}
	})
}

// The script counts its runs in a file and succeeds on the third.
var retrySpec = testdataSpec("retry.yaml")

// TestRetrySucceedsOnThirdAttempt: two failures are retried, the third
// attempt's output is the task's.
func TestRetrySucceedsOnThirdAttempt(t *testing.T) {
	forEachStore(t, func(t *testing.T, store storeKind) {
		tn := startNode(t, store)
		counter := filepath.Join(t.TempDir(), "runs")
		in := run(t, tn, retrySpec, fmt.Sprintf(`{"counter": %q}`, counter))
		wantOutputs(t, in, `{"flaky": {"runs": 3, "attempt": 3}}`)
		if tk := task(t, in, "flaky"); tk.GetAttempt() != 3 || tk.GetMaxAttempts() != 5 {
			t.Errorf("flaky: attempt %d of %d, want 3 of 5", tk.GetAttempt(), tk.GetMaxAttempts())
		}
		if data, err := os.ReadFile(counter); err != nil || strings.TrimSpace(string(data)) != "3" {
			t.Errorf("the script ran %q times (%v), want 3", data, err)
		}
	})
}

var skipSpec = testdataSpec("skip.yaml")

// TestRetriesExhaustedUnderSkip: the task fails after its attempts, its
// dependents see null and the workflow completes.
func TestRetriesExhaustedUnderSkip(t *testing.T) {
	forEachStore(t, func(t *testing.T, store storeKind) {
		tn := startNode(t, store)
		in := run(t, tn, skipSpec, "")
		wantOutputs(t, in, `{"after": {"got": null}}`)
		b := task(t, in, "broken")
		if b.GetStatus() != robonetv1.TaskStatus_TASK_STATUS_FAILED || b.GetAttempt() != 2 {
			t.Errorf("broken: %v attempt %d, want failed after 2 attempts", b.GetStatus(), b.GetAttempt())
		}
		if !strings.Contains(b.GetError(), "no luck") {
			t.Errorf("broken: error %q does not carry the stderr tail", b.GetError())
		}
		if p := in.GetProgress(); p.GetFailed() != 1 || p.GetDone() != 2 {
			t.Errorf("progress %v, want 2 done with 1 failed", p)
		}
	})
}

var retryExhaustedSpec = testdataSpec("retry_exhausted.yaml")

// TestRetriesExhaustedUnderRetry: with the default policy, exhausted
// attempts fail the workflow.
func TestRetriesExhaustedUnderRetry(t *testing.T) {
	forEachStore(t, func(t *testing.T, store storeKind) {
		tn := startNode(t, store)
		in := run(t, tn, retryExhaustedSpec, "")
		wantState(t, in, robonetv1.InstanceState_INSTANCE_STATE_FAILED)
		if !strings.Contains(in.GetError(), "broken") {
			t.Errorf("instance error %q does not name the task", in.GetError())
		}
		if b := task(t, in, "broken"); b.GetAttempt() != 2 || b.GetStatus() != robonetv1.TaskStatus_TASK_STATUS_FAILED {
			t.Errorf("broken: %v attempt %d, want failed after 2", b.GetStatus(), b.GetAttempt())
		}
		if st := task(t, in, "after").GetStatus(); st == robonetv1.TaskStatus_TASK_STATUS_COMPLETED {
			t.Errorf("after ran although the workflow failed")
		}
	})
}

var abortSpec = testdataSpec("abort.yaml")

// TestAbortFailsAtOnce: under abort the first failure fails the workflow
// and cancels the task still running.
func TestAbortFailsAtOnce(t *testing.T) {
	forEachStore(t, func(t *testing.T, store storeKind) {
		tn := startNode(t, store)
		start := time.Now()
		in := run(t, tn, abortSpec, "")
		wantState(t, in, robonetv1.InstanceState_INSTANCE_STATE_FAILED)
		if took := time.Since(start); took > 20*time.Second {
			t.Errorf("abort took %s: the sleeping sibling was not cancelled", took)
		}
		if b := task(t, in, "broken"); b.GetAttempt() != 1 || b.GetStatus() != robonetv1.TaskStatus_TASK_STATUS_FAILED {
			t.Errorf("broken: %v attempt %d, want failed on its only attempt", b.GetStatus(), b.GetAttempt())
		}
		if st := task(t, in, "slow").GetStatus(); st != robonetv1.TaskStatus_TASK_STATUS_CANCELLED {
			t.Errorf("slow: %v, want cancelled", st)
		}
	})
}

var timeoutSpec = testdataSpec("timeout.yaml")

// TestTaskTimeout: an attempt that outlives its timeout fails the task.
func TestTaskTimeout(t *testing.T) {
	forEachStore(t, func(t *testing.T, store storeKind) {
		tn := startNode(t, store)
		start := time.Now()
		in := run(t, tn, timeoutSpec, "")
		wantState(t, in, robonetv1.InstanceState_INSTANCE_STATE_FAILED)
		if took := time.Since(start); took > 20*time.Second {
			t.Errorf("the timeout took %s to fire", took)
		}
		h := task(t, in, "hang")
		if h.GetStatus() != robonetv1.TaskStatus_TASK_STATUS_FAILED || !strings.Contains(strings.ToLower(h.GetError()), "time") {
			t.Errorf("hang: %v error %q, want failed with a timeout", h.GetStatus(), h.GetError())
		}
	})
}

// The script starts a grandchild (sleep) and records both pids.
var cancelSpec = testdataSpec("cancel.yaml")

// TestCancelRunningWorkflow: cancelling a running instance ends it
// CANCELLED and kills its exec child and the child's own children.
func TestCancelRunningWorkflow(t *testing.T) {
	forEachStore(t, func(t *testing.T, store storeKind) {
		tn := startNode(t, store)
		pidfile := filepath.Join(t.TempDir(), "pids")
		id := submitSpec(t, tn.api, cancelSpec, fmt.Sprintf(`{"pidfile": %q}`, pidfile))

		var pids []int
		eventually(t, 30*time.Second, "the exec child to record its pids", func() bool {
			data, err := os.ReadFile(pidfile)
			if err != nil {
				return false
			}
			for _, f := range strings.Fields(string(data)) {
				pid, err := strconv.Atoi(f)
				if err != nil {
					t.Fatalf("pid file %q: %v", data, err)
				}
				pids = append(pids, pid)
			}
			return true
		})
		for _, pid := range pids {
			if !alive(pid) {
				t.Fatalf("process %d is not running before the cancellation", pid)
			}
		}

		if _, err := tn.api.CancelInstance(ctxFor(t, 10*time.Second), &robonetv1.CancelInstanceRequest{InstanceId: id}); err != nil {
			t.Fatalf("CancelInstance: %v", err)
		}
		in := waitDone(t, tn.api, id, 30*time.Second)
		wantState(t, in, robonetv1.InstanceState_INSTANCE_STATE_CANCELLED)
		if st := task(t, in, "long").GetStatus(); st != robonetv1.TaskStatus_TASK_STATUS_CANCELLED {
			t.Errorf("long: %v, want cancelled", st)
		}
		for _, pid := range pids {
			eventually(t, 15*time.Second, fmt.Sprintf("process %d to be killed", pid), func() bool { return !alive(pid) })
		}
	})
}

// alive reports whether pid runs (a zombie waiting for its parent to reap
// it counts as dead: it runs nothing).
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true // no /proc: trust kill(0)
	}
	// The state follows the parenthesised command name.
	s := string(stat)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}

var helloSpec = testdataSpec("hello.yaml")

// TestIdempotentResubmission: the same idempotency key returns the first
// instance and starts nothing new.
func TestIdempotentResubmission(t *testing.T) {
	forEachStore(t, func(t *testing.T, store storeKind) {
		tn := startNode(t, store)
		req := &robonetv1.SubmitWorkflowRequest{
			Workflow:       &robonetv1.SubmitWorkflowRequest_Spec{Spec: &robonetv1.InlineSpec{Source: []byte(helloSpec), Filename: "hello.yaml"}},
			InputsJson:     `{"name": "Ada"}`,
			IdempotencyKey: "nightly-2026-11-21",
		}
		first, err := tn.api.SubmitWorkflow(ctxFor(t, 10*time.Second), req)
		if err != nil {
			t.Fatal(err)
		}
		if first.GetExisting() {
			t.Fatal("the first submission says existing")
		}
		in := waitDone(t, tn.api, first.GetInstanceId(), 30*time.Second)
		wantOutputs(t, in, `{"greeting": "Hello, Ada!"}`)

		// Again, before and after the first finished: same instance.
		second, err := tn.api.SubmitWorkflow(ctxFor(t, 10*time.Second), req)
		if err != nil {
			t.Fatal(err)
		}
		if second.GetInstanceId() != first.GetInstanceId() || !second.GetExisting() {
			t.Fatalf("resubmission: instance %s existing=%v, want %s existing=true", second.GetInstanceId(), second.GetExisting(), first.GetInstanceId())
		}
		list, err := tn.api.ListInstances(ctxFor(t, 10*time.Second), &robonetv1.ListInstancesRequest{Workflow: "hello"})
		if err != nil {
			t.Fatal(err)
		}
		if n := len(list.GetInstances()); n != 1 {
			t.Fatalf("%d instances of hello, want 1", n)
		}
		// A different key starts a new one.
		req.IdempotencyKey = "nightly-2026-11-22"
		third, err := tn.api.SubmitWorkflow(ctxFor(t, 10*time.Second), req)
		if err != nil {
			t.Fatal(err)
		}
		if third.GetInstanceId() == first.GetInstanceId() || third.GetExisting() {
			t.Fatalf("a new key returned the old instance")
		}
		waitDone(t, tn.api, third.GetInstanceId(), 30*time.Second)
	})
}
