package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/robonet/robonet/internal/client"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

func newSchedulesCmd(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "schedules",
		Aliases: []string{"schedule", "sched"},
		Short:   "Run registered workflows on a cron expression or at an interval",
		Long: `Schedules start a registered workflow with fixed inputs on a cron expression
(five fields, UTC unless it starts with CRON_TZ=Area/City) or at a fixed
interval. The engine leader fires them; a slot starts one instance even
across leader changes. Slots missed while no leader ran are run once, then
the schedule moves on; slots missed while paused are not run.`,
	}
	cmd.AddCommand(newScheduleCreateCmd(g), newScheduleListCmd(g),
		newScheduleUpdateCmd(g, "pause", robonetv1.UpdateScheduleRequest_OP_PAUSE, "Stop a schedule firing"),
		newScheduleUpdateCmd(g, "resume", robonetv1.UpdateScheduleRequest_OP_RESUME, "Start a paused schedule again from its next slot"),
		newScheduleDeleteCmd(g))
	return cmd
}

// scheduleView is a schedule as roboctl prints it (-o json, yaml).
type scheduleView struct {
	Name           string          `json:"name"`
	Workflow       string          `json:"workflow"`
	Version        uint32          `json:"version,omitempty"`
	Inputs         json.RawMessage `json:"inputs"`
	Cron           string          `json:"cron,omitempty"`
	Interval       string          `json:"interval,omitempty"`
	Jitter         string          `json:"jitter,omitempty"`
	AllowDuplicate bool            `json:"allow_duplicate"`
	Paused         bool            `json:"paused"`
	NextRunAt      *time.Time      `json:"next_run_at,omitempty"`
	LastRunAt      *time.Time      `json:"last_run_at,omitempty"`
	LastInstanceID string          `json:"last_instance_id,omitempty"`
	LastSkipped    string          `json:"last_skipped,omitempty"`
	CreatedAt      *time.Time      `json:"created_at,omitempty"`
}

func viewSchedule(s *robonetv1.ScheduleInfo) scheduleView {
	v := scheduleView{
		Name: s.GetName(), Workflow: s.GetWorkflow().GetName(), Version: s.GetWorkflow().GetVersion(),
		Inputs: client.RawJSON(s.GetInputsJson()), Cron: s.GetCron(), AllowDuplicate: s.GetAllowDuplicate(),
		Paused: s.GetPaused(), LastInstanceID: s.GetLastInstanceId(), LastSkipped: s.GetLastSkipped(),
		NextRunAt: client.TimeOf(s.GetNextRunAt()), LastRunAt: client.TimeOf(s.GetLastRunAt()), CreatedAt: client.TimeOf(s.GetCreatedAt()),
	}
	if d := s.GetInterval(); d != nil {
		v.Interval = d.AsDuration().String()
	}
	if d := s.GetJitter(); d != nil {
		v.Jitter = d.AsDuration().String()
	}
	return v
}

// printSchedules writes schedules as a table.
func printSchedules(w io.Writer, list []*robonetv1.ScheduleInfo) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tWORKFLOW\tEVERY\tSTATE\tNEXT RUN\tLAST RUN\tLAST INSTANCE")
	for _, s := range list {
		v := viewSchedule(s)
		wf := v.Workflow
		if v.Version != 0 {
			wf = fmt.Sprintf("%s@%d", wf, v.Version)
		}
		every := v.Cron
		if every == "" {
			every = v.Interval
		}
		if v.Jitter != "" {
			every += " ±" + v.Jitter
		}
		state := "active"
		if v.Paused {
			state = "paused"
		}
		last := v.LastInstanceID
		if v.LastSkipped != "" {
			last = "skipped: " + v.LastSkipped
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", v.Name, wf, every, state, when(v.NextRunAt), when(v.LastRunAt), orDash(last))
	}
	_ = tw.Flush()
}

