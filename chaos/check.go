package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc"

	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// Row is one attempt's result as the engine recorded it
// (runner_actions_done).
type Row struct {
	Instance   string
	Key        string // the instance's idempotency key
	Execution  string
	Attempt    uint32
	OK         bool
	Worker     string
	RecordedAt time.Time
}

// Final is what the API says of an acknowledged instance at the end.
type Final struct {
	State   robonetv1.InstanceState
	Outputs string // canonical JSON object
	Error   string
	Missing bool // NOT_FOUND
	// Unanswered: the API gave no answer about it before the drain ended.
	Unanswered bool
}

// Verdict is the checker's result: every count but Indeterminate must be 0.
type Verdict struct {
	Submitted    int `json:"submitted"`
	Acknowledged int `json:"acknowledged"`
	// Indeterminate submissions were never acknowledged: each may or may
	// not have started an instance (at most one: the idempotency key).
	Indeterminate int `json:"indeterminate"`
	Completed     int `json:"completed"`
	// Lost: acknowledged but never completed (missing, failed or
	// cancelled), or an execution that should have succeeded with no
	// success recorded.
	Lost int `json:"lost"`
	// Duplicated: an attempt recorded more than once, or an execution
	// recorded successful more than once.
	Duplicated int `json:"duplicated"`
	// Wrong: completed with other outputs than its workflow defines.
	Wrong int `json:"wrong"`
	// Stuck: not finished when the checker gave up waiting.
	Stuck int `json:"stuck"`
	// Unexpected: instances nobody submitted, or executions recorded that
	// the workflow does not have.
	Unexpected int `json:"unexpected"`
	// Executions is how many executions were checked against the database.
	Executions int `json:"executions_checked"`
	// Unchecked, when set, says why the database's record could not be
	// read: the counts then rest on the API alone and the run fails.
	Unchecked string `json:"unchecked,omitempty"`
	// Problems describes the first problems found.
	Problems []string `json:"problems,omitempty"`
}

// Passed reports whether nothing was lost, duplicated, wrong, stuck or
// unexpected.
func (v Verdict) Passed() bool {
	return v.Lost+v.Duplicated+v.Wrong+v.Stuck+v.Unexpected == 0 && v.Unchecked == ""
}

const maxProblems = 50

func (v *Verdict) problem(count *int, format string, args ...any) {
	*count++
	if len(v.Problems) < maxProblems {
		v.Problems = append(v.Problems, fmt.Sprintf(format, args...))
	}
}

// Judge compares what was submitted with what the API and the database
// say. It is pure: the Checker gathers its inputs.
//
// When the database could not be read (rows and instanceKeys nil,
// unchecked saying why), only the API's view is judged.
func Judge(kinds []Kind, subs []Submission, finals map[string]Final, rows []Row, instanceKeys map[string]string, prefix, unchecked string) Verdict {
	byName := map[string]Kind{}
	for _, k := range kinds {
		byName[k.Name] = k
	}
	v := Verdict{Submitted: len(subs), Unchecked: unchecked}
	// Attempts recorded twice, anywhere.
	type attemptKey struct {
		instance, execution string
		attempt             uint32
	}
	seen := map[attemptKey]int{}
	byInstance := map[string][]Row{}
	for _, r := range rows {
		k := attemptKey{r.Instance, r.Execution, r.Attempt}
		if seen[k]++; seen[k] == 2 {
			v.problem(&v.Duplicated, "instance %s: %s attempt %d recorded more than once", r.Instance, r.Execution, r.Attempt)
		}
		byInstance[r.Instance] = append(byInstance[r.Instance], r)
	}
	acked := map[string]bool{}
	keys := map[string]string{} // key → its acknowledged instance ("": none)
	for _, s := range subs {
		keys[s.Key] = s.Instance
		if !s.Acked {
			v.Indeterminate++
			continue
		}
		v.Acknowledged++
		acked[s.Instance] = true
		k := byName[s.Kind]
		f, ok := finals[s.Instance]
		switch {
		case ok && f.Unanswered:
			v.problem(&v.Stuck, "%s (%s): no answer from the API before the drain ended", s.Instance, s.Kind)
			continue
		case !ok || f.Missing:
			v.problem(&v.Lost, "%s (%s, key %s): acknowledged, not found", s.Instance, s.Kind, s.Key)
			continue
		case f.State == robonetv1.InstanceState_INSTANCE_STATE_COMPLETE:
		case f.State == robonetv1.InstanceState_INSTANCE_STATE_FAILED || f.State == robonetv1.InstanceState_INSTANCE_STATE_CANCELLED:
			v.problem(&v.Lost, "%s (%s): %s: %s", s.Instance, s.Kind, f.State, f.Error)
			continue
		default:
			v.problem(&v.Stuck, "%s (%s): still %s", s.Instance, s.Kind, f.State)
			continue
		}
		v.Completed++
		if !sameJSON(f.Outputs, k.Outputs(s.Seed)) {
			want, _ := json.Marshal(k.Outputs(s.Seed))
			v.problem(&v.Wrong, "%s (%s, seed %d): outputs %s, want %s", s.Instance, s.Kind, s.Seed, f.Outputs, want)
		}
		if unchecked == "" {
			v.checkExecutions(s, k, byInstance[s.Instance])
		}
	}
	for id, key := range instanceKeys {
		ackedAs, ours := keys[key]
		switch {
		case acked[id]:
		case !strings.HasPrefix(key, prefix) || !ours:
			v.problem(&v.Unexpected, "instance %s (key %q) was not submitted by this run", id, key)
		case ackedAs != "":
			v.problem(&v.Duplicated, "instance %s has the idempotency key %q of instance %s", id, key, ackedAs)
		}
	}
	return v
}

