package chaos

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/robonet/robonet/internal/connect"
)

// Config configures a chaos run.
type Config struct {
	// Dir is the repository root: docker-compose.yml, .env and
	// deploy/secrets (make images and make compose-secrets fill them).
	Dir string
	// Project names the compose project; it is brought up and removed.
	Project string
	// Duration is how long the workload runs with faults injected (a
	// smoke run lasts as long as injecting each fault once takes).
	Duration time.Duration
	// Smoke injects every fault kind once, in order, instead of at random.
	Smoke bool
	// Faults, when set, are injected once each, in order, instead (to
	// reproduce one).
	Faults []FaultKind
	// Rate is submissions per second.
	Rate float64
	// Hold is how long each fault lasts; Gap, the quiet time after each.
	Hold, Gap time.Duration
	// Drain bounds the wait for the instances still running at the end.
	Drain time.Duration
	// Replication is how the database replicates: Synchronous (the
	// default) or Asynchronous (a test that the checker sees loss).
	Replication Replication
	// StandbyLag, when set, stops the primary's WAL senders that long
	// before each kill-postgres-primary (see Nemesis.StandbyLag).
	StandbyLag time.Duration
	// Out is where the report goes (created).
	Out string
	// Keep leaves the mesh up afterwards.
	Keep bool
	// Command is how the run was started, for the report.
	Command string
	Log     *zap.Logger
}

