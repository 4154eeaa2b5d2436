package client

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// PrintInstance writes an instance as a table: header facts, one row per
// task, then the outputs (or the error).
func PrintInstance(w io.Writer, in *robonetv1.Instance) {
	v := Instance(in)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "instance\t%s\n", v.ID)
	fmt.Fprintf(tw, "workflow\t%s v%d\n", v.Workflow, v.Version)
	if p := v.Parent; p != nil {
		fmt.Fprintf(tw, "parent\t%s (task %s, attempt %d)\n", p.ID, p.Execution, p.Attempt)
	}
	state := v.State
	switch {
	case v.CancelRequested && !Terminal(in.GetState()):
		state += " (cancel requested)"
	case in.GetState() == robonetv1.InstanceState_INSTANCE_STATE_PAUSED:
		state += " (no new attempt starts until roboctl resume " + v.ID + ")"
	}
	fmt.Fprintf(tw, "state\t%s\n", state)
	if v.Run > 1 {
		fmt.Fprintf(tw, "run\t%d (roboctl retry ran it again)\n", v.Run)
	}
	if v.CreatedAt != nil {
		fmt.Fprintf(tw, "created\t%s\n", v.CreatedAt.Local().Format(time.DateTime))
	}
	if v.StartedAt != nil {
		end := time.Now()
		if v.FinishedAt != nil {
			end = *v.FinishedAt
		}
		fmt.Fprintf(tw, "duration\t%s\n", roundDuration(end.Sub(*v.StartedAt)))
	}
	fmt.Fprintf(tw, "progress\t%s\n", ProgressLine(v.Progress))
	if !Terminal(in.GetState()) {
		eta := v.ETA
		if eta == "" {
			eta = "unknown"
		}
		fmt.Fprintf(tw, "eta\t%s\n", eta)
	}
	if v.Error != "" {
		fmt.Fprintf(tw, "error\t%s\n", v.Error)
	}
	_ = tw.Flush()

	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TASK\tSTATUS\tATTEMPT\tNODE\tCAPABILITY/ACTION\tTIME\tOUTPUT / ERROR")
	for _, t := range v.Tasks {
		status := t.Status
		if t.Spread != nil {
			status += fmt.Sprintf(" %d/%d", t.Spread.Done, t.Spread.Width)
			if t.Spread.Failed > 0 {
				status += fmt.Sprintf(" (%d failed)", t.Spread.Failed)
			}
		}
		if t.Loop != nil && t.Loop.Iterations > 0 {
			if t.Status == "running" || t.Status == "retrying" {
				status += fmt.Sprintf(" #%d", t.Loop.Iterations-1) // the iteration it is in
			} else {
				status += fmt.Sprintf(" (%d iterations)", t.Loop.Iterations)
			}
		}
		attempt := "-"
		if t.Attempt > 0 {
			attempt = fmt.Sprintf("%d/%d", t.Attempt, t.MaxAttempts)
		}
		took := "-"
		if t.StartedAt != nil && t.FinishedAt != nil {
			took = roundDuration(t.FinishedAt.Sub(*t.StartedAt)).String()
		}
		// A completed task shows its output (an earlier attempt's error
		// is history); any other shows why it is not completed, or its
		// latest heartbeat while it runs.
		var detail string
		switch {
		case t.Status == "completed":
			detail = compactJSON(t.Output)
		case t.Error != "":
			detail = "error: " + t.Error
		case t.Wait != nil && t.Wait.Waiting && t.Status == "running":
			detail = WaitDetail(t.Wait)
		case t.Progress != nil && t.Status == "running":
			detail = progressDetail(t.Progress)
		default:
			detail = compactJSON(t.Output)
		}
		body := t.Capability + "/" + t.Action
		switch {
		case t.Wait != nil && t.Wait.Signal != "":
			body = "wait signal " + t.Wait.Signal
		case t.Wait != nil || (t.Capability == "" && t.Action == "" && t.Workflow == ""):
			body = "wait"
		}
		if t.Workflow != "" {
			body = "workflow " + t.Workflow
			if t.WorkflowVersion > 0 {
				body += fmt.Sprintf(" v%d", t.WorkflowVersion)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.Name, status, attempt, taskNodes(t), body, took, truncate(oneLine(detail), 70))
		if t.Workflow != "" {
			printChildren(tw, t)
		} else {
			printAttempts(tw, t)
		}
	}
	_ = tw.Flush()

	printSignals(w, v.Signals)

	if len(v.Outputs) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "outputs")
		PrintOutputs(w, v.Outputs)
	}
}

// WaitDetail says what a waiting task waits for: "waiting for signal
// approve, times out at 2026-11-29 10:00:00", "waiting until …".
func WaitDetail(w *WaitView) string {
	switch {
	case w.Signal != "" && w.Until != nil:
		return fmt.Sprintf("waiting for signal %s, times out at %s", w.Signal, w.Until.Local().Format(time.DateTime))
	case w.Signal != "":
		return "waiting for signal " + w.Signal
	case w.Until != nil:
		return "waiting until " + w.Until.Local().Format(time.DateTime)
	}
	return "waiting"
}

