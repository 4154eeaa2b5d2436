package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/robonet/robonet/internal/client"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// The commands on an instance's life beyond submit and cancel: signal,
// events publish, retry, pause and resume.

// payloadFlags are --data JSON and --data-file FILE ("-": stdin).
type payloadFlags struct {
	data, file string
}

func (p *payloadFlags) add(cmd *cobra.Command, what string) {
	cmd.Flags().StringVar(&p.data, "data", "", "the "+what+"'s payload, a JSON value (default null)")
	cmd.Flags().StringVar(&p.file, "data-file", "", "read the "+what+"'s payload (JSON) from this file; - reads stdin")
}

// read returns the payload as JSON text, "" for none (null). Both flags,
// or text that is not JSON, are usage errors.
func (p *payloadFlags) read(cmd *cobra.Command) (string, error) {
	data := p.data
	from := "--data"
	switch {
	case cmd.Flags().Changed("data") && cmd.Flags().Changed("data-file"):
		return "", errors.New("--data and --data-file both give the payload: use one of them")
	case cmd.Flags().Changed("data-file"):
		from = "--data-file " + p.file
		var (
			b   []byte
			err error
		)
		if p.file == "-" {
			from = "--data-file - (stdin)"
			b, err = io.ReadAll(cmd.InOrStdin())
		} else {
			b, err = os.ReadFile(p.file)
		}
		if err != nil {
			return "", fmt.Errorf("--data-file: %w", err)
		}
		data = string(b)
	case !cmd.Flags().Changed("data"):
		return "", nil
	}
	if strings.TrimSpace(data) == "" {
		return "", fmt.Errorf("%s: empty; give a JSON value (null for none)", from)
	}
	if !json.Valid([]byte(data)) {
		return "", fmt.Errorf(`%s: not valid JSON (quote a string: --data '"yes"')`, from)
	}
	return data, nil
}

// twoArgs is the Args of signal: an instance id and a signal name.
func twoArgs(cmd *cobra.Command, args []string) error {
	switch len(args) {
	case 0:
		return errors.New("missing an instance id and a signal name")
	case 1:
		return errors.New("missing the signal name (the one a task's wait: {signal: NAME} takes)")
	case 2:
		return nil
	}
	return fmt.Errorf("takes an instance id and a signal name, not %d arguments", len(args))
}

func newSignalCmd(g *globalOptions) *cobra.Command {
	var (
		output, key string
		payload     payloadFlags
	)
	cmd := &cobra.Command{
		Use:   "signal ID NAME [--data JSON | --data-file F] [--idempotency-key K]",
		Short: "Send a signal to a running instance",
		Long: `Send the signal NAME with a JSON payload to a running instance. A task that
waits for it (wait: {signal: NAME}) completes with the payload as its
output; if none waits yet, the signal is kept until one does. Sending a
signal no task of the workflow waits for, or to an instance that finished,
fails (exit 1). With --idempotency-key, the signal is delivered once however
many times it is sent.`,
		Example: `  roboctl signal 0b6f3c9e approve --data '{"by": "ada"}'
  roboctl signal 0b6f3c9e approve --data-file approval.json --idempotency-key ticket-42
  echo '"go"' | roboctl signal 0b6f3c9e approve --data-file -`,
		Args:              twoArgs,
		ValidArgsFunction: completeInstanceIDs(g),
		RunE: func(cmd *cobra.Command, args []string) error {
			format, err := client.ParseFormat(output)
			if err != nil {
				return err
			}
			data, err := payload.read(cmd)
			if err != nil {
				return err
			}
			name := args[1]
			return withInstance(cmd, g, args[0], func(wf robonetv1.WorkflowServiceClient, id string) error {
				var resp *robonetv1.SignalInstanceResponse
				if err := g.call(cmd.Context(), func(ctx context.Context) (err error) {
					resp, err = wf.SignalInstance(ctx, &robonetv1.SignalInstanceRequest{InstanceId: id, Name: name, PayloadJson: data, IdempotencyKey: key})
					return err
				}); err != nil {
					return g.fail(cmd, err)
				}
				if format != client.FormatTable {
					return client.WriteData(cmd.OutOrStdout(), format, map[string]any{"instance_id": id, "signal": name,
						"seq": resp.GetSeq(), "duplicate": resp.GetDuplicate(), "delivered": resp.GetDelivered()})
				}
				out := cmd.OutOrStdout()
				switch {
				case resp.GetDuplicate():
					fmt.Fprintf(out, "signal %s (#%d) was sent to %s before with this idempotency key: not sent again\n", name, resp.GetSeq(), id)
				case resp.GetDelivered():
					fmt.Fprintf(out, "signal %s (#%d) sent to %s: a waiting task took it\n", name, resp.GetSeq(), id)
				default:
					fmt.Fprintf(out, "signal %s (#%d) sent to %s: no task waits for it yet; it is kept until one does\n", name, resp.GetSeq(), id)
				}
				return nil
			})
		},
	}
	payload.add(cmd, "signal")
	cmd.Flags().StringVar(&key, "idempotency-key", "", "deliver the signal once per key, however many times it is sent")
	outputFlag(cmd, &output)
	return cmd
}

