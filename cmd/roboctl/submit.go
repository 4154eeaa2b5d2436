package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/robonet/robonet/engine/value"
	"github.com/robonet/robonet/internal/client"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

type submitOptions struct {
	workflow       string
	inputs         []string
	inputsFile     string
	inputsLines    string
	batchSize      int
	idempotencyKey string
	deadline       time.Duration
	wait           bool
	quiet          bool
	dev            bool
	output         string
}

func newSubmitCmd(g *globalOptions) *cobra.Command {
	o := &submitOptions{}
	cmd := &cobra.Command{
		Use:   "submit (FILE | --workflow NAME[@VERSION]) [--input k=v]... [--inputs FILE.json | --inputs-file FILE.jsonl] [--wait]",
		Short: "Start a workflow instance from a spec file or a registered workflow",
		Long: `Start a workflow instance.

With FILE, the spec (YAML or JSON) is sent inline: the node compiles it,
registers its version (a no-op if the same definition is registered) and
starts it. With --workflow NAME[@VERSION] a registered version runs (the latest
without @VERSION).

Inputs come from --inputs FILE.json (a JSON object), then from each
--input k=v, which overrides. v is read as JSON when it is valid JSON
(5, 2.5, true, null, [1,2], {"a":1}, "quoted") and as a plain string
otherwise (--input name=Ada); write --input 'k="5"' for the string "5".

Without --wait it prints the instance id and returns. With --wait it shows
live progress (tasks done/total, running and failed counts) on stderr, then
the outputs, and exits 0 only if the instance COMPLETED (1 if it FAILED or
was CANCELLED).

With --inputs-file FILE.jsonl it starts one instance per line of FILE (a
JSON object of inputs per line; blank lines are skipped), --input values
overriding each line's, in calls of --batch-size instances (SubmitWorkflows:
each call is checked whole and queued in one transaction, or not at all).
Every line is checked before the first call. It prints one instance id per
line of input (-o json: line, instance_id, existing) and a summary on
stderr. With --idempotency-key K, line N gets the key K/N: running the
same file again after a failure starts only what did not start.`,
		Example: `  roboctl submit examples/fan-out.yaml --input count=10 --wait
  roboctl submit examples/hello.yaml --input name=Ada -o json
  roboctl submit --workflow hello@1 --idempotency-key nightly-2026-11-21
  ID=$(roboctl submit examples/hello.yaml -q) && roboctl watch "$ID"
  roboctl submit my-draft.yaml --dev --wait      # edit, run, edit, run: no version bumps
  roboctl submit --workflow hello --inputs-file people.jsonl --idempotency-key import-7`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd, g, args)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.workflow, "workflow", "", "run a registered workflow: NAME or NAME@VERSION")
	_ = cmd.RegisterFlagCompletionFunc("workflow", completeWorkflows(g))
	f.StringArrayVar(&o.inputs, "input", nil, "an input as k=v (repeatable); v is JSON when it parses as JSON, else a string")
	f.StringVar(&o.inputsFile, "inputs", "", "a JSON file holding an object of inputs")
	f.StringVar(&o.inputsLines, "inputs-file", "", "a JSON Lines file: one instance per line, each a JSON object of inputs")
	f.IntVar(&o.batchSize, "batch-size", 1000, "with --inputs-file: instances per call (at most 1000)")
	f.StringVar(&o.idempotencyKey, "idempotency-key", "", "resubmitting with the same key returns the first instance")
	f.DurationVar(&o.deadline, "deadline", 0, "fail the instance if it is still running after this long (0: none)")
	f.BoolVar(&o.wait, "wait", false, "wait for the instance to finish, showing progress, then print its outputs")
	f.BoolVar(&o.dev, "dev", false, "edit and run: if the spec's version is registered with another definition, run it as the next version instead of refusing it")
	f.BoolVarP(&o.quiet, "quiet", "q", false, "print the instance id alone, for scripts: ID=$(roboctl submit f.yaml -q)")
	outputFlag(cmd, &o.output)
	return cmd
}