// maxSignalLines bounds the signals roboctl get lists (the latest ones).
const maxSignalLines = 20

// printSignals writes the signals sent to an instance, the latest
// maxSignalLines of them.
func printSignals(w io.Writer, signals []SignalView) {
	if len(signals) == 0 {
		return
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "signals")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tNAME\tSENT\tTAKEN BY\tPAYLOAD")
	if n := len(signals) - maxSignalLines; n > 0 {
		fmt.Fprintf(tw, "… %d earlier (-o json lists them)\t\t\t\t\n", n)
		signals = signals[n:]
	}
	for _, sg := range signals {
		by := "-"
		if sg.Consumed {
			by = dash(sg.By)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", sg.Seq, sg.Name, shortTime(sg.At), by, truncate(oneLine(compactJSON(sg.Payload)), 60))
	}
	_ = tw.Flush()
}

// maxAttemptLines bounds the attempt lines under one spread task.
const maxAttemptLines = 5

// taskNodes names the node(s) a task ran on: the node of a plain task's
// latest attempt; the distinct nodes of a spread's attempts.
func taskNodes(t TaskView) string {
	if len(t.Attempts) == 0 {
		return "-"
	}
	if t.Spread == nil && t.Loop == nil {
		return dash(t.Attempts[len(t.Attempts)-1].Node)
	}
	var nodes []string
	for _, a := range t.Attempts {
		if a.Node != "" && !slices.Contains(nodes, a.Node) {
			nodes = append(nodes, a.Node)
		}
	}
	slices.Sort(nodes)
	return truncate(dash(strings.Join(nodes, ",")), 30)
}

// printAttempts writes a line per attempt under a task that took more
// than one: every attempt of a plain task, the failed and cancelled ones
// of a spread task and those of a loop's iterations (at most
// maxAttemptLines), and a loop's running iteration. A task that ran once
// shows nothing more; -o json lists every attempt.
func printAttempts(tw io.Writer, t TaskView) {
	many := t.Spread != nil || t.Loop != nil
	if len(t.Attempts) < 2 && (len(t.Attempts) == 0 || !many) {
		return
	}
	shown, failed := 0, 0
	for _, a := range t.Attempts {
		if many && (a.OK || (a.Running && t.Loop == nil)) {
			continue
		}
		if failed++; many && shown == maxAttemptLines {
			continue
		}
		shown++
		l := lineOf(a)
		fmt.Fprintf(tw, "%s\t%s\t\t%s\t%s\t%s\t%s\n", l.label, l.status, dash(a.Node), dash(a.Worker), l.took, l.detail)
	}
	if more := failed - shown; more > 0 {
		fmt.Fprintf(tw, "  … %d more failed attempts (-o json lists them)\t\t\t\t\t\t\n", more)
	}
}

// printChildren writes a line per attempt of a task whose body is a child
// workflow, naming the child instance it started (roboctl get CHILD shows
// it): at most maxAttemptLines, failed and running ones first.
func printChildren(tw io.Writer, t TaskView) {
	attempts := slices.Clone(t.Attempts)
	slices.SortStableFunc(attempts, func(a, b AttemptView) int {
		rank := func(a AttemptView) int {
			if a.OK {
				return 1
			}
			return 0
		}
		return rank(a) - rank(b)
	})
	for i, a := range attempts {
		if i == maxAttemptLines {
			fmt.Fprintf(tw, "  … %d more (-o json lists them)\t\t\t\t\t\t\n", len(attempts)-i)
			break
		}
		child := "-"
		if a.Child != "" {
			child = "child " + a.Child
		}
		l := lineOf(a)
		fmt.Fprintf(tw, "%s\t%s\t\t-\t%s\t%s\t%s\n", l.label, l.status, child, l.took, l.detail)
	}
}

// attemptLine is what a line under a task says of one attempt.
type attemptLine struct {
	label, status, took, detail string
}

// lineOf is the line of attempt a: "  [2] #1", its outcome, how long it
// took and, when it failed, why.
func lineOf(a AttemptView) attemptLine {
	l := attemptLine{label: fmt.Sprintf("  #%d", a.Attempt), status: "failed", took: "-", detail: "error: " + a.Error}
	switch {
	case a.Index != nil:
		l.label = fmt.Sprintf("  [%d] #%d", *a.Index, a.Attempt)
	case a.Iteration != nil:
		l.label = fmt.Sprintf("  #%d attempt %d", *a.Iteration, a.Attempt)
	}
	switch {
	case a.Running:
		l.status, l.detail = "running", ""
	case a.OK:
		l.status, l.detail = "completed", ""
	case a.Error == "cancelled":
		l.status, l.detail = "cancelled", ""
	}
	if a.StartedAt != nil && a.FinishedAt != nil {
		l.took = roundDuration(a.FinishedAt.Sub(*a.StartedAt)).String()
	}
	l.detail = truncate(oneLine(l.detail), 70)
	return l
}

// PrintOutputs writes a JSON object of outputs indented, one key per line.
func PrintOutputs(w io.Writer, outputs json.RawMessage) {
	var buf bytes.Buffer
	if err := json.Indent(&buf, outputs, "  ", "  "); err != nil {
		fmt.Fprintf(w, "  %s\n", outputs)
		return
	}
	fmt.Fprintf(w, "  %s\n", buf.String())
}

// ProgressLine renders progress counts: "5/8 done, 2 running, 0 failed";
// "5/8+ done" while spread tasks have yet to expand (the total grows then).
func ProgressLine(p ProgressView) string {
	more := ""
	if p.Unexpanded > 0 {
		more = "+"
	}
	s := fmt.Sprintf("%d/%d%s done, %d running, %d failed", p.Done, p.Total, more, p.Running, p.Failed)
	if p.Skipped > 0 {
		s += fmt.Sprintf(", %d skipped", p.Skipped)
	}
	return s
}

// PrintSummaries writes instance rows as a table.
func PrintSummaries(w io.Writer, rows []*robonetv1.InstanceSummary) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tWORKFLOW\tSTATE\tCREATED\tFINISHED\tERROR")
	for _, r := range rows {
		v := Summary(r)
		wf := fmt.Sprintf("%s v%d", v.Workflow, v.Version)
		if v.Parent != "" { // a child instance: its parent's id prefix, as get takes it
			wf += fmt.Sprintf(" (child of %.8s)", v.Parent)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", v.ID, wf, v.State,
			shortTime(v.CreatedAt), shortTime(v.FinishedAt), truncate(oneLine(v.Error), 60))
	}
	_ = tw.Flush()
}

