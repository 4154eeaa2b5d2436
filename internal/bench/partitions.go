package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"

	"github.com/robonet/robonet/internal/connect"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// The partitions scenario (issue 34) measures how throughput scales with
// the servers: the same workload against 1, 2 and 3 servers on one
// Postgres, each server capped at the same CPU quota (a cgroup of its
// own), small enough that the servers are the bound. Worker-only nodes
// serve core and so hold the Wagglers; they and Postgres are uncapped,
// and the run shows the CPU they used as a share of what the caps left
// them, so the bound is shown rather than assumed.

// partitionSizes are the server counts the scenario runs, in order; the
// first is the one the others are compared with.
var partitionSizes = []int{1, 2, 3}

// partitionWorkers is how many worker-only nodes serve core beside the
// servers.
const partitionWorkers = 2

// The targets of issue 34 (for the stage that spreads partitions over the
// servers) and the bound that makes a measurement valid.
const (
	targetTwo        = 1.7 // 2 servers' tasks/s over 1 server's, at least
	targetThree      = 2.4 // 3 servers' over 1 server's, at least
	targetBusiestCPU = 1.2 // the busiest server's CPU per 1,000 tasks at 3 servers over 1 server's, at most
	maxUncappedShare = 0.6 // the uncapped processes' CPU over what the caps left them, below
)

// Scaling is what the partitions scenario adds to a run's Result.
type Scaling struct {
	Servers int `json:"servers"`
	// CapCPUs is each server's CPU quota; Cgroup says how it is set.
	CapCPUs float64 `json:"cap_cpus"`
	Cgroup  string  `json:"cgroup"`
	// CPUs is what the machine gives the bench; Left the CPU seconds the
	// caps left the uncapped processes over the run,
	// (CPUs − Servers×CapCPUs) × Seconds.
	CPUs           int     `json:"cpus"`
	LeftCPUSeconds float64 `json:"left_cpu_seconds"`
	// UncappedCPUSeconds is what the worker nodes and Postgres used (the
	// bench's clients are in Result.ClientCPUSeconds); UncappedShare is
	// it over LeftCPUSeconds. PostgresRead is false when Postgres' CPU
	// could not be read (not a process of this machine): the share then
	// counts the worker nodes only.
	UncappedCPUSeconds float64 `json:"uncapped_cpu_seconds"`
	UncappedShare      float64 `json:"uncapped_share"`
	PostgresRead       bool    `json:"postgres_read"`
	// The server that used the most CPU, and its CPU seconds per 1,000
	// tasks.
	BusiestServer   string  `json:"busiest_server"`
	BusiestCPUPer1k float64 `json:"busiest_cpu_per_1k_tasks"`
	// OfOneServer is TasksPerS over the one-server run of the same round;
	// BusiestOfOneServer is BusiestCPUPer1k over that run's.
	OfOneServer        float64 `json:"of_one_server,omitempty"`
	BusiestOfOneServer float64 `json:"busiest_of_one_server,omitempty"`
	// Placement and Owners are where the partitions were at the end, from
	// ListPartitions: "leader" or "balanced", and partitions per server.
	Placement string         `json:"placement"`
	Owners    map[string]int `json:"owners"`
}

// Valid tells whether the servers were the bound: the uncapped processes
// used less than maxUncappedShare of the CPU left to them.
func (s *Scaling) Valid() bool { return s.PostgresRead && s.UncappedShare < maxUncappedShare }

// Warning is a line saying why the run does not show the servers as the
// bound; "" when it does.
func (s *Scaling) Warning() string {
	switch {
	case !s.PostgresRead:
		return fmt.Sprintf("WARNING: %d server(s): Postgres' CPU could not be read (not a process of this machine?): the worker nodes alone used %.0f%% of the CPU left to the uncapped processes; the bound is not shown",
			s.Servers, 100*s.UncappedShare)
	case s.UncappedShare >= maxUncappedShare:
		return fmt.Sprintf("WARNING: %d server(s): the worker nodes and Postgres used %.0f%% of the CPU the caps left them (want < %.0f%%): they, not the servers, may be the bound; cap the servers lower (--server-cpus)",
			s.Servers, 100*s.UncappedShare, 100*maxUncappedShare)
	}
	return ""
}