// Run brings up the mesh, runs the workload under the nemesis, heals and
// drains, checks, and writes the report (chaos-report.json,
// chaos-report.md, chaos-timeline.svg in Out). It returns the report, and
// an error when the run could not be carried out or the verdict failed.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	log := cfg.Log
	env, err := readEnv(filepath.Join(cfg.Dir, ".env"))
	if err != nil {
		return nil, err
	}
	password := env["ROBONET_POSTGRES_PASSWORD"]
	if password == "" || env["ROBONET_GOSSIP_KEY"] == "" {
		return nil, fmt.Errorf("%s has no secrets: run make compose-secrets (and make images) first", filepath.Join(cfg.Dir, ".env"))
	}
	// Host ports: the three servers' APIs, the three data nodes and the
	// monitor.
	ports := make([]int, 7)
	for i := range ports {
		if ports[i], err = freePort(); err != nil {
			return nil, err
		}
	}
	subnet := 20 + 2*rand.IntN(100)
	c := &Compose{Project: cfg.Project, Dir: cfg.Dir, Env: []string{
		fmt.Sprintf("ROBONET_S1_PORT=%d", ports[0]), fmt.Sprintf("ROBONET_S2_PORT=%d", ports[1]),
		fmt.Sprintf("ROBONET_S3_PORT=%d", ports[2]), fmt.Sprintf("ROBONET_PG1_PORT=%d", ports[3]),
		fmt.Sprintf("ROBONET_PG2_PORT=%d", ports[4]), fmt.Sprintf("ROBONET_PG3_PORT=%d", ports[5]),
		fmt.Sprintf("ROBONET_MONITOR_PORT=%d", ports[6]),
		fmt.Sprintf("ROBONET_SUBNET=10.214.%d.0/24", subnet), fmt.Sprintf("ROBONET_PG_SUBNET=10.214.%d.0/24", subnet+1),
	}}
	db := &Database{Password: password, Ports: ports[3:6], MonitorPort: ports[6]}
	log.Info("bringing up the mesh", zap.String("project", cfg.Project))
	failed := true
	defer func() {
		if failed {
			lctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			fmt.Fprintln(os.Stderr, c.Logs(lctx, 60))
			cancel()
		}
		if !cfg.Keep {
			if err := c.Down(); err != nil {
				log.Warn("removing the mesh", zap.Error(err))
			}
		}
	}()
	if err := c.Up(ctx); err != nil {
		return nil, err
	}
	if err := until(ctx, 3*time.Minute, "every container to be healthy", func() (bool, error) { return c.Healthy(ctx, c.Services) }); err != nil {
		return nil, err
	}
	token, err := connect.ReadToken(filepath.Join(cfg.Dir, "deploy/secrets/api-token"))
	if err != nil {
		return nil, err
	}
	cl, err := NewClient([]string{
		fmt.Sprintf("127.0.0.1:%d", ports[0]), fmt.Sprintf("127.0.0.1:%d", ports[1]), fmt.Sprintf("127.0.0.1:%d", ports[2]),
	}, connect.Credentials{CAFile: filepath.Join(cfg.Dir, "deploy/secrets/robonet-ca.pem"), Token: token})
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	if err := until(ctx, 2*time.Minute, "six members alive and Wagglers for core and compute", func() (bool, error) {
		// Errors mean: not up yet; keep asking.
		alive, aerr := cl.Alive(ctx)
		roles, rerr := cl.Wagglers(ctx)
		return aerr == nil && rerr == nil && len(alive) == 6 && roles["core"] != "" && roles["compute"] != "", nil
	}); err != nil {
		return nil, err
	}

	if _, _, err := db.Settled(ctx, 2, 2*time.Minute); err != nil {
		return nil, fmt.Errorf("the replicated database: %w", err)
	}
	if cfg.Replication == Asynchronous {
		log.Warn("taking every standby out of the replication quorum: commits are acknowledged on the primary alone")
		if err := db.MakeAsynchronous(ctx); err != nil {
			return nil, err
		}
	}

	prefix := fmt.Sprintf("chaos-%d", time.Now().Unix())
	wl := &Workload{Client: cl, Kinds: Kinds(), Rate: cfg.Rate, Prefix: prefix, GiveUp: time.Minute}
	if err := wl.Register(ctx); err != nil {
		return nil, err
	}
	rep := &Report{Command: cfg.Command, Rate: cfg.Rate, Replication: cfg.Replication, StandbyLag: cfg.StandbyLag, Started: time.Now()}
	wctx, stopWorkload := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); wl.Run(wctx) }()
	nem := NewNemesis(c, cl, db, log, cfg.Hold)
	nem.StandbyLag = cfg.StandbyLag
	pause := func(d time.Duration) {
		select {
		case <-ctx.Done():
		case <-time.After(d):
		}
	}
	pause(cfg.Gap) // a quiet start: the baseline
	if cfg.Smoke || len(cfg.Faults) > 0 {
		kinds := cfg.Faults
		if len(kinds) == 0 {
			kinds = AllFaults
		}
		for _, k := range kinds {
			if ctx.Err() != nil {
				break
			}
			_ = nem.Inject(ctx, k)
			pause(cfg.Gap)
		}
	} else {
		end := rep.Started.Add(cfg.Duration)
		for ctx.Err() == nil && time.Now().Add(cfg.Hold+cfg.Gap).Before(end) {
			_ = nem.Inject(ctx, nem.Random())
			pause(cfg.Gap)
		}
		pause(time.Until(end))
	}
	stopWorkload()
	<-done
	// From here on the run always writes its report, whatever fails: a run
	// that cannot finish says what it saw, with the stuck counted.
	after := context.WithoutCancel(ctx)
	hctx, cancel := context.WithTimeout(after, 3*time.Minute)
	defer cancel()
	if err := nem.HealAll(hctx); err != nil {
		log.Warn("healing", zap.Error(err))
	}
	rep.Ended = time.Now()
	if err := until(hctx, 3*time.Minute, "every container to be healthy after healing", func() (bool, error) { return c.Healthy(hctx, c.Services) }); err != nil {
		log.Warn("checking anyway", zap.Error(err))
		rep.Notes = append(rep.Notes, "not every container was healthy after healing: "+err.Error())
	}
	subs := wl.Submissions()
	log.Info("healed; draining", zap.Int("submitted", len(subs)))
	chk := &Checker{Client: cl, DSN: db.DSN("robonet")}
	last := -1
	drain := cfg.Drain
	if ctx.Err() != nil {
		drain = min(drain, 30*time.Second) // interrupted: a short look, then the report
	}
	finals := chk.Drain(after, subs, drain, func(pending int) {
		if pending != last {
			log.Info("waiting for instances to finish", zap.Int("pending", pending))
			last = pending
		}
	})
	unchecked := ""
	rows, keys, err := chk.Rows(after)
	if err != nil {
		unchecked = err.Error()
		log.Error("the database's record could not be read; judging from the API alone", zap.Error(err))
	}
	rep.Verdict = Judge(wl.Kinds, subs, finals, rows, keys, prefix, unchecked)
	rep.Faults = Recover(nem.Faults(), rows)
	rep.Summarize(rows)
	if err := rep.write(cfg.Out); err != nil {
		return rep, err
	}
	if err := saveSlowLogs(after, c, rep.Faults, cfg.Out); err != nil {
		log.Warn("saving the logs of the slowest recoveries", zap.Error(err))
	}
	if !rep.Verdict.Passed() {
		return rep, errors.New("the checker found lost, duplicated, wrong, stuck or unexpected work, or could not read the database")
	}
	if worst, n := rep.WorstRejoin(); n > 0 && (worst < 0 || worst > RejoinLimit) {
		return rep, fmt.Errorf("a server cut off and healed took %s to be a voter that knows the leader again (limit %s)", rejoinText(worst), RejoinLimit)
	}
	failed = false
	return rep, nil
}