// PrintWorkflows writes workflow versions as a table.
func PrintWorkflows(w io.Writer, rows []*robonetv1.WorkflowInfo) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tVERSION\tTASKS\tIR HASH\tCREATED\tDESCRIPTION")
	for _, r := range rows {
		v := Workflow(r)
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\n", v.Name, v.Version, v.Tasks, truncate(v.IRHash, 19),
			shortTime(v.CreatedAt), truncate(oneLine(v.Description), 60))
	}
	_ = tw.Flush()
}

// EventLine renders one event on one line for `roboctl watch`.
func EventLine(ev *robonetv1.Event) string {
	v := Event(ev)
	var b strings.Builder
	if v.Time != nil {
		b.WriteString(v.Time.Local().Format("15:04:05.000") + "  ")
	}
	fmt.Fprintf(&b, "#%-4d %-15s", v.Seq, v.Kind)
	if v.Task != "" {
		task := v.Task
		switch {
		case v.Index != nil:
			task += fmt.Sprintf("[%d]", *v.Index)
		case v.Iteration != nil:
			task += fmt.Sprintf("#%d", *v.Iteration)
		}
		b.WriteString(" " + task)
		if v.Attempt > 0 {
			fmt.Fprintf(&b, " attempt %d", v.Attempt)
		}
	}
	switch {
	case v.Instance != nil:
		fmt.Fprintf(&b, " %s: %s", v.State, ProgressLine(v.Instance.Progress))
	case ev.GetKind() == robonetv1.EventKind_EVENT_KIND_STATE:
		b.WriteString(" " + v.State)
	}
	if v.Error != "" {
		b.WriteString(": " + truncate(oneLine(v.Error), 120))
	}
	if len(v.Output) > 0 {
		b.WriteString(" → " + truncate(oneLine(compactJSON(v.Output)), 80))
	}
	if v.RetryAt != nil {
		fmt.Fprintf(&b, " (retry at %s)", v.RetryAt.Local().Format("15:04:05.000"))
	}
	if v.Progress != nil {
		b.WriteString(" " + progressDetail(v.Progress))
	}
	if sg := v.Signal; sg != nil {
		fmt.Fprintf(&b, " %s (#%d) → %s", sg.Name, sg.Seq, truncate(oneLine(compactJSON(sg.Payload)), 80))
		if sg.Consumed {
			b.WriteString(", taken by " + dash(sg.By))
		}
	}
	if v.Run > 0 && ev.GetKind() == robonetv1.EventKind_EVENT_KIND_RETRIED {
		fmt.Fprintf(&b, " run %d", v.Run)
	}
	return b.String()
}

func progressDetail(p *TaskProgress) string {
	s := fmt.Sprintf("step %d", p.StepsDone)
	if p.StepsTotal > 0 {
		s = fmt.Sprintf("step %d/%d", p.StepsDone, p.StepsTotal)
	}
	if p.ETA != "" {
		s += ", eta " + p.ETA
	}
	if p.Message != "" {
		s += ": " + p.Message
	}
	return s
}

func compactJSON(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return string(raw)
	}
	return buf.String()
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

func shortTime(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.Local().Format(time.DateTime)
}

func roundDuration(d time.Duration) time.Duration {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond)
	case d < time.Minute:
		return d.Round(10 * time.Millisecond)
	}
	return d.Round(time.Second)
}