func newEventsCmd(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "events",
		Short: "Publish events that start workflows",
		Long: `A workflow with trigger: {events: [NAME]} gets an instance per published
event NAME, with the event's payload as its input named event.`,
	}
	cmd.AddCommand(newEventsPublishCmd(g))
	return cmd
}

func newEventsPublishCmd(g *globalOptions) *cobra.Command {
	var (
		output, key string
		payload     payloadFlags
	)
	cmd := &cobra.Command{
		Use:   "publish NAME --data JSON [--idempotency-key K]",
		Short: "Publish an event: start every workflow it triggers",
		Long: `Publish the event NAME: every registered workflow whose trigger lists it
starts an instance with the payload as its event input. With
--idempotency-key, each workflow starts once per key however many times
the event is published.`,
		Example: `  roboctl events publish order.created --data '{"order": 7}'
  roboctl events publish order.created --data-file order.json --idempotency-key order-7`,
		Args: oneArg("an event name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			format, err := client.ParseFormat(output)
			if err != nil {
				return err
			}
			data, err := payload.read(cmd)
			if err != nil {
				return err
			}
			wf, conn, err := g.connect()
			if err != nil {
				return g.fail(cmd, err)
			}
			defer func() { _ = conn.Close() }()
			var resp *robonetv1.PublishEventResponse
			if err := g.call(cmd.Context(), func(ctx context.Context) (err error) {
				resp, err = wf.PublishEvent(ctx, &robonetv1.PublishEventRequest{Name: args[0], PayloadJson: data, IdempotencyKey: key})
				return err
			}); err != nil {
				return g.fail(cmd, err)
			}
			type started struct {
				Workflow   string `json:"workflow"`
				Version    uint32 `json:"version"`
				InstanceID string `json:"instance_id"`
				Existing   bool   `json:"existing"`
			}
			if format != client.FormatTable {
				list := make([]started, 0, len(resp.GetStarted()))
				for _, s := range resp.GetStarted() {
					list = append(list, started{s.GetWorkflow(), s.GetVersion(), s.GetInstanceId(), s.GetExisting()})
				}
				return client.WriteData(cmd.OutOrStdout(), format, map[string]any{"event": args[0], "started": list})
			}
			out := cmd.OutOrStdout()
			if len(resp.GetStarted()) == 0 {
				fmt.Fprintf(out, "event %s published: no workflow is triggered by it (a workflow starts on it with trigger: {events: [%s]})\n", args[0], args[0])
				return nil
			}
			for _, s := range resp.GetStarted() {
				if s.GetExisting() {
					fmt.Fprintf(out, "instance %s of %s v%d was started by this event before (same idempotency key)\n", s.GetInstanceId(), s.GetWorkflow(), s.GetVersion())
				} else {
					fmt.Fprintf(out, "instance %s of %s v%d started\n", s.GetInstanceId(), s.GetWorkflow(), s.GetVersion())
				}
			}
			return nil
		},
	}
	payload.add(cmd, "event")
	cmd.Flags().StringVar(&key, "idempotency-key", "", "start each triggered workflow once per key")
	outputFlag(cmd, &output)
	return cmd
}

func newRetryCmd(g *globalOptions) *cobra.Command {
	var output, from string
	cmd := &cobra.Command{
		Use:   "retry ID [--from TASK]",
		Short: "Run a failed or cancelled instance again",
		Long: `Run a FAILED or CANCELLED instance again, from the tasks that did not
complete; the tasks that completed keep their outputs. With --from TASK,
that task and every task that depends on it run again too. The instance
keeps its id; its run number goes up by one. Follow it with roboctl watch
ID. Retrying an instance that is still running, or that completed, fails
(exit 1).`,
		Example: `  roboctl retry 0b6f3c9e
  roboctl retry 0b6f3c9e --from deploy`,
		Args:              oneArg("an instance id (or a unique prefix of one)"),
		ValidArgsFunction: completeInstanceIDs(g),
		RunE: onInstance(g, &output, func(cmd *cobra.Command, format client.Format, wf robonetv1.WorkflowServiceClient, id string) error {
			var resp *robonetv1.RetryInstanceResponse
			if err := g.call(cmd.Context(), func(ctx context.Context) (err error) {
				resp, err = wf.RetryInstance(ctx, &robonetv1.RetryInstanceRequest{InstanceId: id, FromTask: from})
				return err
			}); err != nil {
				return g.fail(cmd, err)
			}
			if format != client.FormatTable {
				return client.WriteData(cmd.OutOrStdout(), format, map[string]any{"instance_id": id, "run": resp.GetRun(),
					"tasks": append([]string{}, resp.GetTasks()...)})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "instance %s runs again (run %d): %s\n", id, resp.GetRun(), strings.Join(resp.GetTasks(), ", "))
			return nil
		}),
	}
	cmd.Flags().StringVar(&from, "from", "", "run this task and every task that depends on it again (default: the tasks that did not complete)")
	outputFlag(cmd, &output)
	return cmd
}