// Slow recoveries: the nodes' logs around the slowest few are saved with
// the report, so that where the time went can be read afterwards.
const (
	slowRecovery = 10 * time.Second
	slowKept     = 3
)

// saveSlowLogs writes, for each of the slowest recoveries (at least
// slowRecovery, at most slowKept of them), every container's log from just
// before the fault to just after the recovery into dir/slow-N-KIND.log.
func saveSlowLogs(ctx context.Context, c *Compose, faults []Fault, dir string) error {
	slow := slices.Clone(faults)
	slices.SortFunc(slow, func(a, b Fault) int { return cmp.Compare(max(b.Recovery, b.Stall), max(a.Recovery, a.Stall)) })
	var errs []error
	for i, f := range slow {
		took := max(f.Recovery, f.Stall)
		if i == slowKept || took < slowRecovery {
			break
		}
		var b strings.Builder
		fmt.Fprintf(&b, "fault %s on %s at %s, healed %s; recovery %s, stall %s\n",
			f.Kind, strings.Join(f.Targets, ","), f.At.UTC().Format(time.RFC3339Nano), f.Healed.UTC().Format(time.RFC3339Nano), f.Recovery, f.Stall)
		for _, svc := range allServices() {
			out, err := c.LogsBetween(ctx, svc, f.At.Add(-5*time.Second), f.At.Add(took+5*time.Second))
			if err != nil {
				errs = append(errs, err)
				continue
			}
			fmt.Fprintf(&b, "\n===== %s =====\n%s", svc, out)
		}
		name := filepath.Join(dir, fmt.Sprintf("slow-%d-%s.log", i+1, f.Kind))
		if err := os.WriteFile(name, []byte(b.String()), 0o644); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Render reads a report written by Run and writes its three files into
// dir again (a new picture of an old run).
func Render(reportJSON, dir string) error {
	b, err := os.ReadFile(reportJSON)
	if err != nil {
		return err
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return fmt.Errorf("%s: %w", reportJSON, err)
	}
	return r.write(dir)
}

// write writes the report's three files into dir.
func (r *Report) write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, w := range map[string]func(f *os.File) error{
		"chaos-report.json":  func(f *os.File) error { return r.WriteJSON(f) },
		"chaos-report.md":    func(f *os.File) error { return r.WriteMarkdown(f, "chaos-timeline.svg") },
		"chaos-timeline.svg": func(f *os.File) error { return r.WriteSVG(f) },
	} {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		err = w(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("writing %s: %w", name, err)
		}
	}
	return nil
}

// until polls cond every second until it holds, fails, or limit passes.
func until(ctx context.Context, limit time.Duration, what string, cond func() (bool, error)) error {
	deadline := time.Now().Add(limit)
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s waiting for %s", limit, what)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// readEnv reads KEY=VALUE lines.
func readEnv(file string) (map[string]string, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("%w: run make images and make compose-secrets first", err)
	}
	defer func() { _ = f.Close() }()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			out[k] = v
		}
	}
	return out, sc.Err()
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}