func when(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func newScheduleCreateCmd(g *globalOptions) *cobra.Command {
	var (
		workflow, cron, output string
		every, jitter          time.Duration
		allowDuplicate         bool
		in                     submitOptions // --input, --inputs
	)
	cmd := &cobra.Command{
		Use:   "create NAME --workflow NAME[@VERSION] (--cron EXPR | --every DURATION) [--input k=v]...",
		Short: "Create a schedule",
		Long: `Create a schedule. The inputs (--inputs FILE.json, then each --input k=v,
read as in submit) are checked against the workflow now. Without @VERSION
each run starts the latest version registered at that time.

--cron takes five fields (minute hour day-of-month month day-of-week) or
@hourly, @daily, @weekly, @monthly; --every takes whole seconds, at least 1s
(slots at multiples of it since the Unix epoch). --jitter delays each run by
up to that much, the same delay on every server. Without --allow-duplicate a
slot is skipped while the previous run is still active.`,
		Example: `  roboctl schedules create nightly-report --workflow report --cron "30 2 * * *" --input day=yesterday
  roboctl schedules create probe --workflow probe@3 --every 5m --jitter 30s`,
		Args: oneArg("the schedule's name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			format, err := client.ParseFormat(output)
			if err != nil {
				return err
			}
			if workflow == "" {
				return fmt.Errorf("--workflow is required: the registered workflow to run (roboctl workflows ls)")
			}
			ref, err := parseWorkflowRef(workflow)
			if err != nil {
				return err
			}
			inputs, err := in.collectInputs()
			if err != nil {
				return err
			}
			req := &robonetv1.CreateScheduleRequest{Name: args[0], Workflow: ref, InputsJson: inputs, Cron: cron, AllowDuplicate: allowDuplicate}
			if every != 0 {
				req.Interval = durationpb.New(every)
			}
			if jitter != 0 {
				req.Jitter = durationpb.New(jitter)
			}
			resp, err := askAPI(cmd, g, func(ctx context.Context, wf robonetv1.WorkflowServiceClient) (*robonetv1.CreateScheduleResponse, error) {
				return wf.CreateSchedule(ctx, req)
			})
			if err != nil {
				return err
			}
			return printSchedule(cmd, format, resp.GetSchedule(), "created")
		},
	}
	f := cmd.Flags()
	f.StringVar(&workflow, "workflow", "", "the registered workflow to run: NAME or NAME@VERSION")
	_ = cmd.RegisterFlagCompletionFunc("workflow", completeWorkflows(g))
	f.StringVar(&cron, "cron", "", `a cron expression, e.g. "*/15 * * * *" or @daily`)
	f.DurationVar(&every, "every", 0, "a fixed interval in whole seconds, e.g. 90s or 10m")
	f.DurationVar(&jitter, "jitter", 0, "delay each run by up to this much")
	f.BoolVar(&allowDuplicate, "allow-duplicate", false, "start a run while the previous one is still active (default: skip the slot)")
	f.StringArrayVar(&in.inputs, "input", nil, "an input as k=v (repeatable); v is JSON when it parses as JSON, else a string")
	f.StringVar(&in.inputsFile, "inputs", "", "a JSON file holding an object of inputs")
	outputFlag(cmd, &output)
	return cmd
}

// printSchedule prints one schedule after a change: a line saying what
// happened (table), or its data.
func printSchedule(cmd *cobra.Command, format client.Format, s *robonetv1.ScheduleInfo, what string) error {
	if format != client.FormatTable {
		return client.WriteData(cmd.OutOrStdout(), format, viewSchedule(s))
	}
	v := viewSchedule(s)
	next := "paused"
	if v.NextRunAt != nil {
		next = "next run " + when(v.NextRunAt)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "schedule %s %s (%s)\n", v.Name, what, next)
	return nil
}

func newScheduleListCmd(g *globalOptions) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List schedules: cadence, state, next and last run",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			format, err := client.ParseFormat(output)
			if err != nil {
				return err
			}
			resp, err := askAPI(cmd, g, func(ctx context.Context, wf robonetv1.WorkflowServiceClient) (*robonetv1.ListSchedulesResponse, error) {
				return wf.ListSchedules(ctx, &robonetv1.ListSchedulesRequest{})
			})
			if err != nil {
				return err
			}
			if format != client.FormatTable {
				views := make([]scheduleView, 0, len(resp.GetSchedules()))
				for _, s := range resp.GetSchedules() {
					views = append(views, viewSchedule(s))
				}
				return client.WriteData(cmd.OutOrStdout(), format, views)
			}
			if len(resp.GetSchedules()) == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "no schedules (roboctl schedules create --help)")
				return nil
			}
			printSchedules(cmd.OutOrStdout(), resp.GetSchedules())
			return nil
		},
	}
	outputFlag(cmd, &output)
	return cmd
}

func newScheduleUpdateCmd(g *globalOptions, use string, op robonetv1.UpdateScheduleRequest_Op, short string) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   use + " NAME",
		Short: short,
		Args:  oneArg("the schedule's name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			format, err := client.ParseFormat(output)
			if err != nil {
				return err
			}
			resp, err := askAPI(cmd, g, func(ctx context.Context, wf robonetv1.WorkflowServiceClient) (*robonetv1.UpdateScheduleResponse, error) {
				return wf.UpdateSchedule(ctx, &robonetv1.UpdateScheduleRequest{Name: args[0], Op: op})
			})
			if err != nil {
				return err
			}
			return printSchedule(cmd, format, resp.GetSchedule(), use+"d")
		},
	}
	outputFlag(cmd, &output)
	return cmd
}

func newScheduleDeleteCmd(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:     "delete NAME",
		Aliases: []string{"rm"},
		Short:   "Delete a schedule (the instances it started stay)",
		Args:    oneArg("the schedule's name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := askAPI(cmd, g, func(ctx context.Context, wf robonetv1.WorkflowServiceClient) (*robonetv1.DeleteScheduleResponse, error) {
				return wf.DeleteSchedule(ctx, &robonetv1.DeleteScheduleRequest{Name: args[0]})
			}); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "schedule %s deleted\n", args[0])
			return nil
		},
	}
}

// askAPI makes one WorkflowService call, with the connection, deadline and
// error reporting every command uses (askMesh's twin).
func askAPI[R any](cmd *cobra.Command, g *globalOptions, ask func(context.Context, robonetv1.WorkflowServiceClient) (R, error)) (R, error) {
	var resp R
	wf, conn, err := g.connect()
	if err != nil {
		return resp, g.fail(cmd, err)
	}
	defer func() { _ = conn.Close() }()
	if err := g.call(cmd.Context(), func(ctx context.Context) (err error) {
		resp, err = ask(ctx, wf)
		return err
	}); err != nil {
		return resp, g.fail(cmd, err)
	}
	return resp, nil
}
