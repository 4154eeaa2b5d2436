package spec_test

import (
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/robonet/robonet/engine/spec"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// wait: lands in the IR as Task.wait, with no capability, action or
// timeout of its own (defaults.timeout does not apply); needs, when,
// on_failure and retry are the task's as usual.
func TestWaitLandsInIR(t *testing.T) {
	wf := mustCompile(t, "name: v\nversion: 1\ninputs: {at: {type: string}}\n"+
		"defaults: {timeout: 5m, retry: {max_attempts: 2}}\ntasks:\n"+
		"  plan: {capability: core, action: echo}\n"+
		"  approve:\n    needs: [plan]\n    when: ${{ tasks.plan.output != null }}\n    wait: {signal: approve, timeout: 48h}\n    on_failure: skip\n"+
		"  forever:\n    wait: {signal: order.paid_v-2}\n    description: no timeout\n"+
		"  cool_down:\n    needs: approve\n    wait: {for: 10m}\n    retry: {max_attempts: 3}\n"+
		"  at:\n    wait: {until: '${{ inputs.at }}'}\n"+
		"  fixed:\n    wait: {until: '2030-01-02T03:04:05.5+02:00'}\n"+
		"  plain_ts:\n    wait: {until: 2030-01-02T01:04:05Z}\n")
	approve := task(t, wf, "approve")
	assertProto(t, "approve.wait", approve.GetWait(), &robonetv1.Wait{Signal: "approve", Timeout: durationpb.New(48 * time.Hour)})
	if approve.GetCapability() != "" || approve.GetAction() != "" || approve.GetTimeout() != nil || approve.GetWith() != nil {
		t.Fatalf("approve runs something: %v", approve)
	}
	if approve.GetOnFailure() != robonetv1.FailurePolicy_FAILURE_POLICY_SKIP || approve.GetRetry().GetMaxAttempts() != 2 ||
		approve.GetWhen() == nil || len(approve.GetNeeds()) != 1 {
		t.Fatalf("approve lost its policy, guard or needs: %v", approve)
	}
	assertProto(t, "forever.wait", task(t, wf, "forever").GetWait(), &robonetv1.Wait{Signal: "order.paid_v-2"})
	cool := task(t, wf, "cool_down")
	assertProto(t, "cool_down.wait", cool.GetWait(), &robonetv1.Wait{Duration: durationpb.New(10 * time.Minute)})
	if cool.GetRetry().GetMaxAttempts() != 3 || cool.GetTimeout() != nil {
		t.Fatalf("cool_down: %v", cool)
	}
	assertProto(t, "at.wait", task(t, wf, "at").GetWait(), &robonetv1.Wait{
		Until: &robonetv1.Expr{Source: "inputs.at"}, UntilText: "${{ inputs.at }}"})
	// A literal is checked and stored in UTC, so the same time written in
	// another zone is the same IR.
	assertProto(t, "fixed.wait", task(t, wf, "fixed").GetWait(), &robonetv1.Wait{UntilText: "2030-01-02T01:04:05.5Z"})
	assertProto(t, "plain_ts.wait", task(t, wf, "plain_ts").GetWait(), &robonetv1.Wait{UntilText: "2030-01-02T01:04:05Z"})
	if task(t, wf, "plan").GetWait() != nil || task(t, wf, "plan").GetTimeout() == nil {
		t.Fatal("a task without wait has one, or lost its default timeout")
	}
}

// until may read upstream outputs (an expression of type dyn) and a task
// may need a wait task and read its output (the signal's payload).
func TestWaitReadsAndIsRead(t *testing.T) {
	wf := mustCompile(t, "name: v\nversion: 1\ntasks:\n"+
		"  plan: {capability: core, action: echo}\n"+
		"  hold:\n    needs: plan\n    wait: {until: '${{ tasks.plan.output.at }}'}\n"+
		"  approve:\n    needs: hold\n    wait: {signal: approve}\n"+
		"  apply:\n    needs: approve\n    capability: core\n    action: echo\n    with: ${{ tasks.approve.output.comment }}\n")
	if task(t, wf, "hold").GetWait().GetUntil().GetSource() != "tasks.plan.output.at" {
		t.Fatalf("hold: %v", task(t, wf, "hold"))
	}
}

// trigger: lands in the IR sorted and de-duplicated; the workflow declares
// the event input.
func TestTriggerLandsInIR(t *testing.T) {
	wf := mustCompile(t, "name: on-order\nversion: 1\ninputs:\n  event: {type: map}\n  region: {type: string, default: eu}\n  note: {required: false}\n"+
		"trigger: {events: [order.created, invoice.paid, order.created]}\n"+
		"tasks: {a: {capability: core, action: echo, with: '${{ inputs.event }}'}}\n")
	assertProto(t, "trigger", wf.GetTrigger(), &robonetv1.Trigger{Events: []string{"invoice.paid", "order.created"}})
	if mustCompile(t, "name: x\nversion: 1\ntasks: {a: {capability: core, action: echo}}\n").GetTrigger() != nil {
		t.Fatal("a workflow without trigger has one")
	}
	other := mustCompile(t, "name: on-order\nversion: 1\ninputs: {event: {}}\ntrigger: {events: [a]}\ntasks: {a: {capability: core, action: echo}}\n")
	same := mustCompile(t, "name: on-order\nversion: 1\ninputs: {event: {}}\ntrigger: {events: [b]}\ntasks: {a: {capability: core, action: echo}}\n")
	if spec.Hash(other) == spec.Hash(same) {
		t.Fatal("triggers on different events hash the same")
	}
}

// The wait's kind, signal and duration are part of the IR's identity.
func TestWaitHash(t *testing.T) {
	const base = "name: h\nversion: 1\ntasks:\n  w: {wait: {signal: approve, timeout: 1h}}\n"
	h := spec.Hash(mustCompile(t, base))
	for _, other := range []string{
		"name: h\nversion: 1\ntasks:\n  w: {wait: {signal: approve}}\n",
		"name: h\nversion: 1\ntasks:\n  w: {wait: {signal: reject, timeout: 1h}}\n",
		"name: h\nversion: 1\ntasks:\n  w: {wait: {for: 1h}}\n",
		"name: h\nversion: 1\ntasks:\n  w: {wait: {until: 2030-01-01T00:00:00Z}}\n",
	} {
		if spec.Hash(mustCompile(t, other)) == h {
			t.Errorf("%q hashes as %q", other, base)
		}
	}
	if spec.Hash(mustCompile(t, "name: h\nversion: 1\ntasks:\n  w:\n    wait:\n      timeout: 1h\n      signal: approve\n")) != h {
		t.Error("the same wait written otherwise hashes differently")
	}
}
