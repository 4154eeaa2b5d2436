package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/robonet/robonet/internal/bench"
)

// newBenchCmd is `robonode bench`: throughput and latency through the
// public gRPC API, against robonode processes it starts itself.
func newBenchCmd(stdout, stderr io.Writer) *cobra.Command {
	var (
		cfg       bench.Config
		scenarios string
		rates     string
		output    string
		short     bool
		check     string
		save      string
	)
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure throughput and latency through the gRPC API, submissions included",
		Long: `bench starts robonode processes on loopback (this binary) and drives them
through the public gRPC API as a user's program would, submissions
included. Every scenario runs on fresh processes (and, with --postgres, a
fresh database, dropped afterwards):

  spread        one instance of a 100,000-wide echo spread
  chains        2,000 instances of a 10-task echo chain, 32 concurrent SubmitWorkflow callers
  chains-batch  the same through SubmitWorkflows, 1,000 instances a call
  diamonds      200 instances of a 46-task DAG of five fan-out/join stages
  latency       one-task instances submitted open loop at 100, 500 and 1,000 a second
  mesh-spread   spread with the tasks on three worker nodes (a server serving none)
  mesh-chains   chains with the tasks on three worker nodes

and, only when named (it needs --postgres and, as root, a cgroup CPU
controller: cgroup v1 at /sys/fs/cgroup/cpu or v2 at /sys/fs/cgroup):

  partitions    the same workload against 1, 2 and 3 servers on one Postgres,
                each server capped at --server-cpus in a cgroup of its own,
                two uncapped worker-only nodes serving core (holding the
                Wagglers): --chains chains through SubmitWorkflows and
                --spreads spreads of --spreads-width, through every
                server's API. It prints tasks/s and its ratio to one
                server, each process's CPU (Postgres' too), the share of
                the CPU the caps left that the uncapped processes used
                (under 60% or the run is flagged), the busiest server's
                CPU per 1,000 tasks, and a verdict against the target of
                issue 34 that never fails the command

With --placement split the server (and the single node a mesh scenario is
compared with) runs on the first half of the CPUs and the worker nodes on
the other half, as worker nodes on machines of their own would: the mesh
scenarios then measure what crossing nodes costs the server, not what
sharing its CPUs with three more processes does. --worker-gomaxprocs 1
gives each worker node one scheduler thread, as a container limit of one
CPU would.

It prints tasks and submissions per second, submission and dispatch
latency, each process's CPU and peak RSS and, on Postgres, the bytes of
write-ahead log per task beside a stored result row's size. With
--postgres it first measures the reference in the same run: COPY of rows
shaped like runner_actions_done into the same server, as fast as it takes
them (three times, each on a fresh database; the median counts), and
reports each scenario's tasks/s as a share of it. Ratios hold on
a busy machine where absolute figures do not: --check FILE fails (exit 1)
when a ratio falls more than 20% below the baseline FILE holds (written by
--save-baseline FILE). On a noisy machine one run's ratio can be far off:
--rounds N runs the scenarios N times in turn and reports each figure's
median and range (the baseline and the check use the medians).`,
		Example: `  robonode bench --scenarios spread,chains
  robonode bench --postgres postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable -o json
  robonode bench --postgres $DSN --short --check docs/bench-baseline.json
  robonode bench --scenarios chains,mesh-chains --rounds 5
  robonode bench --scenarios partitions --postgres $DSN --server-cpus 0.25
  robonode bench --scenarios waits --waits 100000`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "table" && output != "json" {
				return fmt.Errorf("-o %q: want table or json", output)
			}
			if scenarios != "" {
				cfg.Scenarios = strings.Split(scenarios, ",")
			}
			for r := range strings.SplitSeq(rates, ",") {
				n, err := strconv.Atoi(strings.TrimSpace(r))
				if err != nil || n < 1 {
					return fmt.Errorf("--rates %q: want rates a second, e.g. 100,500,1000", rates)
				}
				cfg.Rates = append(cfg.Rates, n)
			}
			if short {
				shorten(&cfg, cmd)
			}
			exe, err := os.Executable()
			if err != nil {
				return runtimeError{fmt.Errorf("finding this robonode binary to run: %w", err)}
			}
			if len(cfg.Robonode) == 0 {
				cfg.Robonode = []string{exe}
			}
			cfg.Progress = stderr
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			rep, err := bench.Run(ctx, cfg)
			if errors.Is(err, bench.ErrConfig) {
				return err // a usage error: nothing started
			}
			if err != nil {
				return runtimeError{err}
			}
			rep.Command = "robonode " + strings.Join(redactArgs(os.Args[1:]), " ")
			if output == "json" {
				enc := json.NewEncoder(stdout)
				enc.SetIndent("", "  ")
				if err := enc.Encode(rep); err != nil {
					return err
				}
			} else {
				printReport(stdout, rep)
			}
			if save != "" {
				if err := bench.SaveBaseline(save, rep); err != nil {
					return runtimeError{err}
				}
				fmt.Fprintf(stderr, "baseline written to %s\n", save)
			}
			if check != "" {
				lines, err := bench.Check(check, rep)
				for _, l := range lines {
					fmt.Fprintln(stderr, l)
				}
				if err != nil {
					return runtimeError{err}
				}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Postgres, "postgres", "", "a Postgres server (URL DSN; the role must be allowed to create databases): run on it and measure the COPY reference; default SQLite")
	f.StringVar(&scenarios, "scenarios", "", "comma-separated scenarios to run (default all: "+strings.Join(bench.AllScenarios, ",")+"; "+
		strings.Join(bench.NamedScenarios, ",")+" only when named)")
	f.IntVar(&cfg.SpreadWidth, "spread-width", 100_000, "tasks of the spread scenarios")
	f.IntVar(&cfg.Chains, "chains", 2000, "instances of the chain scenarios (and of the partitions scenario's chains, in all, shared out over its servers)")
	f.IntVar(&cfg.ChainClients, "clients", 32, "concurrent submitters of the chain and diamond scenarios")
	f.IntVar(&cfg.BatchSize, "batch-size", 1000, "instances per SubmitWorkflows call in chains-batch and partitions (at most 1000)")
	f.IntVar(&cfg.Diamonds, "diamonds", 200, "instances of the diamond scenario")
	f.StringVar(&rates, "rates", "100,500,1000", "the latency scenario's offered rates, submissions a second")
	f.DurationVar(&cfg.RateDuration, "rate-duration", 10*time.Second, "how long the latency scenario submits at each rate")
	f.IntVar(&cfg.CopyRows, "copy-rows", 200_000, "rows the COPY reference writes")
	f.IntVar(&cfg.Slots, "slots", 64, "core slots of each node")
	f.Float64Var(&cfg.ServerCPUs, "server-cpus", 0.25, "the partitions scenario's CPU cap of each server, in CPUs (a cgroup's CFS quota)")
	f.IntVar(&cfg.Spreads, "spreads", 50, "spread instances of the partitions scenario, beside its --chains chains")
	f.IntVar(&cfg.SpreadsWidth, "spreads-width", 2000, "tasks of each spread of the partitions scenario")
	f.IntVar(&cfg.Waits, "waits", 100_000, "instances of the waits scenario, each parked in a wait for a signal, then sent one")
	f.IntVar(&cfg.WorkerProcs, "worker-gomaxprocs", 0, "GOMAXPROCS of each worker node of the mesh scenarios, as a container CPU limit sets it (0: Go's default, every CPU)")
	f.StringVar(&cfg.Placement, "placement", bench.Shared, "where the processes run: shared (every process on every CPU) or split (the server and the single node on half the CPUs, the worker nodes on the other half, as on machines of their own; Linux)")
	f.IntVar(&cfg.Rounds, "rounds", 1, "run every scenario this many times, in turn, and report the medians (a mesh scenario is compared with the single node of its own round)")
	f.StringVar(&cfg.ProfileDir, "profile", "", "directory to write each node's CPU profile to, one file per scenario and node (go tool pprof FILE)")
	f.StringVar(&cfg.LogDir, "logs", "", "directory to write each node's log to, one file per scenario and node (to see afterwards why a run was slow)")
	f.BoolVar(&short, "short", false, "a short run for regression checks (spread and copy a fifth, chains half, latency at 500/s for 3s) unless sizes are given")
	f.StringVarP(&output, "output", "o", "table", "table or json")
	f.StringVar(&check, "check", "", "compare the ratios to COPY with the baseline in this file; exit 1 if one fell more than 20%")
	f.StringVar(&save, "save-baseline", "", "write this run's ratios to COPY as the baseline to this file")
	return cmd
}

