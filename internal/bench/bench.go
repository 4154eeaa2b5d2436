// Package bench drives robonode processes through the public gRPC API, as
// a user's program would, and measures what users measure: tasks and
// submissions per second, submission and dispatch latency, and each node's
// CPU and memory — submissions included, never with work queued
// in-process first. Every scenario starts fresh processes (and, on
// Postgres, a fresh database) on loopback.
//
// On Postgres the reference is measured in the same run: COPY of rows
// shaped like runner_actions_done into the same server, as fast as it
// takes them — the physical limit for one durable row per task. Ratios to
// it hold on a noisy machine where absolute figures do not, which is what
// Check compares against a committed baseline.
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc"

	"github.com/robonet/robonet/internal/childproc"
	"github.com/robonet/robonet/internal/connect"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// Scenario names.
const (
	Spread      = "spread"       // one instance of a SpreadWidth-wide echo spread
	Chains      = "chains"       // Chains instances of a 10-task chain, ChainClients concurrent single submits
	ChainsBatch = "chains-batch" // the same through SubmitWorkflows, BatchSize a call
	Diamonds    = "diamonds"     // Diamonds instances of a 5-stage diamond DAG (46 tasks)
	Latency     = "latency"      // open loop at each of Rates for RateDuration, one-task instances
	MeshSpread  = "mesh-spread"  // Spread with the tasks on three worker nodes
	MeshChains  = "mesh-chains"  // Chains with the tasks on three worker nodes
	// Partitions: chains and spreads through every server's API against
	// 1, 2 and 3 servers, each capped at ServerCPUs (partitions.go).
	Partitions = "partitions"
	// Waits: Waits instances parked in a wait for a signal, then a storm
	// of one signal each (waits.go).
	Waits = "waits"
)

// Placements (Config.Placement).
const (
	Shared = "shared"
	Split  = "split"
)

// AllScenarios is every scenario a run has by default, in the order they
// run.
var AllScenarios = []string{Spread, Chains, ChainsBatch, Diamonds, Latency, MeshSpread, MeshChains}

// NamedScenarios run only when named: they need what a default run may
// not have (Partitions: Postgres and a cgroup CPU controller to write).
var NamedScenarios = []string{Partitions, Waits}

// Config is a bench run.
type Config struct {
	// Robonode is the command that runs robonode (the binary, then any
	// leading arguments); Env is added to its environment.
	Robonode []string
	Env      []string
	// Postgres is a DSN (URL form) of a server whose role may create
	// databases; empty: the embedded SQLite store.
	Postgres  string
	Scenarios []string

	SpreadWidth  int           // default 100,000
	Chains       int           // default 2,000
	ChainClients int           // default 32
	BatchSize    int           // default 1,000
	Diamonds     int           // default 200
	Rates        []int         // default 100, 500, 1,000 a second
	RateDuration time.Duration // default 10 s
	CopyRows     int           // the reference's rows; default 200,000
	Slots        int           // each node's core slots; default 64

	// The partitions scenario: each server's CPU cap (default 0.25), and
	// Spreads spreads of SpreadsWidth tasks (default 50 of 2,000) beside
	// Chains chains.
	ServerCPUs   float64
	Spreads      int
	SpreadsWidth int
	// cgroupV1 and cgroupV2 are where the caps are made (default the
	// system's, cgroupV1CPU and cgroupV2); cgroups is the one check
	// found, cpus the CPUs this process may run on.
	cgroupV1, cgroupV2 string
	cgroups            *cgroupRoot
	cpus               int

	// Placement is where the processes run: Shared (or empty), every
	// process on every CPU; Split, the server (and the single node the
	// mesh is compared with) on the first half of the CPUs and the worker
	// nodes on the other half, as if the workers had a machine of their
	// own. A database server is not placed, nor are the processes of the
	// partitions scenario (its servers are capped instead).
	Placement string
	// WorkerProcs, when above 0, is the GOMAXPROCS of each worker node of
	// the mesh scenarios, as a container CPU limit of that many CPUs
	// would set it (docs/operations.md, "Several nodes on one machine");
	// 0: Go's default, every CPU.
	WorkerProcs int

	// serverCPUs and workerCPUs are where Split puts the processes (set by
	// check; none: anywhere).
	serverCPUs, workerCPUs []int

	// ProfileDir, when set, gets a CPU profile of every node of every
	// scenario, SCENARIO-NODE.pprof; the nodes are then stopped cleanly
	// (so the profile is written) rather than killed.
	ProfileDir string

	// LogDir, when set, gets every node's log of every scenario,
	// SCENARIO-NODE.log, to find out afterwards why a run was slow.
	LogDir string

	// Rounds is how many times every scenario runs (default 1). Round 1
	// runs each scenario in turn, then round 2 does, and so on, so a mesh
	// scenario and its single-node twin are measured side by side in
	// every round; the report gives each round and the medians. On a
	// noisy machine one round's ratio can be far off; a median of five
	// holds.
	Rounds int

	// Waits is the waits scenario's instances (default 100,000).
	Waits int

	// Progress gets a line as each step starts; nil: none.
	Progress io.Writer
}