func (o *submitOptions) run(cmd *cobra.Command, g *globalOptions, args []string) error {
	format, err := client.ParseFormat(o.output)
	if err != nil {
		return err
	}
	if o.deadline < 0 {
		return errors.New("--deadline must not be negative")
	}
	if o.quiet && (o.wait || cmd.Flags().Changed("output")) {
		return errors.New("-q prints the instance id alone: it goes without --wait and -o")
	}
	if o.inputsLines != "" {
		if o.dev {
			return errors.New("--dev goes with a single submission of a spec FILE, not with --inputs-file")
		}
		return o.runBatch(cmd, g, args, format)
	}
	if cmd.Flags().Changed("batch-size") {
		return errors.New("--batch-size works with --inputs-file (one instance per line), which is not given")
	}
	req := &robonetv1.SubmitWorkflowRequest{IdempotencyKey: o.idempotencyKey, Dev: o.dev}
	if o.deadline > 0 {
		req.Deadline = durationpb.New(o.deadline)
	}
	inputs, err := o.collectInputs()
	if err != nil {
		return err
	}
	req.InputsJson = inputs
	spec, ref, err := o.target(cmd, args)
	if err != nil {
		return err
	}
	if spec != nil {
		req.Workflow = &robonetv1.SubmitWorkflowRequest_Spec{Spec: spec}
	} else if o.dev {
		return errors.New("--dev works with a spec FILE (an edited spec registers as a new version); --workflow runs what is registered")
	} else {
		req.Workflow = &robonetv1.SubmitWorkflowRequest_Ref{Ref: ref}
	}

	wf, conn, err := g.connect()
	if err != nil {
		return g.fail(cmd, err)
	}
	defer func() { _ = conn.Close() }()

	var resp *robonetv1.SubmitWorkflowResponse
	if err := g.call(cmd.Context(), func(ctx context.Context) (err error) {
		resp, err = wf.SubmitWorkflow(ctx, req)
		return err
	}); err != nil {
		return g.fail(cmd, err)
	}
	out := cmd.OutOrStdout()
	printWarnings(cmd, resp.GetWarnings())
	if o.quiet {
		fmt.Fprintln(out, resp.GetInstanceId())
		return nil
	}
	if !o.wait {
		if format != client.FormatTable {
			return client.WriteData(out, format, submitView{
				InstanceID: resp.GetInstanceId(), Workflow: client.Workflow(resp.GetWorkflow()), Existing: resp.GetExisting(),
				Warnings: resp.GetWarnings(),
			})
		}
		printSubmitted(cmd, resp)
		return nil
	}

	if format == client.FormatTable {
		printSubmitted(cmd, resp)
	}
	return waitAndReport(cmd, g, wf, resp.GetInstanceId(), format)
}

// target is what to run: the spec FILE (read, sent inline) or the
// registered --workflow NAME[@VERSION]; exactly one is set.
func (o *submitOptions) target(cmd *cobra.Command, args []string) (*robonetv1.InlineSpec, *robonetv1.WorkflowRef, error) {
	switch {
	case len(args) == 1 && o.workflow != "":
		return nil, nil, errors.New("give either a spec FILE or --workflow, not both")
	case len(args) == 1:
		src, err := os.ReadFile(args[0])
		if err != nil {
			fmt.Fprintf(cmd.ErrOrStderr(), "roboctl: reading spec: %v\n", err)
			return nil, nil, errFailed
		}
		return &robonetv1.InlineSpec{Source: src, Filename: args[0]}, nil, nil
	case o.workflow != "":
		ref, err := parseWorkflowRef(o.workflow)
		return nil, ref, err
	}
	return nil, nil, errors.New("give a spec FILE to submit, or --workflow NAME[@VERSION]")
}

// submitView is the -o json form of a submission without --wait.
type submitView struct {
	InstanceID string              `json:"instance_id"`
	Workflow   client.WorkflowView `json:"workflow"`
	Existing   bool                `json:"existing"`
	Warnings   []string            `json:"warnings,omitempty"`
}

// printWarnings tells the user, on stderr, what the node warned of.
func printWarnings(cmd *cobra.Command, warnings []string) {
	for _, w := range warnings {
		fmt.Fprintln(cmd.ErrOrStderr(), "roboctl: warning: "+w)
	}
}

func printSubmitted(cmd *cobra.Command, resp *robonetv1.SubmitWorkflowResponse) {
	w := resp.GetWorkflow()
	note := ""
	if resp.GetExisting() {
		note = " (already submitted with this idempotency key)"
	}
	fmt.Fprintf(cmd.OutOrStdout(), "instance %s of %s v%d%s\n", resp.GetInstanceId(), w.GetName(), w.GetVersion(), note)
}

