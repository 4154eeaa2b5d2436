package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"

	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// A Kind is one workflow of the workload, with what it must produce: the
// harness knows every instance's outputs and executions before it runs.
type Kind struct {
	// Name is the workflow's name.
	Name string
	// Spec is its YAML.
	Spec string
	// Inputs are the inputs of the instance of seed.
	Inputs func(seed int) map[string]any
	// Outputs are its expected outputs.
	Outputs func(seed int) map[string]any
	// Succeeds lists the executions that must each succeed exactly once;
	// Fails, those that must fail on each of their attempts (and how many
	// attempts they have), recording each attempt exactly once.
	Succeeds func(seed int) []string
	Fails    map[string]int
}

// chainSpec is ten echo tasks in a row on "core", each adding one.
func chainSpec() string {
	var b strings.Builder
	b.WriteString("name: chaos-chain\nversion: 1\ninputs: {seed: {type: int}}\ntasks:\n")
	b.WriteString("  t0: {capability: core, action: echo, with: {v: \"${{ inputs.seed }}\"}}\n")
	for i := 1; i < 10; i++ {
		fmt.Fprintf(&b, "  t%d: {needs: [t%d], capability: core, action: echo, with: {v: \"${{ tasks.t%d.output.v + 1 }}\"}}\n", i, i-1, i-1)
	}
	b.WriteString("outputs: {v: \"${{ tasks.t9.output.v }}\"}\n")
	return b.String()
}

// spreadWidth is how many executions one chaos-spread instance has.
const spreadWidth = 30

// Kinds are the workload's workflows: a chain (ordering across attempts
// and nodes), a wide spread (many attempts at once on "compute"), sleeps
// that report progress for seconds (long-running attempts that faults
// catch mid-run), and a task that fails its three attempts before its
// dependant runs (retries, and failures recorded once).
func Kinds() []Kind {
	seedOnly := func(seed int) map[string]any { return map[string]any{"seed": seed} }
	return []Kind{
		{
			Name:     "chaos-chain",
			Spec:     chainSpec(),
			Inputs:   seedOnly,
			Outputs:  func(seed int) map[string]any { return map[string]any{"v": seed + 9} },
			Succeeds: func(int) []string { return numbered("t%d", 10) },
		},
		{
			Name: "chaos-spread",
			Spec: `name: chaos-spread
version: 1
inputs: {seed: {type: int}}
tasks:
  fan:
    spread: ${{ lists.range(` + fmt.Sprint(spreadWidth) + `) }}
    capability: compute
    action: echo
    with: {x: "${{ item * inputs.seed }}"}
outputs: {xs: "${{ tasks.fan.output }}"}
`,
			Inputs: seedOnly,
			Outputs: func(seed int) map[string]any {
				xs := make([]any, spreadWidth)
				for i := range xs {
					xs[i] = map[string]any{"x": i * seed}
				}
				return map[string]any{"xs": xs}
			},
			Succeeds: func(int) []string { return numbered("fan[%d]", spreadWidth) },
		},
		{
			Name: "chaos-sleep",
			Spec: `name: chaos-sleep
version: 1
inputs: {seed: {type: int}}
tasks:
  nap:
    spread: ${{ lists.range(4) }}
    capability: core
    action: sleep
    with: {duration: 2s}
  sum:
    needs: [nap]
    capability: compute
    action: echo
    with: {n: "${{ size(tasks.nap.output) }}", seed: "${{ inputs.seed }}"}
outputs: {n: "${{ tasks.sum.output.n }}", seed: "${{ tasks.sum.output.seed }}"}
`,
			Inputs:   seedOnly,
			Outputs:  func(seed int) map[string]any { return map[string]any{"n": 4, "seed": seed} },
			Succeeds: func(int) []string { return []string{"nap[0]", "nap[1]", "nap[2]", "nap[3]", "sum"} },
		},
		{
			Name: "chaos-retry",
			Spec: `name: chaos-retry
version: 1
inputs: {seed: {type: int}}
tasks:
  probe:
    capability: core
    action: http
    with: {url: "http://127.0.0.1:1/", timeout: 2s}
    retry: {max_attempts: 3, backoff: {initial: 200ms}}
    on_failure: skip
  after:
    needs: [probe]
    capability: compute
    action: echo
    with: {seen: "${{ tasks.probe.output }}", seed: "${{ inputs.seed }}"}
outputs: {after: "${{ tasks.after.output }}"}
`,
			Inputs: seedOnly,
			Outputs: func(seed int) map[string]any {
				return map[string]any{"after": map[string]any{"seen": nil, "seed": seed}}
			},
			Succeeds: func(int) []string { return []string{"after"} },
			Fails:    map[string]int{"probe": 3},
		},
	}
}

