package node

import (
	"context"
	"net/http"
	"sync"
	"time"

	gometrics "github.com/hashicorp/go-metrics"
	gmprom "github.com/hashicorp/go-metrics/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"

	"github.com/robonet/robonet/engine"
	"github.com/robonet/robonet/engine/port"
	"github.com/robonet/robonet/internal/metrics"
	"github.com/robonet/robonet/mesh"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
	"github.com/robonet/robonet/trust"
)

// nodeMetrics is a node's Prometheus registry, served at /metrics: the
// engine's and the Wagglers' series (recorded as things happen), the
// node's state read at each scrape (leadership, members, Wagglers, trust,
// quarantine), Raft's and memberlist's own metrics, and the Go runtime's
// and the process's.
type nodeMetrics struct {
	reg    *prometheus.Registry
	engine *metrics.Engine
	wag    *metrics.Wag
	// auditRecords and auditErrors count the audit trail's records
	// written and its writes that failed (audit.go).
	auditRecords, auditErrors prometheus.Counter
}

func newNodeMetrics(n *Node) *nodeMetrics {
	reg := prometheus.NewRegistry()
	m := &nodeMetrics{reg: reg, engine: metrics.NewEngine(reg), wag: metrics.NewWag(reg),
		auditRecords: prometheus.NewCounter(prometheus.CounterOpts{Name: "robonet_audit_records_total",
			Help: "Records this node wrote to its audit trail (DATA_DIR/audit): calls that changed something or tried to, token file reloads."}),
		auditErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "robonet_audit_write_errors_total",
			Help: "Audit records this node could not write to its trail (each is still logged on the audit logger)."}),
	}
	reg.MustRegister(
		m.auditRecords, m.auditErrors,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{Namespace: "robonet"}),
		&stateCollector{n: n},
	)
	if sink := hashicorpSink(n.log); sink != nil {
		// Shared by every node of the process (one in production).
		if err := reg.Register(sink); err != nil {
			n.log.Warn("raft and memberlist metrics are not exported", zap.Error(err))
		}
	}
	return m
}

// handler serves the registry in Prometheus' text (or OpenMetrics) format.
func (m *nodeMetrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg, EnableOpenMetrics: true})
}

var (
	hashicorpOnce sync.Once
	hashicorpProm *gmprom.PrometheusSink
)

// hashicorpSink returns the process-wide sink of hashicorp/go-metrics,
// through which Raft and memberlist report (raft_*, memberlist_*). Their
// metrics go to one global sink, so all nodes of a process share it.
func hashicorpSink(log *zap.Logger) *gmprom.PrometheusSink {
	hashicorpOnce.Do(func() {
		// Registered with no registry of its own: each node's registry
		// adds it.
		sink, err := gmprom.NewPrometheusSinkFrom(gmprom.PrometheusOpts{Registerer: prometheus.NewRegistry(), Name: "robonet_hashicorp_sink"})
		if err != nil {
			log.Warn("raft and memberlist metrics are not exported", zap.Error(err))
			return
		}
		conf := gometrics.DefaultConfig("")
		conf.EnableHostname = false
		conf.EnableRuntimeMetrics = false // the Go collector has them
		conf.EnableServiceLabel = false
		if _, err := gometrics.NewGlobal(conf, sink); err != nil {
			log.Warn("raft and memberlist metrics are not exported", zap.Error(err))
			return
		}
		hashicorpProm = sink
	})
	return hashicorpProm
}

// stateCollector reads the node's state at each scrape.
type stateCollector struct{ n *Node }