// newPauseCmd is roboctl pause (resume false) and roboctl resume.
func newPauseCmd(g *globalOptions, resume bool) *cobra.Command {
	var output, workflow string
	verb, done, short, long := "pause", "paused", "Hold an instance (or every live instance of a workflow) back",
		`Pause an instance: the attempts it runs finish, but no new one starts and
its timers wait until roboctl resume. Its state reads PAUSED meanwhile.
With --workflow NAME, every live instance of the workflow is paused (those
started later are not); the instances that could not be are listed and the
command exits 1.`
	if resume {
		verb, done, short, long = "resume", "resumed", "Resume a paused instance (or every paused instance of a workflow)",
			`Resume a paused instance: its tasks start again and its timers run. With
--workflow NAME, every live instance of the workflow is resumed; the
instances that could not be are listed and the command exits 1.`
	}
	cmd := &cobra.Command{
		Use:   verb + " (ID | --workflow NAME)",
		Short: short,
		Long:  long,
		Example: fmt.Sprintf(`  roboctl %s 0b6f3c9e
  roboctl %s --workflow deploy`, verb, verb),
		Args: func(cmd *cobra.Command, args []string) error {
			switch {
			case workflow != "" && len(args) > 0:
				return errors.New("give an instance id or --workflow NAME, not both")
			case workflow == "" && len(args) == 0:
				return errors.New("missing an instance id (or --workflow NAME for all of a workflow's instances)")
			case len(args) > 1:
				return fmt.Errorf("takes an instance id, not %d arguments", len(args))
			}
			return nil
		},
		ValidArgsFunction: completeInstanceIDs(g),
		RunE: func(cmd *cobra.Command, args []string) error {
			format, err := client.ParseFormat(output)
			if err != nil {
				return err
			}
			if workflow != "" {
				return pauseWorkflow(cmd, g, format, workflow, resume, done)
			}
			return withInstance(cmd, g, args[0], func(wf robonetv1.WorkflowServiceClient, id string) error {
				if err := g.call(cmd.Context(), func(ctx context.Context) (err error) {
					if resume {
						_, err = wf.ResumeInstance(ctx, &robonetv1.ResumeInstanceRequest{InstanceId: id})
					} else {
						_, err = wf.PauseInstance(ctx, &robonetv1.PauseInstanceRequest{InstanceId: id})
					}
					return err
				}); err != nil {
					return g.fail(cmd, err)
				}
				if format != client.FormatTable {
					return client.WriteData(cmd.OutOrStdout(), format, map[string]any{"instance_id": id, done: true})
				}
				fmt.Fprintf(cmd.OutOrStdout(), "instance %s %s\n", id, done)
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&workflow, "workflow", "", verb+" every live instance of this workflow")
	_ = cmd.RegisterFlagCompletionFunc("workflow", completeWorkflows(g))
	outputFlag(cmd, &output)
	return cmd
}

// pauseWorkflow pauses or resumes every live instance of a workflow and
// reports each one the node could not.
func pauseWorkflow(cmd *cobra.Command, g *globalOptions, format client.Format, workflow string, resume bool, done string) error {
	wf, conn, err := g.connect()
	if err != nil {
		return g.fail(cmd, err)
	}
	defer func() { _ = conn.Close() }()
	var resp *robonetv1.PauseWorkflowResponse
	if err := g.call(cmd.Context(), func(ctx context.Context) (err error) {
		resp, err = wf.PauseWorkflow(ctx, &robonetv1.PauseWorkflowRequest{Workflow: workflow, Resume: resume})
		return err
	}); err != nil {
		return g.fail(cmd, err)
	}
	if format != client.FormatTable {
		if err := client.WriteData(cmd.OutOrStdout(), format, map[string]any{"workflow": workflow,
			done: append([]string{}, resp.GetInstanceIds()...), "errors": append([]string{}, resp.GetErrors()...)}); err != nil {
			return err
		}
	} else {
		out := cmd.OutOrStdout()
		n := len(resp.GetInstanceIds())
		switch n {
		case 0:
			fmt.Fprintf(out, "no live instance of %s was %s\n", workflow, done)
		case 1:
			fmt.Fprintf(out, "1 instance of %s %s:\n", workflow, done)
		default:
			fmt.Fprintf(out, "%d instances of %s %s:\n", n, workflow, done)
		}
		for _, id := range resp.GetInstanceIds() {
			fmt.Fprintf(out, "  %s\n", id)
		}
	}
	if len(resp.GetErrors()) == 0 {
		return nil
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "roboctl: some instances of %s could not be %s:\n", workflow, done)
	for _, e := range resp.GetErrors() {
		fmt.Fprintf(cmd.ErrOrStderr(), "  %s\n", e)
	}
	return errFailed
}