// waitAndReport follows an instance to its end with live progress on
// stderr (table output only), prints the result and maps the final state
// to the exit code.
func waitAndReport(cmd *cobra.Command, g *globalOptions, wf robonetv1.WorkflowServiceClient, id string, format client.Format) error {
	opts := client.WaitOptions{
		OnReconnect: func(err error) {
			fmt.Fprintf(cmd.ErrOrStderr(), "roboctl: lost the event stream (%s); reconnecting\n", client.Describe(err, g.addr))
		},
	}
	if format == client.FormatTable {
		opts.Progress = client.NewProgress(cmd.ErrOrStderr())
	}
	final, err := client.Wait(cmd.Context(), wf, id, opts)
	if err != nil {
		if cmd.Context().Err() != nil {
			fmt.Fprintf(cmd.ErrOrStderr(), "roboctl: stopped waiting; the instance goes on (roboctl watch %s)\n", id)
			return errFailed
		}
		return g.fail(cmd, err)
	}
	out := cmd.OutOrStdout()
	if format != client.FormatTable {
		if err := client.WriteData(out, format, client.Instance(final)); err != nil {
			return err
		}
	} else {
		printResult(out, final)
	}
	if final.GetState() != robonetv1.InstanceState_INSTANCE_STATE_COMPLETE {
		return errFailed
	}
	return nil
}

// printResult shows how an instance ended: its outputs when it completed,
// otherwise its error and the whole task table to see where it went wrong.
func printResult(w io.Writer, in *robonetv1.Instance) {
	v := client.Instance(in)
	took := ""
	if v.StartedAt != nil && v.FinishedAt != nil {
		took = " in " + v.FinishedAt.Sub(*v.StartedAt).Round(time.Millisecond).String()
	}
	fmt.Fprintf(w, "%s%s (%s)\n", v.State, took, client.ProgressLine(v.Progress))
	if in.GetState() == robonetv1.InstanceState_INSTANCE_STATE_COMPLETE {
		fmt.Fprintln(w, "outputs")
		client.PrintOutputs(w, v.Outputs)
		return
	}
	fmt.Fprintln(w)
	client.PrintInstance(w, in)
}

// collectInputs merges --inputs and --input into canonical JSON.
func (o *submitOptions) collectInputs() (string, error) {
	inputs := map[string]any{}
	if o.inputsFile != "" {
		data, err := os.ReadFile(o.inputsFile)
		if err != nil {
			return "", fmt.Errorf("--inputs: %w", err)
		}
		v, err := value.Decode(data)
		if err != nil {
			return "", fmt.Errorf("--inputs %s: not valid JSON: %w", o.inputsFile, err)
		}
		m, ok := v.(map[string]any)
		if !ok {
			return "", fmt.Errorf("--inputs %s: want a JSON object of inputs, got %s", o.inputsFile, value.TypeName(v))
		}
		inputs = m
	}
	flags, err := o.inputFlags()
	if err != nil {
		return "", err
	}
	maps.Copy(inputs, flags)
	if len(inputs) == 0 {
		return "", nil
	}
	data, err := value.Encode(inputs)
	if err != nil {
		return "", fmt.Errorf("encoding inputs: %w", err)
	}
	return string(data), nil
}

// inputFlags reads the --input k=v flags; nil when there are none.
func (o *submitOptions) inputFlags() (map[string]any, error) {
	var out map[string]any
	for _, kv := range o.inputs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--input %q: write it as name=value", kv)
		}
		if out == nil {
			out = map[string]any{}
		}
		out[k] = parseInputValue(v)
	}
	return out, nil
}

// parseInputValue reads v as JSON when it is valid JSON, else as a string.
func parseInputValue(v string) any {
	if parsed, err := value.Decode([]byte(v)); err == nil {
		return parsed
	}
	return v
}

// parseWorkflowRef reads NAME or NAME@VERSION.
func parseWorkflowRef(s string) (*robonetv1.WorkflowRef, error) {
	name, ver, hasVer := strings.Cut(s, "@")
	if name == "" {
		return nil, fmt.Errorf("--workflow %q: want NAME or NAME@VERSION", s)
	}
	ref := &robonetv1.WorkflowRef{Name: name}
	if hasVer {
		n, err := strconv.ParseUint(ver, 10, 32)
		if err != nil || n == 0 {
			return nil, fmt.Errorf("--workflow %q: the version must be a positive whole number", s)
		}
		ref.Version = uint32(n)
	}
	return ref, nil
}