// shorten scales the sizes the user did not set down for a quick run.
func shorten(cfg *bench.Config, cmd *cobra.Command) {
	set := func(name string, v *int, short int) {
		if !cmd.Flags().Changed(name) {
			*v = short
		}
	}
	set("spread-width", &cfg.SpreadWidth, 20_000)
	set("chains", &cfg.Chains, 1000)
	set("diamonds", &cfg.Diamonds, 200) // 0.1 s at 40: too short to measure
	set("copy-rows", &cfg.CopyRows, 100_000)
	if !cmd.Flags().Changed("rates") {
		cfg.Rates = []int{500}
	}
	if !cmd.Flags().Changed("rate-duration") {
		cfg.RateDuration = 3 * time.Second
	}
}

// redactArgs hides a password in a --postgres DSN.
func redactArgs(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = a
		if i > 0 && args[i-1] == "--postgres" {
			out[i] = "$DSN"
		} else if v, ok := strings.CutPrefix(a, "--postgres="); ok && v != "" {
			out[i] = "--postgres=$DSN"
		}
	}
	return out
}

func printReport(w io.Writer, rep *bench.Report) {
	fmt.Fprintf(w, "%s, %d CPUs, store %s, placement %s", rep.Date.Format(time.RFC3339), rep.CPUs, rep.Store, rep.Placement)
	if rep.WorkerProcs > 0 {
		fmt.Fprintf(w, ", worker nodes at GOMAXPROCS=%d", rep.WorkerProcs)
	}
	fmt.Fprintln(w)
	if rep.CopyRowsPerSec > 0 {
		runs := make([]string, len(rep.CopyRuns))
		for i, r := range rep.CopyRuns {
			runs[i] = fmt.Sprintf("%.0f", r)
		}
		fmt.Fprintf(w, "reference: COPY %.0f rows/s (the median of %s)\n", rep.CopyRowsPerSec, strings.Join(runs, ", "))
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SCENARIO\tTASKS\tSECONDS\tTASKS/S\tSUBMITS/S\tOF COPY\tOF ONE NODE\tWAL B/TASK\tROW B")
	for _, r := range rep.Results {
		name := roundLabel(r)
		fmt.Fprintf(tw, "%s\t%d\t%.2f\t%.0f\t%.0f\t%s\t%s\t%s\t%s\n", name, r.Tasks, r.Seconds, r.TasksPerS, r.SubmitsPerS,
			ratio(r.OfCopy, false), ratio(r.OfSingle, true), num(r.WALBytesPerTask), num(r.ResultRowBytes))
	}
	_ = tw.Flush()

	if len(rep.Medians) > 0 {
		fmt.Fprintf(w, "\nmedians of %d rounds (least – greatest)\n", rep.Rounds)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "SCENARIO\tTASKS/S\tOF COPY\tOF ONE NODE")
		for _, m := range rep.Medians {
			fmt.Fprintf(tw, "%s\t%.0f (%.0f – %.0f)\t%s\t%s\n", m.Label(), m.TasksPerS.Median, m.TasksPerS.Min, m.TasksPerS.Max,
				ratioRange(m.OfCopy, false), ratioRange(m.OfSingle, true))
		}
		_ = tw.Flush()
	}

	var lat []bench.Result
	for _, r := range rep.Results {
		if r.Rate > 0 {
			lat = append(lat, r)
		}
	}
	if len(lat) > 0 {
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "RATE/S\tSUBMIT P50/P95/P99 MS\tFIRST DISPATCH P50/P95/P99 MS\tSTART TO RECORDED P50/P95/P99 MS")
		for _, r := range lat {
			fmt.Fprintf(tw, "%d%s\t%s\t%s\t%s\n", r.Rate, roundSuffix(r), pcts(r.Submit), pcts(r.Dispatch), pcts(r.Record))
		}
		_ = tw.Flush()
	}

	printScaling(w, rep)

	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SCENARIO\tPROCESS\tCPU S\tPEAK RSS MIB\tCAP")
	for _, r := range rep.Results {
		name := roundLabel(r)
		for _, n := range r.Nodes {
			limit := "-"
			if n.CapCPUs > 0 {
				limit = fmt.Sprintf("%g CPUs, throttled in %.0f%% of periods", n.CapCPUs, 100*n.Throttled)
			}
			fmt.Fprintf(tw, "%s\t%s\t%.2f\t%s\t%s\n", name, n.Node, n.CPUSeconds, num(n.PeakRSSMiB), limit)
		}
		fmt.Fprintf(tw, "%s\t(the bench's clients)\t%.2f\t-\t-\n", name, r.ClientCPUSeconds)
	}
	_ = tw.Flush()
	for _, v := range rep.Verdicts {
		fmt.Fprintf(w, "\n%s\n", v)
	}
}

