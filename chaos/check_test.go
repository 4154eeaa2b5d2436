package chaos

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"strings"
	"testing"
	"time"

	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

var t0 = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

// honest builds the rows a correct run records for sub: every execution
// that must succeed once, every failing one on each attempt.
func honest(k Kind, sub Submission, worker string, at time.Time) []Row {
	var rows []Row
	for _, e := range k.Succeeds(sub.Seed) {
		rows = append(rows, Row{Instance: sub.Instance, Key: sub.Key, Execution: e, Attempt: 1, OK: true, Worker: worker, RecordedAt: at})
	}
	for e, n := range k.Fails {
		for a := 1; a <= n; a++ {
			rows = append(rows, Row{Instance: sub.Instance, Key: sub.Key, Execution: e, Attempt: uint32(a), Worker: worker, RecordedAt: at})
		}
	}
	return rows
}

// A correct run passes; each kind of defect the checker exists for is
// counted where it belongs, and an indeterminate submission (never
// acknowledged, maybe started) is not one.
func TestJudge(t *testing.T) {
	kinds := Kinds()
	var (
		subs   []Submission
		rows   []Row
		finals = map[string]Final{}
		keys   = map[string]string{}
	)
	for i, k := range kinds {
		s := Submission{Key: "run-" + k.Name, Kind: k.Name, Seed: 10 + i, Acked: true, Instance: "i-" + k.Name}
		subs = append(subs, s)
		out, _ := jsonOf(k.Outputs(s.Seed))
		finals[s.Instance] = Final{State: robonetv1.InstanceState_INSTANCE_STATE_COMPLETE, Outputs: out}
		rows = append(rows, honest(k, s, "w1/core/1", t0)...)
		keys[s.Instance] = s.Key
	}
	subs = append(subs, Submission{Key: "run-maybe", Kind: "chaos-chain", Seed: 3}) // never acknowledged
	keys["i-maybe"] = "run-maybe"                                                   // ...but it did start
	if v := Judge(kinds, subs, finals, rows, keys, "run-", ""); !v.Passed() || v.Indeterminate != 1 || v.Completed != 4 {
		t.Fatalf("a correct run: %+v", v)
	}
	if v := Judge(kinds, subs, finals, rows, keys, "run-", ""); v.Executions != 10+spreadWidth+5+1+1 {
		t.Fatalf("%d executions checked", v.Executions)
	}

	cases := []struct {
		name  string
		mod   func(finals map[string]Final, rows *[]Row, keys map[string]string)
		count func(Verdict) int
	}{
		{"a success recorded twice", func(_ map[string]Final, rows *[]Row, _ map[string]string) {
			r := (*rows)[0]
			r.Attempt = 2
			*rows = append(*rows, r)
		}, func(v Verdict) int { return v.Duplicated }},
		{"an attempt recorded twice", func(_ map[string]Final, rows *[]Row, _ map[string]string) {
			*rows = append(*rows, (*rows)[len(*rows)-1])
		}, func(v Verdict) int { return v.Duplicated }},
		{"an execution never recorded", func(_ map[string]Final, rows *[]Row, _ map[string]string) {
			*rows = (*rows)[1:]
		}, func(v Verdict) int { return v.Lost }},
		{"an acknowledged instance failed", func(f map[string]Final, _ *[]Row, _ map[string]string) {
			f["i-chaos-chain"] = Final{State: robonetv1.InstanceState_INSTANCE_STATE_FAILED, Error: "boom"}
		}, func(v Verdict) int { return v.Lost }},
		{"an acknowledged instance missing", func(f map[string]Final, _ *[]Row, _ map[string]string) {
			f["i-chaos-chain"] = Final{Missing: true}
		}, func(v Verdict) int { return v.Lost }},
		{"wrong outputs", func(f map[string]Final, _ *[]Row, _ map[string]string) {
			f["i-chaos-chain"] = Final{State: robonetv1.InstanceState_INSTANCE_STATE_COMPLETE, Outputs: `{"v": 1}`}
		}, func(v Verdict) int { return v.Wrong }},
		{"still running", func(f map[string]Final, _ *[]Row, _ map[string]string) {
			f["i-chaos-sleep"] = Final{State: robonetv1.InstanceState_INSTANCE_STATE_RUNNING}
		}, func(v Verdict) int { return v.Stuck }},
		{"a second instance for one idempotency key", func(_ map[string]Final, _ *[]Row, keys map[string]string) {
			keys["i-twin"] = "run-chaos-chain"
		}, func(v Verdict) int { return v.Duplicated }},
		{"an instance nobody submitted", func(_ map[string]Final, _ *[]Row, keys map[string]string) {
			keys["i-ghost"] = "someone-else"
		}, func(v Verdict) int { return v.Unexpected }},
		{"an execution the workflow lacks", func(_ map[string]Final, rows *[]Row, _ map[string]string) {
			r := (*rows)[0]
			r.Execution = "t42"
			*rows = append(*rows, r)
		}, func(v Verdict) int { return v.Unexpected }},
		{"a failing execution with an attempt missing", func(_ map[string]Final, rows *[]Row, _ map[string]string) {
			*rows = (*rows)[:len(*rows)-1]
		}, func(v Verdict) int { return v.Lost }},
	}
	for _, c := range cases {
		f := map[string]Final{}
		for k, v := range finals {
			f[k] = v
		}
		k := map[string]string{}
		for a, b := range keys {
			k[a] = b
		}
		r := append([]Row(nil), rows...)
		c.mod(f, &r, k)
		v := Judge(kinds, subs, f, r, k, "run-", "")
		if v.Passed() || c.count(v) != 1 {
			t.Errorf("%s: %+v", c.name, v)
		}
		if len(v.Problems) == 0 {
			t.Errorf("%s: no problem described", c.name)
		}
	}

	// An instance the API said nothing of before the drain ended is stuck,
	// not lost.
	unanswered := map[string]Final{}
	for k, f := range finals {
		unanswered[k] = f
	}
	unanswered["i-chaos-chain"] = Final{Unanswered: true}
	if v := Judge(kinds, subs, unanswered, rows, keys, "run-", ""); v.Stuck != 1 || v.Lost != 0 {
		t.Errorf("an unanswered instance: %+v", v)
	}

	// A database that could not be read fails the run, however the API
	// answered: the record of executions is what the checker is for.
	if v := Judge(kinds, subs, finals, nil, nil, "run-", "connecting to the mesh's Postgres: timeout"); v.Passed() || v.Completed != 4 || v.Executions != 0 {
		t.Errorf("an unread database: %+v", v)
	}
}