// checkExecutions checks one completed instance's recorded attempts: each
// execution that must succeed did so exactly once; each that must fail
// failed on each of its attempts; nothing else ran.
func (v *Verdict) checkExecutions(s Submission, k Kind, rows []Row) {
	oks := map[string]int{}
	fails := map[string][]uint32{}
	for _, r := range rows {
		if r.OK {
			oks[r.Execution]++
		} else {
			fails[r.Execution] = append(fails[r.Execution], r.Attempt)
		}
	}
	want := map[string]bool{}
	for _, e := range k.Succeeds(s.Seed) {
		want[e] = true
		v.Executions++
		switch n := oks[e]; {
		case n == 0:
			v.problem(&v.Lost, "%s (%s): execution %s has no success recorded", s.Instance, s.Kind, e)
		case n > 1:
			v.problem(&v.Duplicated, "%s (%s): execution %s recorded successful %d times", s.Instance, s.Kind, e, n)
		}
	}
	for e, attempts := range k.Fails {
		want[e] = true
		v.Executions++
		got := slices.Clone(fails[e])
		slices.Sort(got)
		got = slices.Compact(got)
		if oks[e] > 0 || len(got) != attempts {
			v.problem(&v.Lost, "%s (%s): execution %s recorded attempts %v (successes %d), want %d failed", s.Instance, s.Kind, e, fails[e], oks[e], attempts)
		}
	}
	for e := range oks {
		if !want[e] {
			v.problem(&v.Unexpected, "%s (%s): execution %s recorded, not in the workflow", s.Instance, s.Kind, e)
		}
	}
}

// sameJSON reports whether the JSON text got equals want once both are
// decoded (numbers compare as float64).
func sameJSON(got string, want any) bool {
	var a, b any
	if err := json.Unmarshal([]byte(got), &a); err != nil {
		return false
	}
	wb, err := json.Marshal(want)
	if err != nil || json.Unmarshal(wb, &b) != nil {
		return false
	}
	return reflect.DeepEqual(a, b)
}

// Checker gathers what Judge needs: the API's view of every acknowledged
// instance and the database's rows.
type Checker struct {
	Client *Client
	DSN    string
}

// Drain waits until every acknowledged instance is terminal, or until
// deadline; it returns each one's final view.
func (c *Checker) Drain(ctx context.Context, subs []Submission, deadline time.Duration, progress func(pending int)) map[string]Final {
	finals := map[string]Final{}
	ctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	for {
		pending := 0
		for _, s := range subs {
			if !s.Acked {
				continue
			}
			if f, ok := finals[s.Instance]; ok && (f.Missing || terminal(f.State)) {
				continue
			}
			var in *robonetv1.Instance
			err := c.Client.Call(ctx, func(ctx context.Context, conn *grpc.ClientConn) error {
				r, err := robonetv1.NewWorkflowServiceClient(conn).GetInstance(ctx, &robonetv1.GetInstanceRequest{InstanceId: s.Instance})
				in = r.GetInstance()
				return err
			})
			switch {
			case err == nil:
				finals[s.Instance] = Final{State: in.GetState(), Outputs: in.GetOutputsJson(), Error: in.GetError()}
				if !terminal(in.GetState()) {
					pending++
				}
			case !retryable(err):
				finals[s.Instance] = Final{Missing: true, Error: err.Error()}
			default:
				pending++
			}
		}
		if progress != nil {
			progress(pending)
		}
		if pending == 0 || ctx.Err() != nil {
			for _, s := range subs {
				if _, seen := finals[s.Instance]; s.Acked && !seen {
					finals[s.Instance] = Final{Unanswered: true}
				}
			}
			return finals
		}
		select {
		case <-ctx.Done():
		case <-time.After(2 * time.Second):
		}
	}
}