func (c *Config) defaults() {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.SpreadWidth, 100_000)
	def(&c.Chains, 2000)
	def(&c.ChainClients, 32)
	def(&c.BatchSize, 1000)
	def(&c.Diamonds, 200)
	def(&c.CopyRows, 200_000)
	def(&c.Slots, 64)
	def(&c.Rounds, 1)
	def(&c.Spreads, 50)
	def(&c.SpreadsWidth, 2000)
	def(&c.Waits, 100_000)
	if c.ServerCPUs == 0 {
		c.ServerCPUs = 0.25
	}
	if c.cgroupV1 == "" {
		c.cgroupV1, c.cgroupV2 = cgroupV1CPU, cgroupV2
	}
	if len(c.Rates) == 0 {
		c.Rates = []int{100, 500, 1000}
	}
	if c.RateDuration == 0 {
		c.RateDuration = 10 * time.Second
	}
	if len(c.Scenarios) == 0 {
		c.Scenarios = AllScenarios
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	if c.Placement == "" {
		c.Placement = Shared
	}
}

// workerEnv is the environment added to a worker node's.
func (c *Config) workerEnv() []string {
	if c.WorkerProcs == 0 {
		return c.Env
	}
	return append(slices.Clone(c.Env), fmt.Sprintf("GOMAXPROCS=%d", c.WorkerProcs))
}

// ErrConfig marks a configuration Run refuses before it starts anything.
var ErrConfig = errors.New("bench configuration")

func (c *Config) check() error {
	for _, s := range c.Scenarios {
		if !slices.Contains(AllScenarios, s) && !slices.Contains(NamedScenarios, s) {
			return fmt.Errorf("%w: unknown scenario %q: choose from %s", ErrConfig, s, strings.Join(append(slices.Clone(AllScenarios), NamedScenarios...), ", "))
		}
	}
	switch {
	case len(c.Robonode) == 0:
		return fmt.Errorf("%w: no robonode command to run", ErrConfig)
	case c.BatchSize < 1 || c.BatchSize > 1000:
		return fmt.Errorf("%w: batch size %d: want 1 to 1000", ErrConfig, c.BatchSize)
	case c.SpreadWidth < 1 || c.Chains < 1 || c.ChainClients < 1 || c.Diamonds < 1 || c.CopyRows < 1 || c.Slots < 1 || c.Rounds < 1 ||
		c.Spreads < 1 || c.SpreadsWidth < 1:
		return fmt.Errorf("%w: every size must be at least 1", ErrConfig)
	case c.WorkerProcs < 0:
		return fmt.Errorf("%w: worker GOMAXPROCS %d: want 0 (Go's default) or more", ErrConfig, c.WorkerProcs)
	}
	switch c.Placement {
	case Shared:
	case Split:
		var err error
		// The server (or the single node) on the first half of the CPUs,
		// the worker nodes on the second.
		if c.serverCPUs, c.workerCPUs, err = childproc.Halves(); err != nil {
			return fmt.Errorf("%w: placement %s: %w", ErrConfig, Split, err)
		}
	default:
		return fmt.Errorf("%w: placement %q: want %s or %s", ErrConfig, c.Placement, Shared, Split)
	}
	for _, d := range []struct{ what, dir string }{{"profile", c.ProfileDir}, {"log", c.LogDir}} {
		if d.dir == "" {
			continue
		}
		if err := os.MkdirAll(d.dir, 0o755); err != nil {
			return fmt.Errorf("%w: %s directory: %w", ErrConfig, d.what, err)
		}
	}
	for _, r := range c.Rates {
		if r < 1 {
			return fmt.Errorf("%w: rate %d: want at least 1 a second", ErrConfig, r)
		}
	}
	if slices.Contains(c.Scenarios, Partitions) {
		return c.checkPartitions()
	}
	return nil
}

