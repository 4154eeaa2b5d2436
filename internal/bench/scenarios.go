package bench

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// The workflows the scenarios run: echo tasks only, so what is measured is
// roboNet (submission, readiness, dispatch, results, storage), not the
// tasks.
const spreadSpec = `
name: bench-spread
version: 1
inputs:
  width: {type: int}
tasks:
  s:
    spread: ${{ lists.range(inputs.width) }}
    capability: core
    action: echo
    with: {i: "${{ item }}"}
outputs:
  n: ${{ size(tasks.s.output) }}
`

const oneSpec = `
name: bench-one
version: 1
tasks:
  t: {capability: core, action: echo, with: {v: 1}}
`

// chainSpec is a 10-task chain, each task adding one to its predecessor.
var chainSpec = func() string {
	var b strings.Builder
	b.WriteString("name: bench-chain\nversion: 1\ntasks:\n  t0: {capability: core, action: echo, with: {v: 0}}\n")
	for i := 1; i < 10; i++ {
		fmt.Fprintf(&b, "  t%d: {needs: [t%d], capability: core, action: echo, with: {v: \"${{ tasks.t%d.output.v + 1 }}\"}}\n", i, i-1, i-1)
	}
	b.WriteString("outputs:\n  v: ${{ tasks.t9.output.v }}\n")
	return b.String()
}()

// diamondTasks is the size of diamondSpec: five stages of one task fanning
// out to eight that join into the next stage's head, and a last join.
const diamondTasks = 5*9 + 1

var diamondSpec = func() string {
	var b strings.Builder
	b.WriteString("name: bench-diamond\nversion: 1\ntasks:\n")
	prev := []string{}
	for s := range 5 {
		head := fmt.Sprintf("h%d", s)
		fmt.Fprintf(&b, "  %s: {capability: core, action: echo, with: {s: %d}", head, s)
		if len(prev) > 0 {
			fmt.Fprintf(&b, ", needs: [%s]", strings.Join(prev, ", "))
		}
		b.WriteString("}\n")
		prev = prev[:0]
		for j := range 8 {
			name := fmt.Sprintf("b%d_%d", s, j)
			fmt.Fprintf(&b, "  %s: {needs: [%s], capability: core, action: echo, with: {j: %d}}\n", name, head, j)
			prev = append(prev, name)
		}
	}
	fmt.Fprintf(&b, "  end: {needs: [%s], capability: core, action: echo, with: {done: true}}\n", strings.Join(prev, ", "))
	return b.String()
}()

// register registers the workflows and runs one instance of each to the
// end, so that every node (and a mesh's Waggler) is in place and warm
// before the clock starts.
func (t *target) register(ctx context.Context, cfg *Config) error {
	for _, s := range []struct{ src, inputs string }{
		{spreadSpec, `{"width": 10}`}, {oneSpec, ""}, {chainSpec, ""}, {diamondSpec, ""},
	} {
		resp, err := t.api.SubmitWorkflow(ctx, &robonetv1.SubmitWorkflowRequest{
			Workflow:   &robonetv1.SubmitWorkflowRequest_Spec{Spec: &robonetv1.InlineSpec{Source: []byte(s.src)}},
			InputsJson: s.inputs,
		})
		if err != nil {
			return fmt.Errorf("registering a workflow: %w", err)
		}
		if err := t.waitComplete(ctx, []string{resp.GetInstanceId()}, time.Minute); err != nil {
			return fmt.Errorf("warm-up: %w", err)
		}
	}
	return nil
}

// runSpread submits one instance of a width-wide spread and times it to
// COMPLETE.
func runSpread(ctx context.Context, t *target, width int) (Result, error) {
	start := time.Now()
	resp, err := t.api.SubmitWorkflow(ctx, &robonetv1.SubmitWorkflowRequest{
		Workflow:   &robonetv1.SubmitWorkflowRequest_Ref{Ref: &robonetv1.WorkflowRef{Name: "bench-spread"}},
		InputsJson: fmt.Sprintf(`{"width": %d}`, width),
	})
	if err != nil {
		return Result{}, err
	}
	acked := time.Since(start)
	if err := t.waitComplete(ctx, []string{resp.GetInstanceId()}, 30*time.Minute); err != nil {
		return Result{}, err
	}
	took := time.Since(start)
	return Result{Instances: 1, Tasks: width, Seconds: took.Seconds(), TasksPerS: float64(width) / took.Seconds(),
		SubmitsPerS: 1 / acked.Seconds()}, nil
}

