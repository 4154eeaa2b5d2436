package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/robonet/robonet/engine/spec"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

func newValidateCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "validate FILE...",
		Short: "Compile workflow specs offline and show their plan or their errors",
		Long: `Compile workflow specs (YAML or JSON) without contacting a mesh.

For each valid file it prints the IR hash and a short plan: tasks in
dependency order with their capability and action (or the child workflow
they run), needs and joins, fan-outs, loops, runs on every node and guards. For an
invalid file it prints every error with file, line, column and task.
Exits 1 if any file is invalid.`,
		Example: `  roboctl validate examples/*.yaml
  roboctl validate -o json my-workflow.yaml`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "text" && output != "json" {
				return fmt.Errorf("unknown output format %q: use -o text or -o json", output)
			}
			results := make([]validation, 0, len(args))
			for _, file := range args {
				results = append(results, validateFile(file))
			}
			out := cmd.OutOrStdout()
			if output == "json" {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				if err := enc.Encode(results); err != nil {
					return err
				}
			} else {
				for i, r := range results {
					if i > 0 {
						fmt.Fprintln(out)
					}
					r.print(out)
				}
			}
			for _, r := range results {
				if !r.OK {
					return errFailed
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
}

// validation is the outcome for one file; its JSON form is the -o json output.
type validation struct {
	File    string         `json:"file"`
	OK      bool           `json:"ok"`
	Name    string         `json:"name,omitempty"`
	Version uint32         `json:"version,omitempty"`
	Hash    string         `json:"ir_hash,omitempty"`
	Inputs  []inputSummary `json:"inputs,omitempty"`
	Tasks   []taskSummary  `json:"tasks,omitempty"`
	Outputs []string       `json:"outputs,omitempty"`
	Errors  []fileError    `json:"errors,omitempty"`
}

type inputSummary struct {
	Name     string `json:"name"`
	Type     string `json:"type"`
	Required bool   `json:"required"`
}

type taskSummary struct {
	Name       string       `json:"name"`
	Capability string       `json:"capability"`
	Action     string       `json:"action"`
	Needs      []string     `json:"needs,omitempty"`
	Join       *joinSummary `json:"join,omitempty"`
	Spread     string       `json:"spread,omitempty"`
	Loop       *loopSummary `json:"loop,omitempty"`
	On         string       `json:"on,omitempty"`
	// Workflow is the child workflow the task runs (name@version, or
	// name for the latest); capability and action are then empty.
	Workflow  string `json:"workflow,omitempty"`
	When      string `json:"when,omitempty"`
	Accept    string `json:"accept,omitempty"`
	OnFailure string `json:"on_failure"`
	Attempts  uint32 `json:"max_attempts"`
}

// joinSummary is a task's N-of-M join: it starts once Min of its needs
// completed, and with CancelRest cancels the others then.
type joinSummary struct {
	Min        uint32 `json:"min"`
	CancelRest bool   `json:"cancel_rest,omitempty"`
}

// loopSummary is a task's loop: until a condition (with max) or over a
// list, with an optional pause between iterations.
type loopSummary struct {
	Until string `json:"until,omitempty"`
	Over  string `json:"over,omitempty"`
	Max   uint32 `json:"max,omitempty"`
	Every string `json:"every,omitempty"`
}

// note describes the loop: "loop until output.done (at most 30, every 10s)"
// or "loop over tasks.list.output".
func (l *loopSummary) note() string {
	var s string
	var more []string
	if l.Until != "" {
		s = "loop until " + l.Until
	} else {
		s = "loop over " + l.Over
	}
	if l.Max > 0 {
		more = append(more, fmt.Sprintf("at most %d", l.Max))
	}
	if l.Every != "" {
		more = append(more, "every "+l.Every)
	}
	if len(more) > 0 {
		s += " (" + strings.Join(more, ", ") + ")"
	}
	return s
}

type fileError struct {
	Line    int    `json:"line,omitempty"`
	Column  int    `json:"column,omitempty"`
	Task    string `json:"task,omitempty"`
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
	Hint    string `json:"hint,omitempty"`
	Text    string `json:"text"`
}

func validateFile(file string) validation {
	v := validation{File: file}
	src, err := os.ReadFile(file)
	if err != nil {
		msg := err.Error()
		if errors.Is(err, os.ErrNotExist) {
			msg = "file not found"
		}
		v.Errors = []fileError{{Message: msg, Text: file + ": " + msg}}
		return v
	}
	wf, err := spec.Compile(file, src, spec.Options{})
	if err != nil {
		var list spec.ErrorList
		if !errors.As(err, &list) {
			v.Errors = []fileError{{Message: err.Error(), Text: file + ": " + err.Error()}}
			return v
		}
		for _, e := range list {
			v.Errors = append(v.Errors, fileError{Line: e.Line, Column: e.Column, Task: e.Task, Field: e.Field, Message: e.Msg, Hint: e.Hint, Text: e.Error()})
		}
		return v
	}
	v.OK, v.Name, v.Version, v.Hash = true, wf.GetName(), wf.GetVersion(), spec.Hash(wf)
	for _, in := range wf.GetInputs() {
		v.Inputs = append(v.Inputs, inputSummary{Name: in.GetName(), Type: typeName(in.GetType()), Required: in.GetRequired()})
	}
	for _, t := range dependencyOrder(wf.GetTasks()) {
		ts := taskSummary{
			Name: t.GetName(), Capability: t.GetCapability(), Action: t.GetAction(), Needs: t.GetNeeds(),
			Spread: t.GetSpread().GetSource(), When: t.GetWhen().GetSource(), Accept: t.GetAccept().GetSource(),
			OnFailure: policyName(t.GetOnFailure()), Attempts: t.GetRetry().GetMaxAttempts(),
		}
		if j := t.GetJoin(); j != nil {
			ts.Join = &joinSummary{Min: j.GetMin(), CancelRest: j.GetCancelRest()}
		}
		if t.GetOn() == robonetv1.TaskOn_TASK_ON_EVERY_NODE {
			ts.On = "every_node"
		}
		if c := t.GetWorkflow(); c != nil {
			ts.Workflow = c.GetName()
			if c.GetVersion() > 0 {
				ts.Workflow += fmt.Sprintf("@%d", c.GetVersion())
			}
		}
		if l := t.GetLoop(); l != nil {
			ts.Loop = &loopSummary{Until: l.GetUntil().GetSource(), Over: l.GetOver().GetSource(), Max: l.GetMax()}
			if d := l.GetEvery().AsDuration(); d > 0 {
				ts.Loop.Every = d.String()
			}
		}
		v.Tasks = append(v.Tasks, ts)
	}
	for _, o := range wf.GetOutputs() {
		v.Outputs = append(v.Outputs, o.GetName())
	}
	return v
}

// dependencyOrder lists tasks so that every task comes after its needs, ties
// broken by name (the IR is sorted by name and acyclic).
func dependencyOrder(tasks []*robonetv1.Task) []*robonetv1.Task {
	placed := make(map[string]bool, len(tasks))
	out := make([]*robonetv1.Task, 0, len(tasks))
	for len(out) < len(tasks) {
		progressed := false
		for _, t := range tasks {
			if placed[t.GetName()] || !allPlaced(t.GetNeeds(), placed) {
				continue
			}
			placed[t.GetName()] = true
			out = append(out, t)
			progressed = true
		}
		if !progressed { // cannot happen for compiled IR; never loop forever
			break
		}
	}
	return out
}

func allPlaced(names []string, placed map[string]bool) bool {
	for _, n := range names {
		if !placed[n] {
			return false
		}
	}
	return true
}

func (v validation) print(w io.Writer) {
	if !v.OK {
		noun := "errors"
		if len(v.Errors) == 1 {
			noun = "error"
		}
		fmt.Fprintf(w, "✗ %s: %d %s\n", v.File, len(v.Errors), noun)
		for _, e := range v.Errors {
			fmt.Fprintf(w, "  %s\n", e.Text)
		}
		return
	}
	fmt.Fprintf(w, "✓ %s\n", v.File)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  workflow\t%s v%d\n", v.Name, v.Version)
	fmt.Fprintf(tw, "  ir hash\t%s\n", v.Hash)
	if len(v.Inputs) > 0 {
		parts := make([]string, 0, len(v.Inputs))
		for _, in := range v.Inputs {
			req := "optional"
			if in.Required {
				req = "required"
			}
			parts = append(parts, fmt.Sprintf("%s (%s, %s)", in.Name, in.Type, req))
		}
		fmt.Fprintf(tw, "  inputs\t%s\n", strings.Join(parts, ", "))
	}
	fmt.Fprintf(tw, "  tasks\t%d (%s)\n", len(v.Tasks), capabilityCounts(v.Tasks))
	if len(v.Outputs) > 0 {
		fmt.Fprintf(tw, "  outputs\t%s\n", strings.Join(v.Outputs, ", "))
	}
	_ = tw.Flush()
	fmt.Fprintln(w, "  plan")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for i, t := range v.Tasks {
		var notes []string
		if len(t.Needs) > 0 {
			notes = append(notes, "needs "+strings.Join(t.Needs, ", ")+t.Join.note(len(t.Needs)))
		}
		if t.Spread != "" {
			notes = append(notes, "fan-out over "+t.Spread)
		}
		if t.Loop != nil {
			notes = append(notes, t.Loop.note())
		}
		if t.On == "every_node" {
			notes = append(notes, "once on every node serving "+t.Capability)
		}
		if t.When != "" {
			notes = append(notes, "when "+t.When)
		}
		if t.Accept != "" {
			notes = append(notes, "accept "+t.Accept)
		}
		if t.Attempts > 1 {
			notes = append(notes, fmt.Sprintf("up to %d attempts", t.Attempts))
		}
		if t.OnFailure != "retry" {
			notes = append(notes, "on failure "+t.OnFailure)
		}
		fmt.Fprintf(tw, "    %d\t%s\t%s\t%s\n", i+1, t.Name, t.body(), strings.Join(notes, " · "))
	}
	_ = tw.Flush()
}

// note describes the join after the needs it applies to: " (join: 2 of 3)"
// or " (join: 2 of 3, cancel the rest)"; "" without a join.
func (j *joinSummary) note(needs int) string {
	if j == nil {
		return ""
	}
	rest := ""
	if j.CancelRest {
		rest = ", cancel the rest"
	}
	return fmt.Sprintf(" (join: %d of %d%s)", j.Min, needs, rest)
}

// body is what runs the task: "capability/action", or "workflow NAME"
// for a task whose body is a child workflow.
func (t taskSummary) body() string {
	if t.Workflow != "" {
		return "workflow " + t.Workflow
	}
	return t.Capability + "/" + t.Action
}

func capabilityCounts(tasks []taskSummary) string {
	counts := map[string]int{}
	for _, t := range tasks {
		if t.Workflow != "" {
			counts["workflow "+t.Workflow]++
		} else {
			counts[t.Capability]++
		}
	}
	caps := make([]string, 0, len(counts))
	for c := range counts {
		caps = append(caps, c)
	}
	slices.Sort(caps)
	for i, c := range caps {
		caps[i] = fmt.Sprintf("%s ×%d", c, counts[c])
	}
	return strings.Join(caps, ", ")
}

func typeName(t robonetv1.ValueType) string {
	return strings.ToLower(strings.TrimPrefix(t.String(), "VALUE_TYPE_"))
}

func policyName(p robonetv1.FailurePolicy) string {
	return strings.ToLower(strings.TrimPrefix(p.String(), "FAILURE_POLICY_"))
}