// checkPartitions checks what the partitions scenario needs: Postgres,
// a cap that leaves the uncapped processes CPU at 3 servers, and a cgroup
// CPU controller it can write (as root).
func (c *Config) checkPartitions() error {
	if c.cpus == 0 {
		c.cpus = runtime.NumCPU()
	}
	most := partitionSizes[len(partitionSizes)-1]
	switch {
	case c.Postgres == "":
		return fmt.Errorf("%w: scenario %s needs --postgres: its servers share one database", ErrConfig, Partitions)
	case c.ServerCPUs < 0.01:
		return fmt.Errorf("%w: server CPU cap %g: want at least 0.01", ErrConfig, c.ServerCPUs)
	case float64(most)*c.ServerCPUs >= float64(c.cpus):
		return fmt.Errorf("%w: %d servers at %g CPUs each leave none of this machine's %d CPUs to the worker nodes and Postgres: cap them lower",
			ErrConfig, most, c.ServerCPUs, c.cpus)
	}
	var err error
	if c.cgroups, err = findCgroupRoot(c.cgroupV1, c.cgroupV2); err != nil {
		return fmt.Errorf("%w: scenario %s caps each server's CPU with a cgroup of its own: %w", ErrConfig, Partitions, err)
	}
	return nil
}

// Report is the outcome of a run.
type Report struct {
	Date  time.Time `json:"date"`
	CPUs  int       `json:"cpus"`
	Store string    `json:"store"`
	// Placement is Config.Placement: shared or split.
	Placement string `json:"placement"`
	// WorkerProcs is Config.WorkerProcs (0: Go's default).
	WorkerProcs int    `json:"worker_gomaxprocs,omitempty"`
	Command     string `json:"command,omitempty"`
	Rounds      int    `json:"rounds"`
	// CopyRowsPerSec is the reference (Postgres only): the median of
	// CopyRuns, its measurements.
	CopyRowsPerSec float64   `json:"copy_rows_per_sec,omitempty"`
	CopyRuns       []float64 `json:"copy_runs,omitempty"`
	Results        []Result  `json:"results"`
	// Medians summarise every round of each scenario (Rounds > 1 only).
	Medians []Summary `json:"medians,omitempty"`
	// Verdicts are the partitions scenario's, a line per round, against
	// the target of issue 34 (informative: they never fail a run).
	Verdicts []string `json:"verdicts,omitempty"`
}

// Summary is a scenario's figures over the rounds of a run.
type Summary struct {
	Scenario  string `json:"scenario"`
	Rate      int    `json:"rate,omitempty"`
	Rounds    int    `json:"rounds"`
	TasksPerS Range  `json:"tasks_per_sec"`
	OfCopy    Range  `json:"of_copy,omitzero"`
	OfSingle  Range  `json:"of_single,omitzero"`
}

// Label names the summarised runs, as Result.Label does.
func (s Summary) Label() string { return Result{Scenario: s.Scenario, Rate: s.Rate}.Label() }

// Range is the median, the least and the greatest of one figure over the
// rounds.
type Range struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