// runMany submits n instances of workflow (tasks each) from clients
// concurrent clients, batch instances a call (1: SubmitWorkflow, more:
// SubmitWorkflows), and times them to COMPLETE.
func runMany(ctx context.Context, t *target, workflow string, tasks, n, clients, batch int) (Result, error) {
	start := time.Now()
	ids, err := submitInstances(ctx, t, workflow, n, clients, batch)
	if err != nil {
		return Result{}, err
	}
	submitted := time.Since(start)
	if err := t.waitComplete(ctx, ids, 30*time.Minute); err != nil {
		return Result{}, err
	}
	took := time.Since(start)
	return Result{Instances: n, Tasks: n * tasks, Seconds: took.Seconds(), TasksPerS: float64(n*tasks) / took.Seconds(),
		SubmitsPerS: float64(n) / submitted.Seconds()}, nil
}

// submitInstances submits n instances of workflow, without inputs, from
// clients concurrent clients, batch a call (1: SubmitWorkflow, more:
// SubmitWorkflows), and returns their ids.
func submitInstances(ctx context.Context, t *target, workflow string, n, clients, batch int) ([]string, error) {
	ref := &robonetv1.WorkflowRef{Name: workflow}
	calls := make(chan int) // the size of each call
	go func() {
		defer close(calls)
		for left := n; left > 0; left -= batch {
			select {
			case calls <- min(left, batch):
			case <-ctx.Done():
				return
			}
		}
	}()
	var (
		mu  sync.Mutex
		ids = make([]string, 0, n)
	)
	g, gctx := errgroup.WithContext(ctx)
	for range clients {
		g.Go(func() error {
			for size := range calls {
				var got []string
				if batch == 1 {
					resp, err := t.api.SubmitWorkflow(gctx, &robonetv1.SubmitWorkflowRequest{Workflow: &robonetv1.SubmitWorkflowRequest_Ref{Ref: ref}})
					if err != nil {
						return fmt.Errorf("submit: %w", err)
					}
					got = []string{resp.GetInstanceId()}
				} else {
					items := make([]*robonetv1.SubmitItem, size)
					for i := range items {
						items[i] = &robonetv1.SubmitItem{}
					}
					resp, err := t.api.SubmitWorkflows(gctx, &robonetv1.SubmitWorkflowsRequest{
						Workflow: &robonetv1.SubmitWorkflowsRequest_Ref{Ref: ref}, Items: items,
					})
					if err != nil {
						return fmt.Errorf("submit a batch: %w", err)
					}
					for _, in := range resp.GetInstances() {
						got = append(got, in.GetInstanceId())
					}
				}
				mu.Lock()
				ids = append(ids, got...)
				mu.Unlock()
			}
			return nil
		})
	}
	return ids, g.Wait()
}