// scale fills what a run gives of s: the CPU share left to the uncapped
// processes and the busiest server's CPU per 1,000 tasks, from the
// processes' usage (servers first, then the others) and the run's length.
func (s *Scaling) scale(nodes []NodeUsage, tasks int, seconds float64) {
	s.UncappedCPUSeconds, s.BusiestServer, s.BusiestCPUPer1k = 0, "", 0
	busiest := -1.0
	for i, n := range nodes {
		if i < s.Servers {
			if n.CPUSeconds > busiest {
				busiest, s.BusiestServer = n.CPUSeconds, n.Node
			}
			continue
		}
		s.UncappedCPUSeconds += n.CPUSeconds
	}
	s.LeftCPUSeconds = (float64(s.CPUs) - float64(s.Servers)*s.CapCPUs) * seconds
	if s.LeftCPUSeconds > 0 {
		s.UncappedShare = s.UncappedCPUSeconds / s.LeftCPUSeconds
	}
	if tasks > 0 && busiest >= 0 {
		s.BusiestCPUPer1k = busiest / (float64(tasks) / 1000)
	}
}

// compare sets the ratios of each run of a round to its one-server run.
func compare(round []*Result) {
	var one *Result
	for _, r := range round {
		if r.Scaling != nil && r.Scaling.Servers == 1 {
			one = r
		}
	}
	if one == nil || one.TasksPerS <= 0 {
		return
	}
	for _, r := range round {
		if r.Scaling == nil {
			continue
		}
		r.Scaling.OfOneServer = r.TasksPerS / one.TasksPerS
		if one.Scaling.BusiestCPUPer1k > 0 {
			r.Scaling.BusiestOfOneServer = r.Scaling.BusiestCPUPer1k / one.Scaling.BusiestCPUPer1k
		}
	}
}

// verdicts gives a line per round with partitions runs, against the
// target of issue 34; it never fails the run (the stage where the leader
// owns every partition is expected to miss it).
func verdicts(results []Result) []string {
	rounds := map[int][]Result{}
	var order []int
	for _, r := range results {
		if r.Scaling == nil {
			continue
		}
		if _, ok := rounds[r.Round]; !ok {
			order = append(order, r.Round)
		}
		rounds[r.Round] = append(rounds[r.Round], r)
	}
	var out []string
	for _, round := range order {
		v := verdict(rounds[round])
		if round > 0 {
			v = fmt.Sprintf("round %d: %s", round, v)
		}
		out = append(out, v)
	}
	return out
}

// verdict is one round's line.
func verdict(rs []Result) string {
	const label = "target of issue 34 (2 servers ≥ 1.7×, 3 servers ≥ 2.4× one server's tasks/s; the busiest server's CPU per 1,000 tasks at 3 servers ≤ 1.2× one server's)"
	by := map[int]*Scaling{}
	for _, r := range rs {
		by[r.Scaling.Servers] = r.Scaling
	}
	one, two, three := by[1], by[2], by[3]
	if one == nil || two == nil || three == nil {
		return label + ": not measured (it needs the runs at 1, 2 and 3 servers)"
	}
	met := two.OfOneServer >= targetTwo && three.OfOneServer >= targetThree && three.BusiestOfOneServer <= targetBusiestCPU
	word := "NOT MET"
	if met {
		word = "MET"
	}
	s := fmt.Sprintf("%s: %s — 2 servers %.2f×, 3 servers %.2f×, busiest server's CPU per 1,000 tasks %.2f×",
		label, word, two.OfOneServer, three.OfOneServer, three.BusiestOfOneServer)
	var invalid []string
	for _, n := range partitionSizes {
		if sc := by[n]; !sc.Valid() {
			invalid = append(invalid, strconv.Itoa(n))
		}
	}
	if len(invalid) > 0 {
		s += fmt.Sprintf("; not a valid measurement at %s server(s): the servers were not shown to be the bound", strings.Join(invalid, ", "))
	}
	return s
}