// rangeOf returns the median and range of vs (sorted in place); zero
// when vs is empty.
func rangeOf(vs []float64) Range {
	if len(vs) == 0 {
		return Range{}
	}
	slices.Sort(vs)
	mid := vs[len(vs)/2]
	if len(vs)%2 == 0 {
		mid = (vs[len(vs)/2-1] + mid) / 2
	}
	return Range{Median: mid, Min: vs[0], Max: vs[len(vs)-1]}
}

// summarise gives the medians of each scenario over the rounds of results,
// in the order the scenarios first ran.
func summarise(results []Result) []Summary {
	type figures struct{ tasks, copy, single []float64 }
	var order []Result
	by := map[string]*figures{}
	for _, r := range results {
		f := by[r.Label()]
		if f == nil {
			f = &figures{}
			by[r.Label()] = f
			order = append(order, r)
		}
		f.tasks = append(f.tasks, r.TasksPerS)
		if r.OfCopy > 0 {
			f.copy = append(f.copy, r.OfCopy)
		}
		if r.OfSingle > 0 {
			f.single = append(f.single, r.OfSingle)
		}
	}
	out := make([]Summary, 0, len(order))
	for _, r := range order {
		f := by[r.Label()]
		out = append(out, Summary{Scenario: r.Scenario, Rate: r.Rate, Rounds: len(f.tasks),
			TasksPerS: rangeOf(f.tasks), OfCopy: rangeOf(f.copy), OfSingle: rangeOf(f.single)})
	}
	return out
}

// Result is one scenario's measurements.
type Result struct {
	Scenario string `json:"scenario"`
	// Round is the round of the run (Config.Rounds > 1 only).
	Round     int     `json:"round,omitempty"`
	Instances int     `json:"instances"`
	Tasks     int     `json:"tasks"`
	Seconds   float64 `json:"seconds"` // first submission to the last instance COMPLETE
	TasksPerS float64 `json:"tasks_per_sec"`
	// SubmitsPerS: instances acknowledged per second while submitting.
	SubmitsPerS float64 `json:"submits_per_sec"`
	// OfCopy is TasksPerS over the COPY reference (Postgres only).
	OfCopy float64 `json:"of_copy,omitempty"`
	// OfSingle is a mesh scenario's TasksPerS over its single-node twin
	// measured in the same run.
	OfSingle float64 `json:"of_single,omitempty"`
	// Scaling is the partitions scenario's: the servers, their cap, and
	// how the run compares with one server.
	Scaling *Scaling `json:"scaling,omitempty"`
	// Parked is the waits scenario's.
	Parked *Parked `json:"parked,omitempty"`
	// Rate is the offered rate of a latency run, per second.
	Rate int `json:"rate,omitempty"`
	// Latencies in milliseconds: submit acknowledged; acknowledgement to
	// the first task's start; the task's start to the instance recorded
	// complete (latency runs only).
	Submit   *Percentiles `json:"submit_ms,omitempty"`
	Dispatch *Percentiles `json:"dispatch_ms,omitempty"`
	Record   *Percentiles `json:"record_ms,omitempty"`
	Nodes    []NodeUsage  `json:"nodes"`
	// ClientCPUSeconds is what the bench itself (the submitting clients)
	// used: on a small machine it shares the cores with the nodes.
	ClientCPUSeconds float64 `json:"client_cpu_seconds"`
	// Postgres: write-ahead log bytes per task, against the mean size of
	// a stored result row.
	WALBytesPerTask float64 `json:"wal_bytes_per_task,omitempty"`
	ResultRowBytes  float64 `json:"result_row_bytes,omitempty"`
}