var (
	descLeader = prometheus.NewDesc("robonet_leader", "1 while this node leads the engine (it holds the Raft leadership), else 0.", nil, nil)
	descTerm   = prometheus.NewDesc("robonet_leader_term", "The Raft term of the current leader as this node sees it (0: none known).", nil, nil)
	descKnown  = prometheus.NewDesc("robonet_leader_known", "1 while this node knows a leader, else 0.", nil, nil)
	descMember = prometheus.NewDesc("robonet_mesh_members", "Members of the mesh as this node's gossip sees them, by status.", []string{"status"}, nil)
	descWagQ   = prometheus.NewDesc("robonet_waggler_queued", "Attempts waiting for a worker in this node's Waggler of a capability.", []string{"capability"}, nil)
	descWagR   = prometheus.NewDesc("robonet_waggler_running", "Attempts running on workers, watched by this node's Waggler of a capability.", []string{"capability"}, nil)
	descWagW   = prometheus.NewDesc("robonet_waggler_workers", "Workers (not declared dead) registered with this node's Waggler of a capability.", []string{"capability"}, nil)
	descWagE   = prometheus.NewDesc("robonet_waggler_epoch", "The epoch of this node's Waggler of a capability.", []string{"capability"}, nil)
	descTrust  = prometheus.NewDesc("robonet_trust_nodes", "Nodes and worker programs (NODE/PROGRAM) by the trust tier this node gives them.", []string{"tier"}, nil)
	descQuar   = prometheus.NewDesc("robonet_quarantined_nodes", "Nodes and worker programs in quarantine (servers: the control state's list).", nil, nil)
	descHeld   = prometheus.NewDesc("robonet_engine_instances_held", "Workflow instances the engine on this node holds in memory (0 off the leader).", nil, nil)
	descParked = prometheus.NewDesc("robonet_engine_instances_parked_total", "Waiting instances the engine on this node parked: written and released from memory until their wait ends or a signal, cancel or resume wakes them.", nil, nil)
	descHeldB  = prometheus.NewDesc("robonet_engine_instances_held_back", "Of those, the instances claimed and not started yet: the capabilities their first tasks need have a full backlog.", nil, nil)

	poolLabels    = []string{"capability", "pool"}
	descPoolSlots = prometheus.NewDesc("robonet_pool_slots", "Slots (workers) of a worker pool of this node.", poolLabels, nil)
	descPoolBusy  = prometheus.NewDesc("robonet_pool_busy", "Slots of a worker pool of this node running an attempt now.", poolLabels, nil)
	descPoolDone  = prometheus.NewDesc("robonet_pool_attempts_total", "Attempts a worker pool of this node finished, by outcome (completed, failed).", append(poolLabels, "outcome"), nil)
	descPoolRun   = prometheus.NewDesc("robonet_pool_run_seconds", "Run time of the attempts a worker pool of this node finished.", poolLabels, nil)

	descStoreConns    = prometheus.NewDesc("robonet_store_reconnects_total", "Connections the Postgres store opened after its first: each failover, restart or lost connection of the database adds some.", nil, nil)
	descStoreFailover = prometheus.NewDesc("robonet_store_failovers_total", "Times the Postgres store's new connections went to another host than before: the writable primary moved.", nil, nil)
	descStoreResets   = prometheus.NewDesc("robonet_store_pool_resets_total", "Times the Postgres store dropped every connection because one said its host was no longer the primary, or gone.", nil, nil)
	descStoreWriter   = prometheus.NewDesc("robonet_store_writer", "1 for the database host (host:port as the DSN names it) the Postgres store writes to.", []string{"host"}, nil)
	descStoreSync     = prometheus.NewDesc("robonet_store_sync_standbys", "Standbys the primary replicates to synchronously, as last read (-1: not visible to the store's role).", nil, nil)
	descStoreWait     = prometheus.NewDesc("robonet_store_writes_wait", "1 while the primary requires a synchronous standby and has none: commits block until one catches up.", nil, nil)
	descLogBytes      = prometheus.NewDesc("robonet_task_log_bytes", "Bytes of the task logs this node keeps (bounded by the task-log-bytes limit).", nil, nil)
	descLogAttempts   = prometheus.NewDesc("robonet_task_log_attempts", "Attempts whose task log this node keeps.", nil, nil)
	descLogDropped    = prometheus.NewDesc("robonet_worker_log_lines_dropped_total", "Log lines worker programs connected to this node sent for attempts it did not know or that had finished: dropped.", nil, nil)
	descMisbehaved    = prometheus.NewDesc("robonet_worker_program_misbehaviour_total", "What worker programs connected to this node did that no honest program does, by kind: unsolicited (an answer to an attempt it was never given, or had answered), too_fast (an answer sooner than --worker-min-runtime).", []string{"kind"}, nil)
)

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descLeader, descTerm, descKnown, descMember, descWagQ, descWagR, descWagW, descWagE, descTrust, descQuar, descHeld, descHeldB, descParked,
		descPoolSlots, descPoolBusy, descPoolDone, descPoolRun, descLogBytes, descLogAttempts, descLogDropped, descMisbehaved,
		descStoreConns, descStoreFailover, descStoreResets, descStoreWriter, descStoreSync, descStoreWait} {
		ch <- d
	}
	for _, d := range partitionDescs {
		ch <- d
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	n := c.n
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	bool01 := func(b bool) float64 {
		if b {
			return 1
		}
		return 0
	}
	l := n.Leadership()
	gauge(descLeader, bool01(l.IsLeader))
	gauge(descTerm, float64(l.Term))
	gauge(descKnown, bool01(l.Leader != ""))

	statuses := map[mesh.MemberStatus]int{mesh.StatusAlive: 0, mesh.StatusSuspect: 0, mesh.StatusLeft: 0, mesh.StatusFailed: 0}
	for _, m := range n.Members() {
		statuses[m.Status]++
	}
	for s, k := range statuses {
		gauge(descMember, float64(k), string(s))
	}

	if n.wagglers != nil {
		for _, st := range n.wagglers.Status() {
			gauge(descWagQ, float64(st.Queued), st.Capability)
			gauge(descWagR, float64(st.Running), st.Capability)
			gauge(descWagW, float64(st.Workers), st.Capability)
			gauge(descWagE, float64(st.Epoch), st.Capability)
		}
	}
	if n.trust != nil {
		tiers := map[string]int{}
		for _, t := range []trust.Tier{trust.Unverified, trust.Provisional, trust.Established, trust.Trusted} {
			tiers[t.String()] = 0
		}
		for _, p := range n.trust.View() {
			if !p.Self {
				tiers[p.Tier]++
			}
		}
		for t, k := range tiers {
			gauge(descTrust, float64(k), t)
		}
	}
	if n.mesh != nil && n.cfg.IsServer() {
		gauge(descQuar, float64(len(n.mesh.State().Quarantine)))
	}
	if n.workers != nil {
		for _, p := range n.workers.PoolStats() {
			gauge(descPoolSlots, float64(p.Slots), p.Capability, p.Pool)
			gauge(descPoolBusy, float64(p.Busy), p.Capability, p.Pool)
			ch <- prometheus.MustNewConstMetric(descPoolDone, prometheus.CounterValue, float64(p.Completed), p.Capability, p.Pool, "completed")
			ch <- prometheus.MustNewConstMetric(descPoolDone, prometheus.CounterValue, float64(p.Failed), p.Capability, p.Pool, "failed")
			buckets := make(map[float64]uint64, len(metrics.TaskBuckets))
			for i, le := range metrics.TaskBuckets {
				buckets[le] = p.Runs.Counts[i]
			}
			ch <- prometheus.MustNewConstHistogram(descPoolRun, p.Runs.Count, p.Runs.Sum.Seconds(), buckets, p.Capability, p.Pool)
		}
	}
	if n.taskLogs != nil {
		u := n.taskLogs.Usage()
		gauge(descLogBytes, float64(u.Bytes))
		gauge(descLogAttempts, float64(u.Attempts))
	}
	if n.external != nil {
		ch <- prometheus.MustNewConstMetric(descLogDropped, prometheus.CounterValue, float64(n.external.DroppedLogLines()))
		for m, k := range n.external.Misbehaviours() {
			ch <- prometheus.MustNewConstMetric(descMisbehaved, prometheus.CounterValue, float64(k), m.String())
		}
	}
	if n.pg != nil {
		c, r := n.pg.ConnStats(), n.pg.ReplicationStats()
		ch <- prometheus.MustNewConstMetric(descStoreConns, prometheus.CounterValue, float64(c.Reconnects))
		ch <- prometheus.MustNewConstMetric(descStoreFailover, prometheus.CounterValue, float64(c.Failovers))
		ch <- prometheus.MustNewConstMetric(descStoreResets, prometheus.CounterValue, float64(c.Resets))
		if c.Host != "" {
			gauge(descStoreWriter, 1, c.Host)
		}
		if r.Known {
			gauge(descStoreSync, float64(r.SyncStandbys))
			gauge(descStoreWait, bool01(r.WritesWait()))
		}
	}
	var st engine.Stats
	if e := n.active.Load(); e != nil {
		st = e.Stats()
	}
	gauge(descHeld, float64(st.Held))
	gauge(descHeldB, float64(st.HeldBack))
	// Counted by the running engine (a new term's starts from zero, as a
	// restarted process's would).
	ch <- prometheus.MustNewConstMetric(descParked, prometheus.CounterValue, float64(st.Parked))
	collectPartitions(n, ch)
}