// printScaling prints the partitions scenario's runs: throughput and
// CPU against one server's, and whether the servers were the bound.
func printScaling(w io.Writer, rep *bench.Report) {
	var runs []bench.Result
	for _, r := range rep.Results {
		if r.Scaling != nil {
			runs = append(runs, r)
		}
	}
	if len(runs) == 0 {
		return
	}
	sc := runs[0].Scaling
	fmt.Fprintf(w, "\npartitions: each server capped at %g CPUs (%s); the worker nodes and Postgres uncapped, on %d CPUs in all\n",
		sc.CapCPUs, sc.Cgroup, sc.CPUs)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVERS\tTASKS/S\tOF 1 SERVER\tBUSIEST SERVER\tITS CPU S/1K TASKS\tOF 1 SERVER\tUNCAPPED CPU S\tOF CPU LEFT\tPARTITIONS")
	for _, r := range runs {
		s := r.Scaling
		owners := make([]string, 0, len(s.Owners))
		for o, n := range s.Owners {
			owners = append(owners, fmt.Sprintf("%s %d", cmp.Or(o, "none"), n))
		}
		slices.Sort(owners)
		fmt.Fprintf(tw, "%d%s\t%.0f\t%.2f×\t%s\t%.3f\t%.2f×\t%.2f\t%.0f%%\t%s: %s\n", s.Servers, roundSuffix(r), r.TasksPerS, s.OfOneServer,
			s.BusiestServer, s.BusiestCPUPer1k, s.BusiestOfOneServer, s.UncappedCPUSeconds, 100*s.UncappedShare, s.Placement, strings.Join(owners, ", "))
	}
	_ = tw.Flush()
	for _, r := range runs {
		if warn := r.Scaling.Warning(); warn != "" {
			fmt.Fprintln(w, warn)
		}
	}
}

// roundLabel is a run's label with its round, when there are several.
func roundLabel(r bench.Result) string { return r.Label() + roundSuffix(r) }

func roundSuffix(r bench.Result) string {
	if r.Round > 0 {
		return fmt.Sprintf(" #%d", r.Round)
	}
	return ""
}

// ratioRange prints a ratio's median and range over the rounds.
func ratioRange(v bench.Range, percent bool) string {
	if v.Median == 0 {
		return "-"
	}
	return fmt.Sprintf("%s (%s – %s)", ratio(v.Median, percent), ratio(v.Min, percent), ratio(v.Max, percent))
}

func ratio(v float64, percent bool) string {
	switch {
	case v == 0:
		return "-"
	case percent:
		return fmt.Sprintf("%.0f%%", 100*v)
	}
	return fmt.Sprintf("%.2f", v)
}

func num(v float64) string {
	if v == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f", v)
}

func pcts(p *bench.Percentiles) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprintf("%.1f / %.1f / %.1f", p.P50, p.P95, p.P99)
}
