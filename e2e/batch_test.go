package e2e_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// TestSubmitWorkflowsBatch: one call starts an instance per item, in order,
// with each item's inputs; keys work per item (within the call and across
// calls); an invalid item fails the whole call naming it, with nothing
// queued; too many items are refused.
func TestSubmitWorkflowsBatch(t *testing.T) {
	forEachStore(t, func(t *testing.T, store storeKind) {
		tn := startNode(t, store)
		ctx := ctxFor(t, 60*time.Second)
		hello := &robonetv1.SubmitWorkflowsRequest_Spec{Spec: &robonetv1.InlineSpec{Source: []byte(helloSpec), Filename: "hello.yaml"}}

		// Bad items first, so the count at the end shows they left nothing.
		_, err := tn.api.SubmitWorkflows(ctx, &robonetv1.SubmitWorkflowsRequest{Workflow: hello, Items: []*robonetv1.SubmitItem{
			{InputsJson: `{"name": "ok"}`}, {InputsJson: `{"name": 7}`},
		}})
		wantStatus(t, err, codes.InvalidArgument, "item 1")
		_, err = tn.api.SubmitWorkflows(ctx, &robonetv1.SubmitWorkflowsRequest{Workflow: hello, Items: []*robonetv1.SubmitItem{
			{InputsJson: `{}`}, {InputsJson: `{}`}, {InputsJson: `{"name": `},
		}})
		wantStatus(t, err, codes.InvalidArgument, "items[2].inputs_json")
		many := make([]*robonetv1.SubmitItem, 1001)
		for i := range many {
			many[i] = &robonetv1.SubmitItem{}
		}
		_, err = tn.api.SubmitWorkflows(ctx, &robonetv1.SubmitWorkflowsRequest{Workflow: hello, Items: many})
		wantStatus(t, err, codes.ResourceExhausted, "at most 1000")
		_, err = tn.api.SubmitWorkflows(ctx, &robonetv1.SubmitWorkflowsRequest{Workflow: hello})
		wantStatus(t, err, codes.InvalidArgument, "at least one item")
		wfs, err := tn.api.ListWorkflows(ctx, &robonetv1.ListWorkflowsRequest{})
		if err != nil || len(wfs.GetWorkflows()) != 0 {
			t.Fatalf("refused batches registered %v (%v): an inline spec is registered only with a batch that is queued", wfs.GetWorkflows(), err)
		}

		names := []string{"Ada", "Grace", "Edsger", "Barbara"}
		items := make([]*robonetv1.SubmitItem, 0, len(names)+1)
		for _, n := range names {
			items = append(items, &robonetv1.SubmitItem{InputsJson: fmt.Sprintf(`{"name": %q}`, n), IdempotencyKey: "batch-" + n})
		}
		// The same key again within the call: the first item's instance.
		items = append(items, &robonetv1.SubmitItem{InputsJson: `{"name": "someone else"}`, IdempotencyKey: "batch-Ada"})
		resp, err := tn.api.SubmitWorkflows(ctx, &robonetv1.SubmitWorkflowsRequest{Workflow: hello, Items: items})
		if err != nil {
			t.Fatal(err)
		}
		got := resp.GetInstances()
		if len(got) != len(items) || resp.GetWorkflow().GetName() != "hello" {
			t.Fatalf("%d instances of %q for %d items", len(got), resp.GetWorkflow().GetName(), len(items))
		}
		if got[4].GetInstanceId() != got[0].GetInstanceId() || !got[4].GetExisting() || got[0].GetExisting() {
			t.Fatalf("a key repeated within the call: %v and %v, want the first instance, existing", got[0], got[4])
		}
		for i, n := range names {
			in := waitDone(t, tn.api, got[i].GetInstanceId(), 30*time.Second)
			wantOutputs(t, in, fmt.Sprintf(`{"greeting": "Hello, %s!"}`, n))
		}

		// Across calls, by a registered reference this time.
		again, err := tn.api.SubmitWorkflows(ctx, &robonetv1.SubmitWorkflowsRequest{
			Workflow: &robonetv1.SubmitWorkflowsRequest_Ref{Ref: &robonetv1.WorkflowRef{Name: "hello"}},
			Items:    []*robonetv1.SubmitItem{{IdempotencyKey: "batch-Grace"}, {}},
		})
		if err != nil {
			t.Fatal(err)
		}
		if g := again.GetInstances(); g[0].GetInstanceId() != got[1].GetInstanceId() || !g[0].GetExisting() || g[1].GetExisting() {
			t.Fatalf("a second call: %v, want %s existing and a new one", g, got[1].GetInstanceId())
		}
		waitDone(t, tn.api, again.GetInstances()[1].GetInstanceId(), 30*time.Second)

		list, err := tn.api.ListInstances(ctx, &robonetv1.ListInstancesRequest{Workflow: "hello"})
		if err != nil {
			t.Fatal(err)
		}
		if n := len(list.GetInstances()); n != len(names)+1 {
			t.Fatalf("%d instances of hello, want %d (the refused calls queued nothing)", n, len(names)+1)
		}

		// A key of another workflow's instance fails the whole call: the
		// item before it is not queued either.
		_, err = tn.api.SubmitWorkflows(ctx, &robonetv1.SubmitWorkflowsRequest{
			Workflow: &robonetv1.SubmitWorkflowsRequest_Spec{Spec: &robonetv1.InlineSpec{Source: []byte(emptySpreadSpec), Filename: "e.yaml"}},
			Items:    []*robonetv1.SubmitItem{{IdempotencyKey: "fresh"}, {IdempotencyKey: "batch-Ada"}},
		})
		wantStatus(t, err, codes.AlreadyExists, "batch-Ada")
		list, err = tn.api.ListInstances(ctx, &robonetv1.ListInstancesRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if n := len(list.GetInstances()); n != len(names)+1 {
			t.Fatalf("%d instances, want %d: a refused batch queued part of itself", n, len(names)+1)
		}
	})
}

// wantStatus fails t unless err is a status with code whose message
// contains msg.
func wantStatus(t *testing.T, err error, code codes.Code, msg string) {
	t.Helper()
	st, _ := status.FromError(err)
	if st.Code() != code || !strings.Contains(st.Message(), msg) {
		t.Fatalf("got %v, want %s with %q", err, code, msg)
	}
}