// numbered is format applied to 0 … n-1: execution ids of a chain's or a
// spread's tasks.
func numbered(format string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf(format, i)
	}
	return out
}

// Submission is one workflow submission of the workload.
type Submission struct {
	Key      string    `json:"key"` // idempotency key
	Kind     string    `json:"kind"`
	Seed     int       `json:"seed"`
	At       time.Time `json:"at"`
	Acked    bool      `json:"acked"` // SubmitWorkflow answered with an instance
	Instance string    `json:"instance,omitempty"`
	Tries    int       `json:"tries"`
	Error    string    `json:"error,omitempty"` // why it was never acknowledged
}

// Workload submits instances of the kinds at a steady rate, each with its
// own idempotency key, retrying an unanswered submission with the same key
// (so it starts at most one instance) until it is acknowledged or gives up.
type Workload struct {
	Client *Client
	Kinds  []Kind
	// Rate is submissions per second.
	Rate float64
	// Prefix starts every idempotency key (one per run).
	Prefix string
	// GiveUp bounds how long one submission is retried.
	GiveUp time.Duration

	mu   sync.Mutex
	subs []*Submission
}

// Register registers every kind's workflow.
func (w *Workload) Register(ctx context.Context) error {
	for _, k := range w.Kinds {
		req := &robonetv1.RegisterWorkflowRequest{Spec: &robonetv1.InlineSpec{Source: []byte(k.Spec), Filename: k.Name + ".yaml"}}
		if err := w.Client.Retry(ctx, func(ctx context.Context, conn *grpc.ClientConn) error {
			_, err := robonetv1.NewWorkflowServiceClient(conn).RegisterWorkflow(ctx, req)
			return err
		}); err != nil {
			return fmt.Errorf("registering %s: %w", k.Name, err)
		}
	}
	return nil
}

// Run submits until ctx ends, then waits for the submissions in flight.
func (w *Workload) Run(ctx context.Context) {
	tick := time.NewTicker(time.Duration(float64(time.Second) / w.Rate))
	defer tick.Stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		k := w.Kinds[n%len(w.Kinds)]
		s := &Submission{Key: fmt.Sprintf("%s-%06d", w.Prefix, n), Kind: k.Name, Seed: 1 + rng.IntN(1000), At: time.Now()}
		w.mu.Lock()
		w.subs = append(w.subs, s)
		w.mu.Unlock()
		wg.Go(func() { w.submit(k, s) })
	}
}

// submit submits s until acknowledged or GiveUp passes; the retries use the
// same idempotency key, so at most one instance starts.
func (w *Workload) submit(k Kind, s *Submission) {
	ctx, cancel := context.WithTimeout(context.Background(), w.GiveUp)
	defer cancel()
	in, _ := json.Marshal(k.Inputs(s.Seed))
	req := &robonetv1.SubmitWorkflowRequest{
		Workflow:       &robonetv1.SubmitWorkflowRequest_Ref{Ref: &robonetv1.WorkflowRef{Name: k.Name}},
		InputsJson:     string(in),
		IdempotencyKey: s.Key,
	}
	var id string
	tries := 0
	err := w.Client.Retry(ctx, func(ctx context.Context, conn *grpc.ClientConn) error {
		tries++
		r, err := robonetv1.NewWorkflowServiceClient(conn).SubmitWorkflow(ctx, req)
		id = r.GetInstanceId()
		return err
	})
	w.mu.Lock()
	defer w.mu.Unlock()
	s.Tries = tries
	if err != nil {
		s.Error = err.Error()
		return
	}
	s.Acked, s.Instance = true, id
}

// Submissions returns a copy of every submission so far.
func (w *Workload) Submissions() []Submission {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]Submission, len(w.subs))
	for i, s := range w.subs {
		out[i] = *s
	}
	return out
}

// taskOf is the task of an execution id ("fan[3]" → "fan").
func taskOf(execution string) string {
	if i := strings.IndexByte(execution, '['); i >= 0 {
		return execution[:i]
	}
	return execution
}