func terminal(s robonetv1.InstanceState) bool {
	switch s {
	case robonetv1.InstanceState_INSTANCE_STATE_COMPLETE, robonetv1.InstanceState_INSTANCE_STATE_FAILED, robonetv1.InstanceState_INSTANCE_STATE_CANCELLED:
		return true
	}
	return false
}

// RowsWait bounds how long Rows keeps trying to read the database (it may
// be failing over when the run ends).
const RowsWait = 2 * time.Minute

// Rows reads every recorded attempt and every instance's idempotency key,
// through the multi-host DSN (whichever host is the primary), trying again
// for up to RowsWait.
func (c *Checker) Rows(ctx context.Context) (rows []Row, instanceKeys map[string]string, err error) {
	deadline := time.Now().Add(RowsWait)
	for {
		rows, instanceKeys, err = c.readRows(ctx)
		if err == nil || ctx.Err() != nil || time.Now().After(deadline) {
			return rows, instanceKeys, err
		}
		select {
		case <-ctx.Done():
		case <-time.After(2 * time.Second):
		}
	}
}

func (c *Checker) readRows(ctx context.Context) (rows []Row, instanceKeys map[string]string, err error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.DSN)
	if err != nil {
		return nil, nil, fmt.Errorf("connecting to the mesh's Postgres: %w", err)
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	r, err := conn.Query(ctx, `SELECT d.instance_id::text, coalesce(i.idempotency_key, ''), d.execution_id, d.attempt, d.ok, d.worker_id, d.recorded_at
		FROM runner_actions_done d JOIN runner_instances i USING (instance_id)`)
	if err != nil {
		return nil, nil, err
	}
	for r.Next() {
		var row Row
		var attempt int64
		if err := r.Scan(&row.Instance, &row.Key, &row.Execution, &attempt, &row.OK, &row.Worker, &row.RecordedAt); err != nil {
			return nil, nil, err
		}
		row.Attempt = uint32(attempt)
		rows = append(rows, row)
	}
	if err := r.Err(); err != nil {
		return nil, nil, err
	}
	instanceKeys = map[string]string{}
	ir, err := conn.Query(ctx, `SELECT instance_id::text, coalesce(idempotency_key, '') FROM runner_instances`)
	if err != nil {
		return nil, nil, err
	}
	for ir.Next() {
		var id, key string
		if err := ir.Scan(&id, &key); err != nil {
			return nil, nil, err
		}
		instanceKeys[id] = key
	}
	return rows, instanceKeys, ir.Err()
}

// capabilityOf reads the capability out of a worker id ("w1/core/2").
func capabilityOf(worker string) string {
	parts := strings.Split(worker, "/")
	if len(parts) >= 2 {
		return parts[len(parts)-2]
	}
	return ""
}

// Recover fills in each fault's recovery: from the fault to the first
// success recorded afterwards of a capability it disturbed (any, when it
// names none).
func Recover(faults []Fault, rows []Row) []Fault {
	var done []Row
	for _, r := range rows {
		if r.OK {
			done = append(done, r)
		}
	}
	sort.Slice(done, func(i, j int) bool { return done[i].RecordedAt.Before(done[j].RecordedAt) })
	out := slices.Clone(faults)
	for i := range out {
		f := &out[i]
		f.Recovery = -1
		from := f.Injected
		if from.IsZero() { // a report written before Injected existed
			from = f.At
		}
		affected := func(r Row) bool {
			return len(f.Capabilities) == 0 || slices.Contains(f.Capabilities, capabilityOf(r.Worker))
		}
		j := sort.Search(len(done), func(k int) bool { return done[k].RecordedAt.After(from) })
		for k := j; k < len(done); k++ {
			if affected(done[k]) {
				f.Recovery = done[k].RecordedAt.Sub(from)
				break
			}
		}
		end := f.Healed.Add(StallWindow)
		prev := from
		f.Stall = 0
		for k := j; k < len(done) && !done[k].RecordedAt.After(end); k++ {
			if affected(done[k]) {
				f.Stall = max(f.Stall, done[k].RecordedAt.Sub(prev))
				prev = done[k].RecordedAt
			}
		}
		stop := end
		if last := lastOr(done, end); last.Before(stop) {
			stop = last // the run ended first
		}
		f.Stall = max(f.Stall, stop.Sub(prev))
	}
	return out
}

// StallWindow is how long after a heal a fault's stall is still measured.
const StallWindow = 10 * time.Second

// lastOr is the time of the last row, or t when there is none.
func lastOr(rows []Row, t time.Time) time.Time {
	if len(rows) == 0 {
		return t
	}
	return rows[len(rows)-1].RecordedAt
}
