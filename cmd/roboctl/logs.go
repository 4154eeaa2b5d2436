package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/robonet/robonet/internal/client"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// logsOptions are the flags of roboctl logs.
type logsOptions struct {
	attempt    uint32
	follow     bool
	stdoutOnly bool
	stderrOnly bool
	timestamps bool
	output     string
}

func newLogsCmd(g *globalOptions) *cobra.Command {
	var o logsOptions
	cmd := &cobra.Command{
		Use:   "logs ID [TASK]",
		Short: "Print what a task's process wrote to stderr and stdout",
		Long: `Print the log of a task's attempt: the lines its process wrote to stderr
and stdout (exec actions), or its worker program sent (WorkerLog), kept on
the node that ran it. Any node answers: it fetches the log from the node
that holds it.

TASK names a task, one instance of a spread task as name[index], or one
iteration of a loop as name#iteration (poll#3). Without
--attempt it is the latest attempt. The process's stdout lines go to
roboctl's stdout and its stderr lines to roboctl's stderr, in the order they
were written (so 2>/dev/null keeps only stdout); --stdout or --stderr keeps
one stream. With --follow, roboctl waits for the task to start and keeps
printing until it ends, through its retries.

Without TASK (or with a spread or loop task's name), it prints the latest
attempt of every task (or of every instance of the spread, or iteration of
the loop), each line prefixed by its task. By default a node keeps each attempt's last 4 MiB, 1 GiB in all, for
72 hours (robonode --limit task-log-attempt-bytes, task-log-bytes and
task-log-retention; docs/limits.md).`,
		Args: func(cmd *cobra.Command, args []string) error {
			switch {
			case len(args) == 0:
				return errors.New("missing an instance id (or a unique prefix of one)")
			case len(args) > 2:
				return fmt.Errorf("takes an instance id and a task, not %d arguments", len(args))
			case len(args) == 1 && o.follow:
				return errors.New("--follow follows one task: name it (roboctl logs ID TASK --follow)")
			case len(args) == 1 && o.attempt > 0:
				return errors.New("--attempt picks an attempt of one task: name it (roboctl logs ID TASK --attempt N)")
			case o.stdoutOnly && o.stderrOnly:
				return errors.New("--stdout and --stderr each keep one stream; leave both off for both")
			}
			return nil
		},
		ValidArgsFunction: completeInstanceIDs(g),
		Example: `  roboctl logs 0b6f3c9e build
  roboctl logs 0b6f3c9e build --attempt 1       # an earlier attempt
  roboctl logs 0b6f3c9e build -f                # until the task ends
  roboctl logs 0b6f3c9e 'scan[3]' --stderr
  roboctl logs 0b6f3c9e                         # every task, prefixed`,
		RunE: func(cmd *cobra.Command, args []string) error {
			format, err := client.ParseFormat(o.output)
			if err != nil {
				return err
			}
			if format == client.FormatYAML {
				return errors.New("-o yaml: logs print as text or as JSON lines (-o json)")
			}
			return withInstance(cmd, g, args[0], func(wf robonetv1.WorkflowServiceClient, id string) error {
				p := &logPrinter{opts: o, json: format == client.FormatJSON, instance: id,
					stdout: cmd.OutOrStdout(), stderr: cmd.ErrOrStderr()}
				task := ""
				if len(args) == 2 {
					task = args[1]
				}
				if err := printLogs(cmd.Context(), g, wf, p, id, task); err != nil {
					return g.fail(cmd, err)
				}
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.Uint32Var(&o.attempt, "attempt", 0, "the attempt to print (default: the latest)")
	f.BoolVarP(&o.follow, "follow", "f", false, "wait for the task to start and print until it ends, through its retries")
	f.BoolVar(&o.stdoutOnly, "stdout", false, "only the process's stdout")
	f.BoolVar(&o.stderrOnly, "stderr", false, "only the process's stderr")
	f.BoolVarP(&o.timestamps, "timestamps", "t", false, "prefix each line with the time the node read it (RFC 3339)")
	outputFlag(cmd, &o.output, "table", "json")
	return cmd
}

// printLogs prints one execution's log, or those of every execution of the
// instance (task == "") or of a spread task.
func printLogs(ctx context.Context, g *globalOptions, wf robonetv1.WorkflowServiceClient, p *logPrinter, id, task string) error {
	if strings.ContainsAny(task, "[#") {
		return streamLogs(ctx, g, wf, p, id, task)
	}
	var resp *robonetv1.GetInstanceResponse
	if err := g.call(ctx, func(ctx context.Context) (err error) {
		resp, err = wf.GetInstance(ctx, &robonetv1.GetInstanceRequest{InstanceId: id})
		return err
	}); err != nil {
		return err
	}
	var execs []string // executions whose latest attempt to print
	actions := map[string]string{}
	for _, t := range resp.GetInstance().GetTasks() {
		if task != "" && t.GetName() != task {
			continue
		}
		if task != "" && !t.GetSpread() && !t.GetLoop() {
			return streamLogs(ctx, g, wf, p, id, task) // one plain task (follow, attempts)
		}
		seen := map[int32]bool{}
		for _, a := range t.GetAttempts() {
			if !seen[a.GetIndex()] {
				seen[a.GetIndex()] = true
				exec := execID(t.GetName(), a.GetIndex(), t.GetLoop())
				execs = append(execs, exec)
				actions[exec] = t.GetAction()
			}
		}
	}
	if task != "" && len(execs) == 0 {
		return streamLogs(ctx, g, wf, p, id, task) // the node says why there is nothing
	}
	p.prefix = true
	var missing []string
	for _, exec := range execs {
		err := streamLogs(ctx, g, wf, p, id, exec)
		if status.Code(err) == codes.NotFound || status.Code(err) == codes.FailedPrecondition {
			if actions[exec] == "exec" {
				missing = append(missing, fmt.Sprintf("%s (%s)", exec, status.Convert(err).Message()))
			}
			continue
		}
		if err != nil {
			return err
		}
	}
	for _, m := range missing {
		fmt.Fprintf(p.stderr, "roboctl: no log of %s\n", m)
	}
	return nil
}

// execID is the task's name, name[index] for an instance of a spread, or
// name#index for an iteration of a loop.
func execID(name string, index int32, loop bool) string {
	switch {
	case index < 0:
		return name
	case loop:
		return fmt.Sprintf("%s#%d", name, index)
	}
	return fmt.Sprintf("%s[%d]", name, index)
}

// streamLogs prints the log of one execution.
func streamLogs(ctx context.Context, g *globalOptions, wf robonetv1.WorkflowServiceClient, p *logPrinter, id, exec string) error {
	req := &robonetv1.TaskLogsRequest{InstanceId: id, Task: exec, Attempt: p.opts.attempt, Follow: p.opts.follow}
	if !p.opts.follow {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, g.timeout)
		defer cancel()
	}
	stream, err := wf.TaskLogs(ctx, req)
	if err != nil {
		return err
	}
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		p.print(resp)
	}
}

// logPrinter prints log messages as they arrive.
type logPrinter struct {
	opts           logsOptions
	json           bool
	prefix         bool // prefix lines with their task
	instance       string
	stdout, stderr io.Writer

	task    string
	attempt uint32
	node    string
	headers int
}

// logLineJSON is a line of -o json.
type logLineJSON struct {
	InstanceID string `json:"instance_id"`
	Task       string `json:"task"`
	Attempt    uint32 `json:"attempt"`
	Node       string `json:"node"`
	Stream     string `json:"stream"`
	Time       string `json:"time"`
	Text       string `json:"text"`
}

func (p *logPrinter) print(resp *robonetv1.TaskLogsResponse) {
	if resp.GetTask() != "" {
		// A new attempt: said on stderr when following moves on to a retry.
		if p.opts.follow && p.headers > 0 && !p.json {
			fmt.Fprintf(p.stderr, "roboctl: attempt %d of %s, on node %s\n", resp.GetAttempt(), resp.GetTask(), resp.GetNode())
		}
		p.task, p.attempt, p.node = resp.GetTask(), resp.GetAttempt(), resp.GetNode()
		p.headers++
	}
	for _, l := range resp.GetLines() {
		st := l.GetStream()
		if p.opts.stdoutOnly && st != robonetv1.LogStream_LOG_STREAM_STDOUT ||
			p.opts.stderrOnly && st != robonetv1.LogStream_LOG_STREAM_STDERR {
			continue
		}
		if p.json {
			_ = client.WriteJSONLine(p.stdout, logLineJSON{InstanceID: p.instance, Task: p.task, Attempt: p.attempt, Node: p.node,
				Stream: strings.ToLower(strings.TrimPrefix(st.String(), "LOG_STREAM_")),
				Time:   l.GetTime().AsTime().Format(time.RFC3339Nano), Text: strings.ToValidUTF8(string(l.GetText()), "\uFFFD")})
			continue
		}
		var b strings.Builder
		if p.opts.timestamps {
			b.WriteString(l.GetTime().AsTime().Format(time.RFC3339Nano))
			b.WriteByte(' ')
		}
		if p.prefix {
			b.WriteString(p.task)
			b.WriteString(": ")
		}
		w := p.stdout
		switch st {
		case robonetv1.LogStream_LOG_STREAM_STDERR:
			w = p.stderr
		case robonetv1.LogStream_LOG_STREAM_NOTE:
			w = p.stderr
			b.WriteString("[roboNet] ")
		}
		b.Write(l.GetText())
		b.WriteByte('\n')
		_, _ = io.WriteString(w, b.String())
	}
}