// runPartitions runs the partitions scenario's sizes in turn and adds
// their results to rep.
func runPartitions(ctx context.Context, cfg *Config, rep *Report, round int) error {
	first := len(rep.Results)
	for _, n := range partitionSizes {
		r, err := runPartitionSize(ctx, cfg, n, round)
		if err != nil {
			return fmt.Errorf("%d server(s): %w", n, err)
		}
		rep.Results = append(rep.Results, r)
		var runs []*Result
		for i := first; i < len(rep.Results); i++ {
			runs = append(runs, &rep.Results[i])
		}
		compare(runs)
		fmt.Fprintf(cfg.Progress, "  %s\n", rep.Results[len(rep.Results)-1].summary())
		if w := r.Scaling.Warning(); w != "" {
			fmt.Fprintf(cfg.Progress, "  %s\n", w)
		}
	}
	return nil
}

// runPartitionSize runs the workload on a fresh mesh of servers servers.
func runPartitionSize(ctx context.Context, cfg *Config, servers, round int) (_ Result, err error) {
	label := Result{Scenario: Partitions, Scaling: &Scaling{Servers: servers}}.Label()
	if cfg.Rounds > 1 {
		label = fmt.Sprintf("%s-r%d", label, round)
	}
	fmt.Fprintf(cfg.Progress, "%s: starting %d server(s) capped at %g CPUs each (%s), %d worker nodes\n",
		label, servers, cfg.ServerCPUs, cfg.cgroups, partitionWorkers)
	t, err := startPartitions(ctx, cfg, label, servers)
	if err != nil {
		return Result{}, err
	}
	defer func() {
		if serr := t.stop(); err == nil && serr != nil {
			err = serr
		}
	}()
	before, err := t.usage()
	if err != nil {
		return Result{}, err
	}
	pg0, pgErr := clusterCPU(t.postmaster)
	client0 := selfCPU()
	fmt.Fprintf(cfg.Progress, "%s: running\n", label)
	r, err := runPartitionWork(ctx, t, cfg)
	if err != nil {
		return Result{}, fmt.Errorf("%w%s", err, t.errorLogs())
	}
	r.Scenario = Partitions
	if cfg.Rounds > 1 {
		r.Round = round
	}
	r.ClientCPUSeconds = (selfCPU() - client0).Seconds()
	nodes, err := t.nodeUsages(before)
	if err != nil {
		return Result{}, err
	}
	r.Nodes = append(r.Nodes, nodes...)
	sc := &Scaling{Servers: servers, CapCPUs: cfg.ServerCPUs, Cgroup: cfg.cgroups.String(), CPUs: cfg.cpus}
	if pgErr == nil {
		pg1, err := clusterCPU(t.postmaster)
		if err == nil {
			sc.PostgresRead = true
			r.Nodes = append(r.Nodes, NodeUsage{Node: "postgres", CPUSeconds: (pg1 - pg0).Seconds()})
		}
	}
	sc.scale(r.Nodes, r.Tasks, r.Seconds)
	if sc.Placement, sc.Owners, err = t.partitions(ctx); err != nil {
		return Result{}, err
	}
	r.Scaling = sc
	return r, nil
}

