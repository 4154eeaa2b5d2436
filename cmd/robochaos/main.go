// Command robochaos runs the chaos test of package chaos against the
// repository's docker-compose mesh: a workload of workflows submitted
// through the API while a nemesis kills, pauses and cuts off nodes and
// restarts Postgres, then a checker that proves nothing acknowledged was
// lost, duplicated, wrong or stuck — the database's primary host lost
// included. Build the images and secrets first
// (make images compose-secrets); `make chaos` and `make chaos-smoke` do.
//
//	robochaos --duration 30m --out chaos-out
//	robochaos --smoke
//	robochaos --faults kill-postgres-primary --replication async --standby-lag 2s   # the checker must see loss
//
// Exit codes: 0 the checker passed, 1 it did not or the run failed, 2
// usage.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/robonet/robonet/chaos"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	fs := flag.NewFlagSet("robochaos", flag.ContinueOnError)
	cfg := chaos.Config{}
	fs.StringVar(&cfg.Dir, "dir", ".", "repository root: docker-compose.yml, .env and deploy/secrets")
	fs.StringVar(&cfg.Project, "project", fmt.Sprintf("robonet-chaos-%d", os.Getpid()), "docker-compose project name (brought up and removed)")
	fs.DurationVar(&cfg.Duration, "duration", 30*time.Minute, "how long the workload runs under faults (ignored by --smoke)")
	fs.BoolVar(&cfg.Smoke, "smoke", false, "inject every fault kind once, in order, then check (a few minutes)")
	fs.Float64Var(&cfg.Rate, "rate", 20, "workflow submissions per second")
	replication := fs.String("replication", string(chaos.Synchronous), "the database's replication: sync (a commit acknowledged once a standby has it) or async (on the primary alone: to see the checker count what a lost primary loses)")
	fs.DurationVar(&cfg.Hold, "hold", 10*time.Second, "how long each fault lasts before it is healed (past the 3 s heartbeat deadline)")
	fs.DurationVar(&cfg.Gap, "gap", 15*time.Second, "quiet time after each fault")
	fs.DurationVar(&cfg.StandbyLag, "standby-lag", 0, "before each kill-postgres-primary, stop the primary's WAL senders this long (e.g. 2s) so that the standbys fall behind: with --replication async what they missed is lost, and the checker must say so; with sync, commits wait instead")
	fs.DurationVar(&cfg.Drain, "drain", 5*time.Minute, "how long to wait for the instances still running once everything is healed")
	fs.StringVar(&cfg.Out, "out", "chaos-out", "directory the report goes to (chaos-report.json, .md, chaos-timeline.svg)")
	fs.BoolVar(&cfg.Keep, "keep", false, "leave the mesh up afterwards (remove it with docker-compose -p PROJECT down -v)")
	faults := fs.String("faults", "", "inject these fault kinds once each, in order, comma-separated (e.g. kill-waggler,pause-worker), instead of --smoke's or at random")
	render := fs.String("render", "", "write the Markdown and the timeline of an earlier run's chaos-report.json into --out, and exit")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 || cfg.Rate <= 0 || cfg.Hold <= 0 || cfg.Gap < 0 || cfg.Duration <= 0 || cfg.StandbyLag < 0 {
		fmt.Fprintln(os.Stderr, "robochaos: takes no arguments; --rate, --hold and --duration must be positive, --gap not negative")
		return 2
	}
	switch cfg.Replication = chaos.Replication(*replication); cfg.Replication {
	case chaos.Synchronous, chaos.Asynchronous:
	default:
		fmt.Fprintf(os.Stderr, "robochaos: --replication %q: say sync or async\n", *replication)
		return 2
	}
	if *render != "" {
		if err := chaos.Render(*render, cfg.Out); err != nil {
			fmt.Fprintln(os.Stderr, "robochaos:", err)
			return 1
		}
		return 0
	}
	for _, k := range strings.Split(*faults, ",") {
		if k = strings.TrimSpace(k); k == "" {
			continue
		}
		if !slices.Contains(chaos.AllFaults, chaos.FaultKind(k)) {
			fmt.Fprintf(os.Stderr, "robochaos: --faults: unknown fault %q; the faults are %v\n", k, chaos.AllFaults)
			return 2
		}
		cfg.Faults = append(cfg.Faults, chaos.FaultKind(k))
	}
	cfg.Command = "robochaos " + strings.Join(args, " ")
	log, err := zap.NewDevelopment()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = log.Sync() }()
	cfg.Log = log.Named("chaos")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := chaos.Run(ctx, cfg)
	if rep != nil {
		_ = rep.WriteMarkdown(os.Stdout, "")
		fmt.Printf("\nreport: %s/chaos-report.md, chaos-report.json, chaos-timeline.svg\n", cfg.Out)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "robochaos:", err)
		return 1
	}
	return 0
}