// runLatency submits one-task instances at rate a second for d, open
// loop (each on time, whether or not earlier ones were answered), and
// measures each acknowledgement, the first dispatch after it and the
// time from the task's start to the instance's completion.
func runLatency(ctx context.Context, t *target, rate int, d time.Duration) (Result, error) {
	ref := &robonetv1.SubmitWorkflowRequest_Ref{Ref: &robonetv1.WorkflowRef{Name: "bench-one"}}
	type sent struct {
		id    string
		acked time.Time
		took  time.Duration
	}
	n := max(1, int(float64(rate)*d.Seconds()))
	out := make([]sent, n)
	var g errgroup.Group
	interval := time.Second / time.Duration(rate)
	start := time.Now()
	for i := range n {
		if wait := time.Until(start.Add(time.Duration(i) * interval)); wait > 0 {
			time.Sleep(wait)
		}
		g.Go(func() error {
			t0 := time.Now()
			resp, err := t.api.SubmitWorkflow(ctx, &robonetv1.SubmitWorkflowRequest{Workflow: ref})
			if err != nil {
				return fmt.Errorf("submit: %w", err)
			}
			now := time.Now()
			out[i] = sent{id: resp.GetInstanceId(), acked: now, took: now.Sub(t0)}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return Result{}, err
	}
	submitted := time.Since(start)
	ids := make([]string, n)
	for i, s := range out {
		ids[i] = s.id
	}
	if err := t.waitComplete(ctx, ids, 10*time.Minute); err != nil {
		return Result{}, err
	}
	took := time.Since(start)
	var submit, dispatch, record []time.Duration
	for _, s := range out {
		submit = append(submit, s.took)
		resp, err := t.api.GetInstance(ctx, &robonetv1.GetInstanceRequest{InstanceId: s.id})
		if err != nil {
			return Result{}, err
		}
		in := resp.GetInstance()
		for _, task := range in.GetTasks() {
			for _, a := range task.GetAttempts() {
				if a.GetStartedAt() != nil {
					started := a.GetStartedAt().AsTime()
					// Within a millisecond the node may dispatch before the
					// client sees its answer: that counts as no wait.
					dispatch = append(dispatch, max(0, started.Sub(s.acked)))
					if in.GetFinishedAt() != nil {
						record = append(record, max(0, in.GetFinishedAt().AsTime().Sub(started)))
					}
				}
				break // the first attempt
			}
		}
	}
	return Result{Instances: n, Tasks: n, Seconds: took.Seconds(), TasksPerS: float64(n) / took.Seconds(),
		SubmitsPerS: float64(n) / submitted.Seconds(), Rate: rate,
		Submit: percentiles(submit), Dispatch: percentiles(dispatch), Record: percentiles(record)}, nil
}

// waitComplete waits until no instance is pending, running or gathering
// (one indexed row polled, so polling costs the nodes little while they
// are measured), then checks that each of ids is COMPLETE.
func (t *target) waitComplete(ctx context.Context, ids []string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	unfinished := []robonetv1.InstanceState{robonetv1.InstanceState_INSTANCE_STATE_PENDING,
		robonetv1.InstanceState_INSTANCE_STATE_RUNNING, robonetv1.InstanceState_INSTANCE_STATE_GATHERING}
	for {
		resp, err := t.api.ListInstances(ctx, &robonetv1.ListInstancesRequest{States: unfinished, PageSize: 1})
		if err != nil {
			return fmt.Errorf("listing unfinished instances: %w", err)
		}
		if len(resp.GetInstances()) == 0 {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("instances still unfinished after %s (e.g. %s)", limit, resp.GetInstances()[0].GetId())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(cmp.Or(t.poll, 5*time.Millisecond)):
		}
	}
	want := make(map[string]bool, len(ids))
	for _, id := range ids {
		want[id] = true
	}
	complete, token := 0, ""
	for {
		resp, err := t.api.ListInstances(ctx, &robonetv1.ListInstancesRequest{
			States: []robonetv1.InstanceState{robonetv1.InstanceState_INSTANCE_STATE_COMPLETE}, PageSize: 1000, PageToken: token,
		})
		if err != nil {
			return fmt.Errorf("listing complete instances: %w", err)
		}
		for _, in := range resp.GetInstances() {
			if want[in.GetId()] {
				complete++
				delete(want, in.GetId())
			}
		}
		if token = resp.GetNextPageToken(); token == "" {
			break
		}
	}
	if complete != len(ids) {
		var why []string
		for id := range want {
			if len(why) == 3 {
				break
			}
			got, err := t.api.GetInstance(ctx, &robonetv1.GetInstanceRequest{InstanceId: id})
			if err != nil {
				why = append(why, fmt.Sprintf("%s: %v", id, err))
				continue
			}
			why = append(why, fmt.Sprintf("%s %s: %s", id, got.GetInstance().GetState(), got.GetInstance().GetError()))
		}
		return fmt.Errorf("%d of %d instances COMPLETE: the others failed or were cancelled (the node's log says why), e.g. %s",
			complete, len(ids), strings.Join(why, "; "))
	}
	return nil
}