func jsonOf(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}

// Recovery is measured to the next success of a capability the fault
// disturbed; a fault of no capability takes any; none after: -1.
func TestRecover(t *testing.T) {
	rows := []Row{
		{OK: true, Worker: "w2/compute/1", RecordedAt: t0.Add(2 * time.Second)},
		{OK: false, Worker: "w1/core/1", RecordedAt: t0.Add(3 * time.Second)},
		{OK: true, Worker: "w1/core/1", RecordedAt: t0.Add(5 * time.Second)},
	}
	faults := []Fault{
		{Kind: KillWaggler, At: t0.Add(time.Second), Healed: t0.Add(2 * time.Second), Capabilities: []string{"core"}},
		{Kind: KillLeader, At: t0.Add(time.Second), Healed: t0.Add(2 * time.Second)},
		{Kind: KillWorker, At: t0.Add(6 * time.Second), Healed: t0.Add(7 * time.Second), Capabilities: []string{"core"}},
	}
	got := Recover(faults, rows)
	want := []time.Duration{4 * time.Second, time.Second, -1}
	stall := []time.Duration{4 * time.Second, 3 * time.Second, 0}
	for i, f := range got {
		if f.Recovery != want[i] || f.Stall != stall[i] {
			t.Errorf("fault %d (%s): recovery %v, stall %v; want %v, %v", i, f.Kind, f.Recovery, f.Stall, want[i], stall[i])
		}
	}
}