// runPoolStats collects, while this server's engine leads, every member's
// worker pool statistics into the store (worker_status), every
// PoolStatsInterval. Members that do not answer keep their last row.
func (n *Node) runPoolStats(ctx context.Context) {
	api := newMeshAPI(n)
	tick := time.NewTicker(n.cfg.PoolStatsInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if e := n.active.Load(); e == nil || e.Follower() {
			continue // only the leader's engine writes
		}
		now := n.cfg.Clock.Now().UTC()
		var rows []port.PoolStatus
		for node, rep := range api.askPools(ctx, n.mesh.Members()) {
			if rep.err != nil {
				n.log.Debug("pool statistics not collected", zap.String("member", node), zap.Error(rep.err))
				continue
			}
			for _, p := range rep.pools {
				rows = append(rows, poolStatusOf(node, p, now))
			}
		}
		if err := n.store.RecordPoolStats(ctx, rows); err != nil && ctx.Err() == nil {
			n.log.Warn("storing pool statistics failed", zap.Error(err))
		}
	}
}

func poolStatusOf(node string, p *robonetv1.PoolStats, at time.Time) port.PoolStatus {
	return port.PoolStatus{
		Node: node, Capability: p.GetCapability(), Pool: p.GetPool(), Slots: int(p.GetSlots()), Busy: int(p.GetBusy()),
		Completed: p.GetCompleted(), Failed: p.GetFailed(), PerMinute: int(p.GetPerMinute()),
		LatencyP50: p.GetLatencyP50().AsDuration(), LatencyP99: p.GetLatencyP99().AsDuration(), UpdatedAt: at,
	}
}