// startPartitions starts servers servers serving nothing, each capped,
// and partitionWorkers worker-only nodes serving core, on a fresh
// database; waits until every server names the same leader and every
// partition has an owner; and registers the workflows and runs an
// instance through every server's API.
func startPartitions(ctx context.Context, cfg *Config, label string, servers int) (*target, error) {
	t := &target{profiled: cfg.ProfileDir != "", poll: 50 * time.Millisecond}
	db, err := newDatabase(ctx, cfg.Postgres)
	if err != nil {
		return nil, err
	}
	t.db = db
	if t.postmaster, err = postmasterOf(ctx, db.dsn); err != nil {
		fmt.Fprintf(cfg.Progress, "%s: Postgres' CPU will not be shown: %v\n", label, err)
	}
	if t.dir, err = os.MkdirTemp("", "robonet-bench-"); err != nil {
		_ = t.stop()
		return nil, err
	}
	common := []string{"--grpc", "127.0.0.1:0", "--http", "off", "--gossip", "127.0.0.1:0", "--raft", "127.0.0.1:0",
		"--log-format", "json", "--log-level", "info", "--trust-peer", "*"}
	fail := func(err error) (*target, error) {
		if serr := t.stop(); serr != nil {
			err = errors.Join(err, serr)
		}
		return nil, err
	}
	var gossip string
	for i := 1; i <= servers; i++ {
		name := fmt.Sprintf("s%d", i)
		g, err := cfg.cgroups.newGroup(fmt.Sprintf("robonet-bench-%d-%s", os.Getpid(), name), cfg.ServerCPUs)
		if err != nil {
			return fail(err)
		}
		args := append(slices.Clone(common), "--name", name, "--data-dir", filepath.Join(t.dir, name), "--postgres", db.dsn,
			"--capability", "none", "--bootstrap-expect", strconv.Itoa(servers))
		if i > 1 {
			args = append(args, "--join", gossip, "--server")
		}
		p, err := startProc(ctx, cfg.Robonode, cfg.Env, nil, nodeFile(cfg.LogDir, label, name, ".log"), name, withProfile(cfg, label, name, args)...)
		if err != nil {
			_ = g.remove()
			return fail(err)
		}
		t.procs, t.caps = append(t.procs, p), append(t.caps, g)
		// From its start the process ran uncapped; what is measured
		// begins after the warm-up, long after this.
		if err := g.add(p.cmd.Process.Pid); err != nil {
			return fail(err)
		}
		if i == 1 {
			gossip = p.gossip
		}
	}
	core := fmt.Sprintf("core=%d", cfg.Slots)
	for i := 1; i <= partitionWorkers; i++ {
		name := fmt.Sprintf("w%d", i)
		args := append(slices.Clone(common), "--name", name, "--data-dir", filepath.Join(t.dir, name), "--join", gossip, "--capability", core)
		w, err := startProc(ctx, cfg.Robonode, cfg.workerEnv(), nil, nodeFile(cfg.LogDir, label, name, ".log"), name, withProfile(cfg, label, name, args)...)
		if err != nil {
			return fail(err)
		}
		t.procs, t.caps = append(t.procs, w), append(t.caps, nil)
	}
	for _, p := range t.procs[:servers] {
		conn, err := connect.Dial(p.addr, connect.Credentials{}, grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
		if err != nil {
			return fail(err)
		}
		t.conns = append(t.conns, conn)
		t.apis = append(t.apis, robonetv1.NewWorkflowServiceClient(conn))
	}
	t.conn, t.api = t.conns[0], t.apis[0]
	if err := t.waitPartitionsOwned(ctx, time.Minute); err != nil {
		return fail(err)
	}
	if err := t.register(ctx, cfg); err != nil {
		return fail(err)
	}
	// One instance through every server, so that each one's path to the
	// engine is warm too.
	for i, api := range t.apis {
		resp, err := api.SubmitWorkflow(ctx, &robonetv1.SubmitWorkflowRequest{
			Workflow: &robonetv1.SubmitWorkflowRequest_Ref{Ref: &robonetv1.WorkflowRef{Name: "bench-one"}}})
		if err != nil {
			return fail(fmt.Errorf("warm-up through %s: %w", t.procs[i].name, err))
		}
		if err := t.waitComplete(ctx, []string{resp.GetInstanceId()}, time.Minute); err != nil {
			return fail(fmt.Errorf("warm-up through %s: %w", t.procs[i].name, err))
		}
	}
	return t, nil
}

// waitPartitionsOwned waits until every server names the same leader and
// the leader's control state gives every partition an owner.
func (t *target) waitPartitionsOwned(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		ok, why := t.partitionsOwned(ctx)
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the mesh did not settle within %s: %s", limit, why)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (t *target) partitionsOwned(ctx context.Context) (bool, string) {
	leader := ""
	for i, conn := range t.conns {
		resp, err := robonetv1.NewMeshServiceClient(conn).GetLeader(ctx, &robonetv1.GetLeaderRequest{})
		switch {
		case err != nil:
			return false, fmt.Sprintf("%s: %v", t.procs[i].name, err)
		case resp.GetName() == "":
			return false, t.procs[i].name + " knows no leader"
		case leader != "" && resp.GetName() != leader:
			return false, fmt.Sprintf("the servers name different leaders (%s, %s)", leader, resp.GetName())
		}
		leader = resp.GetName()
	}
	_, owners, err := t.partitions(ctx)
	if err != nil {
		return false, err.Error()
	}
	if owners[""] > 0 || len(owners) == 0 {
		return false, fmt.Sprintf("%d partitions without an owner", owners[""])
	}
	return true, ""
}

// partitions reads where the partitions are: the placement and the
// partitions of each owner ("" counts those without one).
func (t *target) partitions(ctx context.Context) (string, map[string]int, error) {
	resp, err := robonetv1.NewMeshServiceClient(t.conn).ListPartitions(ctx, &robonetv1.ListPartitionsRequest{})
	if err != nil {
		return "", nil, fmt.Errorf("listing the partitions: %w", err)
	}
	owners := map[string]int{}
	for _, p := range resp.GetPartitions() {
		owners[p.GetOwner()]++
	}
	return resp.GetPlacement(), owners, nil
}

// runPartitionWork submits the workload through every server's API at
// once — cfg.Chains chains through SubmitWorkflows, cfg.BatchSize a call,
// shared out over the servers, and cfg.Spreads spreads of
// cfg.SpreadsWidth tasks, one server after the other — and times it to
// the last instance COMPLETE.
func runPartitionWork(ctx context.Context, t *target, cfg *Config) (Result, error) {
	servers := len(t.apis)
	var (
		mu  sync.Mutex
		ids = make([]string, 0, cfg.Chains+cfg.Spreads)
	)
	keep := func(got ...string) {
		mu.Lock()
		ids = append(ids, got...)
		mu.Unlock()
	}
	chain := &robonetv1.WorkflowRef{Name: "bench-chain"}
	spread := &robonetv1.WorkflowRef{Name: "bench-spread"}
	start := time.Now()
	g, gctx := errgroup.WithContext(ctx)
	for i, api := range t.apis {
		share := cfg.Chains / servers
		if i < cfg.Chains%servers {
			share++
		}
		g.Go(func() error {
			for left := share; left > 0; left -= cfg.BatchSize {
				items := make([]*robonetv1.SubmitItem, min(left, cfg.BatchSize))
				for j := range items {
					items[j] = &robonetv1.SubmitItem{}
				}
				resp, err := api.SubmitWorkflows(gctx, &robonetv1.SubmitWorkflowsRequest{
					Workflow: &robonetv1.SubmitWorkflowsRequest_Ref{Ref: chain}, Items: items})
				if err != nil {
					return fmt.Errorf("submitting chains through %s: %w", t.procs[i].name, err)
				}
				for _, in := range resp.GetInstances() {
					keep(in.GetInstanceId())
				}
			}
			return nil
		})
	}
	for s := range cfg.Spreads {
		api, name := t.apis[s%servers], t.procs[s%servers].name
		g.Go(func() error {
			resp, err := api.SubmitWorkflow(gctx, &robonetv1.SubmitWorkflowRequest{
				Workflow:   &robonetv1.SubmitWorkflowRequest_Ref{Ref: spread},
				InputsJson: fmt.Sprintf(`{"width": %d}`, cfg.SpreadsWidth),
			})
			if err != nil {
				return fmt.Errorf("submitting a spread through %s: %w", name, err)
			}
			keep(resp.GetInstanceId())
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return Result{}, err
	}
	submitted := time.Since(start)
	if err := t.waitComplete(ctx, ids, 30*time.Minute); err != nil {
		return Result{}, err
	}
	took := time.Since(start)
	n, tasks := cfg.Chains+cfg.Spreads, cfg.Chains*10+cfg.Spreads*cfg.SpreadsWidth
	return Result{Instances: n, Tasks: tasks, Seconds: took.Seconds(), TasksPerS: float64(tasks) / took.Seconds(),
		SubmitsPerS: float64(n) / submitted.Seconds()}, nil
}

// postmasterOf finds the process id of the Postgres server behind dsn
// when it runs on this machine: the parent of the backend serving a
// connection.
func postmasterOf(ctx context.Context, dsn string) (int, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return 0, err
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	var backend int
	if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&backend); err != nil {
		return 0, err
	}
	st, err := readStat(backend)
	if err != nil {
		return 0, fmt.Errorf("the backend (pid %d) is not a process of this machine: %w", backend, err)
	}
	if st.comm != "postgres" {
		return 0, fmt.Errorf("process %d is %q, not a Postgres backend of this machine", backend, st.comm)
	}
	parent, err := readStat(st.ppid)
	if err != nil || parent.comm != "postgres" {
		return 0, fmt.Errorf("the parent of backend %d is not a Postgres server process", backend)
	}
	return st.ppid, nil
}

// clusterCPU is the CPU time of a Postgres server: the postmaster's own,
// that of its children that ended (the kernel adds a reaped child's time
// to its parent's cutime and cstime) and that of its live children
// (backends, writers, the WAL writer).
func clusterCPU(postmaster int) (time.Duration, error) {
	if postmaster == 0 {
		return 0, errors.New("no Postgres server process")
	}
	pm, err := readStat(postmaster)
	if err != nil {
		return 0, err
	}
	total := pm.ticks + pm.childTicks
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, f := range stats {
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(f)))
		if err != nil {
			continue
		}
		st, err := readStat(pid)
		if err != nil || st.ppid != postmaster {
			continue // ended meanwhile, or another's
		}
		total += st.ticks + st.childTicks
	}
	return time.Duration(total) * clockTick, nil
}

// procStat is what clusterCPU needs of /proc/PID/stat.
type procStat struct {
	comm       string
	ppid       int
	ticks      int64 // utime + stime
	childTicks int64 // cutime + cstime: children waited for
}

func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, err
	}
	return parseStat(b)
}

// parseStat parses a /proc/PID/stat line.
func parseStat(b []byte) (procStat, error) {
	open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || end < open || end+2 > len(b) {
		return procStat{}, fmt.Errorf("stat %q: no command name", b)
	}
	f := strings.Fields(string(b[end+2:])) // from field 3, the state
	if len(f) < 15 {
		return procStat{}, fmt.Errorf("stat: %d fields", len(f))
	}
	var v [5]int64
	for i, k := range []int{1, 11, 12, 13, 14} { // ppid, utime, stime, cutime, cstime
		n, err := strconv.ParseInt(f[k], 10, 64)
		if err != nil {
			return procStat{}, fmt.Errorf("stat field %d: %w", k+3, err)
		}
		v[i] = n
	}
	return procStat{comm: string(b[open+1 : end]), ppid: int(v[0]), ticks: v[1] + v[2], childTicks: v[3] + v[4]}, nil
}