// The report: percentiles, the per-second series, and an SVG that parses.
func TestReport(t *testing.T) {
	r := &Report{Started: t0, Ended: t0.Add(10 * time.Second), Faults: []Fault{
		{Kind: KillWorker, Targets: []string{"w1"}, At: t0.Add(2 * time.Second), Healed: t0.Add(4 * time.Second), Recovery: time.Second},
		{Kind: RestartPostgres, Targets: []string{"pg1"}, At: t0.Add(5 * time.Second), Healed: t0.Add(6 * time.Second), Recovery: 3 * time.Second},
		{Kind: PauseWorker, Targets: []string{"w2"}, At: t0.Add(7 * time.Second), Healed: t0.Add(8 * time.Second), Recovery: -1},
	}}
	r.Summarize([]Row{{OK: true, RecordedAt: t0.Add(1500 * time.Millisecond)}, {OK: true, RecordedAt: t0.Add(1600 * time.Millisecond)}, {OK: false, RecordedAt: t0}})
	if r.Recovery.P50 != time.Second || r.Recovery.Max != 3*time.Second || r.Recovery.Never != 1 {
		t.Fatalf("recovery %+v", r.Recovery)
	}
	if len(r.Completions) != 11 || r.Completions[1] != 2 || r.Completions[0] != 0 {
		t.Fatalf("completions %v", r.Completions)
	}
	var svg bytes.Buffer
	if err := r.WriteSVG(&svg); err != nil {
		t.Fatal(err)
	}
	if err := xml.Unmarshal(svg.Bytes(), new(struct{})); err != nil {
		t.Fatalf("the SVG does not parse: %v", err)
	}
	if !strings.Contains(svg.String(), "restart-postgres") || strings.Count(svg.String(), "<rect x=") < 3 {
		t.Fatalf("the SVG lacks the faults:\n%s", svg.String())
	}
	var md bytes.Buffer
	if err := r.WriteMarkdown(&md, "t.svg"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"PASSED", "| +2s | kill-worker | w1 |", "p50 1.0 s", "1 faults with nothing of theirs completed",
		"| kill-worker | 1 | 1.0 s | 1.0 s | 1.0 s | 0 |", "| pause-worker | 1 | none | none | none | 1 |"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("the Markdown lacks %q:\n%s", want, md.String())
		}
	}

	// Recovery per kind: a primary lost several times has its own p99.
	r.Faults = nil
	for i, d := range []time.Duration{9, 7, 12, 8} {
		r.Faults = append(r.Faults, Fault{Kind: KillPostgresPrimary, Targets: []string{"pg1"}, At: t0.Add(time.Duration(i) * time.Minute), Recovery: d * time.Second})
	}
	r.Summarize(nil)
	if len(r.ByKind) != 1 || r.ByKind[0].Count != 4 || r.ByKind[0].P50 != 8*time.Second || r.ByKind[0].P99 != 12*time.Second {
		t.Fatalf("recovery by kind: %+v", r.ByKind)
	}

	// A run whose database could not be read says so, and fails.
	r.Verdict.Unchecked = "connecting to the mesh's Postgres: timeout"
	r.Notes = []string{"not every container was healthy after healing"}
	md.Reset()
	if err := r.WriteMarkdown(&md, ""); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"FAILED", "could not be read** (the counts above rest on the API alone): connecting", "Note: not every container"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("the Markdown lacks %q:\n%s", want, md.String())
		}
	}
}

// A healed server's rejoin is in the report; the slowest one (or one that
// never came back) is what the run is judged by.
func TestWorstRejoin(t *testing.T) {
	r := &Report{Started: t0, Ended: t0.Add(time.Minute), Faults: []Fault{
		{Kind: KillWorker, Targets: []string{"w1"}, At: t0, Healed: t0.Add(time.Second)},
		{Kind: DisconnectLeader, Targets: []string{"s2"}, At: t0.Add(2 * time.Second), Healed: t0.Add(3 * time.Second), Rejoin: 800 * time.Millisecond},
		{Kind: PartitionMinority, Targets: []string{"s1", "w2"}, At: t0.Add(4 * time.Second), Healed: t0.Add(5 * time.Second), Rejoin: 1200 * time.Millisecond},
	}}
	if worst, n := r.WorstRejoin(); worst != 1200*time.Millisecond || n != 2 {
		t.Fatalf("worst rejoin %v of %d, want 1.2s of 2", worst, n)
	}
	var md bytes.Buffer
	if err := r.WriteMarkdown(&md, ""); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Rejoin (heal → the cut server a voter that knows the leader, alive to the others), 2 faults: max 1.2 s", "| 0.8 s |"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("the Markdown lacks %q:\n%s", want, md.String())
		}
	}
	r.Faults = append(r.Faults, Fault{Kind: DisconnectLeader, Targets: []string{"s3"}, Rejoin: -1})
	if worst, n := r.WorstRejoin(); worst != -1 || n != 3 {
		t.Fatalf("with a server that never came back: %v of %d", worst, n)
	}
}