// Percentiles of a latency, in milliseconds.
type Percentiles struct {
	P50 float64 `json:"p50"`
	P95 float64 `json:"p95"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// NodeUsage is what one process used during a scenario.
type NodeUsage struct {
	Node       string  `json:"node"`
	CPUSeconds float64 `json:"cpu_seconds"`
	PeakRSSMiB float64 `json:"peak_rss_mib"`
	// CapCPUs is the process's CPU cap (0: none), Throttled the share of
	// the cap's periods in which it held the process back.
	CapCPUs   float64 `json:"cap_cpus,omitempty"`
	Throttled float64 `json:"throttled,omitempty"`
}

// Run runs the scenarios of cfg in order.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg.defaults()
	if err := cfg.check(); err != nil {
		return nil, err
	}
	rep := &Report{Date: time.Now().UTC(), CPUs: runtime.NumCPU(), Store: "sqlite", Placement: cfg.Placement, WorkerProcs: cfg.WorkerProcs}
	if cfg.Postgres != "" {
		rep.Store = "postgres"
		fmt.Fprintf(cfg.Progress, "reference: COPY of %d result rows, %d a transaction on %d connections, %d times\n",
			cfg.CopyRows, copyBatch, copyConns, referenceRuns)
		var err error
		if rep.CopyRuns, err = measureReference(ctx, &cfg); err != nil {
			return nil, err
		}
		rep.CopyRowsPerSec = rangeOf(slices.Clone(rep.CopyRuns)).Median
		fmt.Fprintf(cfg.Progress, "  %.0f rows/s (the median)\n", rep.CopyRowsPerSec)
	}
	rep.Rounds = cfg.Rounds
	for round := 1; round <= cfg.Rounds; round++ {
		if cfg.Rounds > 1 {
			fmt.Fprintf(cfg.Progress, "round %d of %d\n", round, cfg.Rounds)
		}
		if err := runRound(ctx, &cfg, rep, round); err != nil {
			return rep, err
		}
	}
	if cfg.Rounds > 1 {
		rep.Medians = summarise(rep.Results)
	}
	rep.Verdicts = verdicts(rep.Results)
	return rep, nil
}

// referenceRuns is how many times the COPY reference is measured, each on
// a fresh database: the ratios divide by the median, so one run that
// finds the server unusually fast (or slow) does not move them all.
const referenceRuns = 3

// measureReference measures the COPY reference referenceRuns times.
func measureReference(ctx context.Context, cfg *Config) ([]float64, error) {
	var rates []float64
	for range referenceRuns {
		db, err := newDatabase(ctx, cfg.Postgres)
		if err != nil {
			return nil, err
		}
		rate, err := copyReference(ctx, db.dsn, cfg.CopyRows)
		if derr := db.drop(context.WithoutCancel(ctx)); err == nil {
			err = derr
		}
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(cfg.Progress, "  %.0f rows/s\n", rate)
		rates = append(rates, rate)
	}
	return rates, nil
}

// runRound runs every scenario once and adds the results to rep, each
// mesh scenario compared with the single node of this round.
func runRound(ctx context.Context, cfg *Config, rep *Report, round int) error {
	single := map[string]float64{}
	for _, name := range cfg.Scenarios {
		if name == Partitions {
			if err := runPartitions(ctx, cfg, rep, round); err != nil {
				return fmt.Errorf("scenario %s: %w", name, err)
			}
			continue
		}
		if name == Waits {
			r, err := runWaits(ctx, cfg, round)
			if err != nil {
				return fmt.Errorf("scenario %s: %w", name, err)
			}
			fmt.Fprintf(cfg.Progress, "  %s\n", r.summary())
			rep.Results = append(rep.Results, r)
			continue
		}
		rates := []int{0} // not paced
		if name == Latency {
			rates = cfg.Rates
		}
		for _, rate := range rates {
			r, err := runScenario(ctx, cfg, name, rate, round)
			if err != nil {
				return fmt.Errorf("scenario %s: %w", name, err)
			}
			if rep.CopyRowsPerSec > 0 && r.Rate == 0 { // a paced run's throughput is its rate
				r.OfCopy = r.TasksPerS / rep.CopyRowsPerSec
			}
			if twin, ok := strings.CutPrefix(name, "mesh-"); ok {
				if s := single[twin]; s > 0 {
					r.OfSingle = r.TasksPerS / s
				}
			} else {
				single[name] = r.TasksPerS
			}
			fmt.Fprintf(cfg.Progress, "  %s\n", r.summary())
			rep.Results = append(rep.Results, r)
		}
	}
	return nil
}

// target is the processes (and database) one scenario runs on.
type target struct {
	dir   string // the nodes' data directories
	procs []*proc
	db    *database
	conn  *grpc.ClientConn
	api   robonetv1.WorkflowServiceClient

	// The partitions scenario's: every server's connection and API (conn
	// and api are the first's), each process's cap (nil: none), and the
	// Postgres server's process (0: not on this machine).
	conns      []*grpc.ClientConn
	apis       []robonetv1.WorkflowServiceClient
	caps       []*cgroup
	postmaster int

	profiled bool          // the processes write CPU profiles: stop them cleanly
	poll     time.Duration // how often waitComplete asks; 0: every 5 ms
}

// start starts one node serving core, or a server serving nothing with
// three worker nodes serving core (mesh), and registers the workflows.
func start(ctx context.Context, cfg *Config, label string, mesh bool, extra ...string) (*target, error) {
	t := &target{profiled: cfg.ProfileDir != ""}
	common := []string{"--grpc", "127.0.0.1:0", "--http", "off", "--gossip", "127.0.0.1:0", "--raft", "127.0.0.1:0",
		"--log-format", "json", "--log-level", "info"}
	common = append(common, extra...) // a flag given again overrides the one before
	var store []string
	if cfg.Postgres != "" {
		db, err := newDatabase(ctx, cfg.Postgres)
		if err != nil {
			return nil, err
		}
		t.db = db
		store = []string{"--postgres", db.dsn}
	}
	if mesh {
		// The nodes vouch for each other, as the nodes of a production
		// mesh are configured to: new nodes on probation would get only
		// what their trust allows, and the Waggler's own node (trusted by
		// itself) would run nearly every task.
		common = append(common, "--trust-peer", "*")
	}
	core := fmt.Sprintf("core=%d", cfg.Slots)
	dir, err := os.MkdirTemp("", "robonet-bench-")
	if err != nil {
		return nil, err
	}
	t.dir = dir
	first := append(append(slices.Clone(common), store...), "--name", "server", "--data-dir", dir+"/server", "--capability", core)
	if mesh {
		first[len(first)-1] = "none"
	}
	p, err := startProc(ctx, cfg.Robonode, cfg.Env, cfg.serverCPUs, nodeFile(cfg.LogDir, label, "server", ".log"), "server", withProfile(cfg, label, "server", first)...)
	if err != nil {
		_ = t.stop()
		return nil, err
	}
	t.procs = append(t.procs, p)
	if mesh {
		for i := 1; i <= 3; i++ {
			name := fmt.Sprintf("w%d", i)
			w, err := startProc(ctx, cfg.Robonode, cfg.workerEnv(), cfg.workerCPUs, nodeFile(cfg.LogDir, label, name, ".log"), name, withProfile(cfg, label, name, append(slices.Clone(common), "--name", name,
				"--data-dir", dir+"/"+name, "--join", p.gossip, "--capability", core))...)
			if err != nil {
				_ = t.stop()
				return nil, err
			}
			t.procs = append(t.procs, w)
		}
	}
	t.conn, err = connect.Dial(p.addr, connect.Credentials{}, grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
	if err != nil {
		_ = t.stop()
		return nil, err
	}
	t.api = robonetv1.NewWorkflowServiceClient(t.conn)
	if err := t.register(ctx, cfg); err != nil {
		_ = t.stop()
		return nil, err
	}
	return t, nil
}

// stop kills the processes, removes their caps, drops the database and
// removes the data; it fails only when a cap could not be removed.
func (t *target) stop() error {
	if t.conn != nil {
		_ = t.conn.Close()
	}
	for _, c := range t.conns[min(1, len(t.conns)):] { // the first is conn
		_ = c.Close()
	}
	for _, p := range t.procs {
		if t.profiled {
			p.terminate()
		} else {
			p.kill()
		}
	}
	var err error
	for _, g := range t.caps {
		if g != nil {
			err = errors.Join(err, g.remove())
		}
	}
	if t.db != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = t.db.drop(ctx)
	}
	if t.dir != "" {
		_ = os.RemoveAll(t.dir)
	}
	return err
}

// errorLogs are the error lines among the processes' last log lines, to
// show with a failure.
func (t *target) errorLogs() string {
	var b strings.Builder
	for _, p := range t.procs {
		for _, l := range strings.Split(p.lastLines(), "\n") {
			if strings.Contains(l, `"level":"error"`) || strings.Contains(l, `"level":"warn"`) {
				fmt.Fprintf(&b, "\n  %s: %s", p.name, l)
			}
		}
	}
	return b.String()
}

// usage reads every process's CPU time and peak RSS.
func (t *target) usage() ([]usage, error) {
	out := make([]usage, len(t.procs))
	for i, p := range t.procs {
		u, err := usageOf(p.cmd.Process.Pid)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.name, err)
		}
		out[i] = u
	}
	return out, nil
}

// nodeUsages is every process's CPU since before and its peak RSS, with
// its CPU cap and how often the cap throttled it, if it has one.
func (t *target) nodeUsages(before []usage) ([]NodeUsage, error) {
	after, err := t.usage()
	if err != nil {
		return nil, err
	}
	out := make([]NodeUsage, len(t.procs))
	for i, p := range t.procs {
		u := NodeUsage{Node: p.name, CPUSeconds: (after[i].CPU - before[i].CPU).Seconds(), PeakRSSMiB: float64(after[i].PeakRSS) / (1 << 20)}
		if i < len(t.caps) && t.caps[i] != nil {
			g := t.caps[i]
			u.CapCPUs = g.cpus
			if periods, throttled := g.throttle(); periods > 0 {
				u.Throttled = float64(throttled) / float64(periods)
			}
		}
		out[i] = u
	}
	return out, nil
}

// runScenario runs one scenario on fresh processes.
func runScenario(ctx context.Context, cfg *Config, name string, rate, round int) (Result, error) {
	label := Result{Scenario: name, Rate: rate}.Label()
	if cfg.Rounds > 1 {
		label = fmt.Sprintf("%s-r%d", label, round)
	}
	fmt.Fprintf(cfg.Progress, "%s: starting nodes\n", label)
	t, err := start(ctx, cfg, label, strings.HasPrefix(name, "mesh-"))
	if err != nil {
		return Result{}, err
	}
	defer func() { _ = t.stop() }() // nothing capped
	before, err := t.usage()
	if err != nil {
		return Result{}, err
	}
	var wal0 int64
	if t.db != nil {
		if wal0, err = walLSN(ctx, t.db.dsn); err != nil {
			return Result{}, err
		}
	}
	client0 := selfCPU()
	fmt.Fprintf(cfg.Progress, "%s: running\n", label)
	var r Result
	switch name {
	case Spread, MeshSpread:
		r, err = runSpread(ctx, t, cfg.SpreadWidth)
	case Chains, MeshChains:
		r, err = runMany(ctx, t, "bench-chain", 10, cfg.Chains, cfg.ChainClients, 1)
	case ChainsBatch:
		r, err = runMany(ctx, t, "bench-chain", 10, cfg.Chains, cfg.ChainClients, cfg.BatchSize)
	case Diamonds:
		r, err = runMany(ctx, t, "bench-diamond", diamondTasks, cfg.Diamonds, cfg.ChainClients, 1)
	case Latency:
		r, err = runLatency(ctx, t, rate, cfg.RateDuration)
	}
	if err != nil {
		return Result{}, fmt.Errorf("%w%s", err, t.errorLogs())
	}
	r.Scenario = name
	if cfg.Rounds > 1 {
		r.Round = round
	}
	r.ClientCPUSeconds = (selfCPU() - client0).Seconds()
	nodes, err := t.nodeUsages(before)
	if err != nil {
		return Result{}, err
	}
	r.Nodes = append(r.Nodes, nodes...)
	if t.db != nil && r.Tasks > 0 {
		wal1, err := walLSN(ctx, t.db.dsn)
		if err != nil {
			return Result{}, err
		}
		r.WALBytesPerTask = float64(wal1-wal0) / float64(r.Tasks)
		if r.ResultRowBytes, err = resultRowBytes(ctx, t.db.dsn); err != nil {
			return Result{}, err
		}
	}
	return r, nil
}

// Label names the run: the scenario, and a latency run's rate or a
// partitions run's servers.
func (r Result) Label() string {
	if r.Scaling != nil {
		return fmt.Sprintf("%s/%d", r.Scenario, r.Scaling.Servers)
	}
	if r.Rate > 0 {
		return fmt.Sprintf("%s@%d/s", r.Scenario, r.Rate)
	}
	return r.Scenario
}

func (r Result) summary() string {
	s := fmt.Sprintf("%s: %d tasks in %.2fs, %.0f tasks/s, %.0f submits/s", r.Scenario, r.Tasks, r.Seconds, r.TasksPerS, r.SubmitsPerS)
	if r.Rate > 0 {
		s = fmt.Sprintf("%s at %d/s: submit p99 %.1f ms, first dispatch p99 %.1f ms", r.Scenario, r.Rate, r.Submit.P99, r.Dispatch.P99)
	}
	if r.OfCopy > 0 {
		s += fmt.Sprintf(", %.2f of COPY", r.OfCopy)
	}
	if r.OfSingle > 0 {
		s += fmt.Sprintf(", %.0f%% of one node", 100*r.OfSingle)
	}
	if w := r.Parked; w != nil {
		s = fmt.Sprintf("%s: %d instances parked in %.1fs; the server's heap %.0f bytes per parked instance (%.0f per instance held in memory before it parked); "+
			"%d signals sent in %.2fs (%.0f/s), every instance COMPLETE %.2fs after the first; "+
			"as many one-task instances submitted one a call: %.2fs (the storm at %.2f× their speed)",
			r.Scenario, r.Instances, w.ParkSeconds, w.HeapPerParked, w.HeapPerHeld, r.Instances, w.SignalSeconds, w.SignalsPerS, r.Seconds,
			w.ReferenceSeconds, w.OfReference)
	}
	if sc := r.Scaling; sc != nil {
		s = fmt.Sprintf("%s: %d tasks in %.2fs, %.0f tasks/s, %.2f× one server; busiest server %s at %.3f CPU s per 1,000 tasks (%.2f× one server's); uncapped processes at %.0f%% of the CPU left to them",
			r.Label(), r.Tasks, r.Seconds, r.TasksPerS, sc.OfOneServer, sc.BusiestServer, sc.BusiestCPUPer1k, sc.BusiestOfOneServer, 100*sc.UncappedShare)
	}
	return s
}

// percentiles of samples (sorted in place), in milliseconds.
func percentiles(samples []time.Duration) *Percentiles {
	if len(samples) == 0 {
		return &Percentiles{}
	}
	slices.Sort(samples)
	at := func(p float64) float64 {
		return float64(samples[min(len(samples)-1, int(p*float64(len(samples))))]) / float64(time.Millisecond)
	}
	return &Percentiles{P50: at(0.50), P95: at(0.95), P99: at(0.99), Max: float64(samples[len(samples)-1]) / float64(time.Millisecond)}
}

// withProfile adds --cpu-profile to a node's arguments when cfg asks for
// profiles.
func withProfile(cfg *Config, label, node string, args []string) []string {
	if cfg.ProfileDir == "" {
		return args
	}
	return append(args, "--cpu-profile", nodeFile(cfg.ProfileDir, label, node, ".pprof"))
}

// nodeFile is the file in dir for node's ext (".pprof", ".log") in the
// scenario label; "" when dir is.
func nodeFile(dir, label, node, ext string) string {
	if dir == "" {
		return ""
	}
	return filepath.Join(dir, strings.NewReplacer("/", "-", " ", "-", "@", "-").Replace(label)+"-"+node+ext)
}
