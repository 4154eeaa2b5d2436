package node

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/robonet/robonet/engine"
	"github.com/robonet/robonet/internal/clock"
	"github.com/robonet/robonet/mesh"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// partitionRateWindow is how far back ListPartitions looks for the tasks a
// second of each partition, and partitionSampleEvery how often the node
// samples its engine's counts for it.
const (
	partitionRateWindow  = 10 * time.Second
	partitionSampleEvery = time.Second
)

// partitionRates keeps recent samples of the engine's per-partition task
// counts, so that a rate is there at the first ListPartitions.
type partitionRates struct {
	mu      sync.Mutex
	owner   *engine.Engine // the engine the samples are of
	samples []partitionSample
}

type partitionSample struct {
	at    time.Time
	tasks map[int]uint64
}

// sample records e's counts now, forgetting samples older than the window
// or of another engine.
func (r *partitionRates) sample(e *engine.Engine, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e != r.owner {
		r.owner, r.samples = e, nil
	}
	if e == nil {
		return
	}
	s := partitionSample{at: now, tasks: map[int]uint64{}}
	for _, st := range e.PartitionStats() {
		s.tasks[st.Partition] = st.Tasks
	}
	r.samples = append(r.samples, s)
	cut := 0
	for cut < len(r.samples)-1 && now.Sub(r.samples[cut].at) > partitionRateWindow {
		cut++
	}
	r.samples = slices.Delete(r.samples, 0, cut)
}

// rate is partition p's tasks a second between the oldest sample and the
// count now, or 0 before two samples a second apart exist.
func (r *partitionRates) rate(e *engine.Engine, p int, tasks uint64, now time.Time) float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e != r.owner || len(r.samples) == 0 {
		return 0
	}
	first := r.samples[0]
	dt := now.Sub(first.at).Seconds()
	if dt < 1 || tasks < first.tasks[p] {
		return 0
	}
	return float64(tasks-first.tasks[p]) / dt
}

// runPartitionRates samples the active engine's counts every second.
func (n *Node) runPartitionRates(ctx context.Context, clk clock.Clock) {
	clock.Every(ctx, clk, partitionSampleEvery, func() { n.partRates.sample(n.active.Load(), clk.Now()) })
}

// partitionCheckWait bounds how long a server started with --partitions
// waits for the mesh's partition count to reach it before it starts.
const partitionCheckWait = 30 * time.Second

// checkPartitions refuses to start a server whose --partitions differs
// from the count the mesh was created with, once that count reached it
// (a new mesh's first leader records it within a second; a server that
// joins has it as soon as its log caught up).
func (n *Node) checkPartitions(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, partitionCheckWait)
	defer cancel()
	for {
		changed := n.mesh.StateChanged()
		if n.mesh.State().PartitionCount > 0 {
			return n.mesh.CheckPartitions()
		}
		select {
		case <-ctx.Done():
			n.log.Warn("the mesh's partition count did not reach this server in time: --partitions is not checked",
				zap.Duration("waited", partitionCheckWait))
			return nil
		case <-changed:
		}
	}
}

// ListPartitions lists the mesh's partitions: owners, epochs and moves
// from this server's control state, and each owner's counts — its own
// engine's, and every other owner's through LocalPartitions, asked in
// parallel (an owner that does not answer within the ask timeout leaves
// its partitions without stats). A worker-only node has no control state
// and asks the leader.
func (s *meshAPI) ListPartitions(ctx context.Context, req *robonetv1.ListPartitionsRequest) (*robonetv1.ListPartitionsResponse, error) {
	st := s.mesh.State()
	if !s.server {
		l := s.mesh.Leader()
		cc, fctx, err := s.toLeader(ctx, l, "partitions", "to answer it")
		if err != nil {
			return nil, err
		}
		return robonetv1.NewMeshServiceClient(cc).ListPartitions(fctx, req)
	}
	resp := &robonetv1.ListPartitionsResponse{AnsweredBy: s.self, Count: uint32(st.PartitionCount), Placement: s.placement.String()}
	owners := map[string]bool{}
	for _, a := range st.Partitions {
		if a.Node != "" {
			owners[a.Node] = true
		}
	}
	byName := map[string]mesh.Member{}
	for _, m := range s.mesh.Members() {
		byName[m.Name] = m
	}
	var (
		mu    sync.Mutex
		wg    sync.WaitGroup
		stats = map[int]*robonetv1.PartitionInfo{}
	)
	for owner := range owners {
		wg.Go(func() {
			got, err := askNode(ctx, s, owner, byName, s.LocalPartitions, robonetv1.MeshServiceClient.LocalPartitions)
			if err != nil {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for _, pi := range got.GetPartitions() {
				if pi.GetOwner() == owner {
					stats[int(pi.GetPartition())] = pi
				}
			}
		})
	}
	wg.Wait()
	for p := range st.PartitionCount {
		a := st.Partitions[p]
		pi := &robonetv1.PartitionInfo{Partition: uint32(p), Owner: a.Node, Epoch: a.Epoch, Term: a.Term, Reason: a.Reason}
		if !a.At.IsZero() {
			pi.MovedAtUnixNanos = a.At.UnixNano()
		}
		if got, ok := stats[p]; ok && got.GetEpoch() == a.Epoch {
			pi.HasStats = true
			pi.InstancesHeld, pi.TasksTotal = got.GetInstancesHeld(), got.GetTasksTotal()
			pi.WritesRefused, pi.TasksPerSecond = got.GetWritesRefused(), got.GetTasksPerSecond()
		}
		resp.Partitions = append(resp.Partitions, pi)
	}
	return resp, nil
}

// LocalPartitions reports the partitions this server's engine owns, at
// the epochs it owns them, with its counts.
func (s *meshAPI) LocalPartitions(context.Context, *robonetv1.LocalPartitionsRequest) (*robonetv1.LocalPartitionsResponse, error) {
	resp := &robonetv1.LocalPartitionsResponse{}
	var e *engine.Engine
	if s.engine != nil {
		e = s.engine()
	}
	if e == nil {
		return resp, nil
	}
	now := s.now()
	for _, ps := range e.PartitionStats() {
		resp.Partitions = append(resp.Partitions, &robonetv1.PartitionInfo{
			Partition: uint32(ps.Partition), Owner: s.self, Epoch: ps.Epoch, HasStats: true,
			InstancesHeld: uint64(ps.Held), TasksTotal: ps.Tasks, WritesRefused: ps.Evictions,
			TasksPerSecond: s.rates.rate(e, ps.Partition, ps.Tasks, now),
		})
	}
	return resp, nil
}

var (
	partLabels      = []string{"partition"}
	descPartCount   = prometheus.NewDesc("robonet_partitions", "The mesh's partition count, as this server's control state says (0 until the first leader records it).", nil, nil)
	descPartEpoch   = prometheus.NewDesc("robonet_partition_epoch", "The epoch at which this node's engine owns a partition (series only for the partitions it owns).", partLabels, nil)
	descPartHeld    = prometheus.NewDesc("robonet_partition_instances_held", "Instances of a partition this node's engine holds in memory.", partLabels, nil)
	descPartTasks   = prometheus.NewDesc("robonet_partition_tasks_total", "Task results this node's engine recorded for a partition since it started (it restarts with each term).", partLabels, nil)
	descPartRefused = prometheus.NewDesc("robonet_partition_evictions_total", "Instances of a partition this node's engine dropped because the store refused its write (another owner fenced the partition, or took the instance).", partLabels, nil)
)

// partitionDescs are the partition series' descriptions.
var partitionDescs = []*prometheus.Desc{descPartCount, descPartEpoch, descPartHeld, descPartTasks, descPartRefused}

// collectPartitions adds the partition series: the count from the control
// state (servers), the owned partitions' numbers from the active engine.
func collectPartitions(n *Node, ch chan<- prometheus.Metric) {
	if n.mesh != nil && n.cfg.IsServer() {
		ch <- prometheus.MustNewConstMetric(descPartCount, prometheus.GaugeValue, float64(n.mesh.State().PartitionCount))
	}
	e := n.active.Load()
	if e == nil {
		return
	}
	for _, ps := range e.PartitionStats() {
		p := strconv.Itoa(ps.Partition)
		ch <- prometheus.MustNewConstMetric(descPartEpoch, prometheus.GaugeValue, float64(ps.Epoch), p)
		ch <- prometheus.MustNewConstMetric(descPartHeld, prometheus.GaugeValue, float64(ps.Held), p)
		ch <- prometheus.MustNewConstMetric(descPartTasks, prometheus.CounterValue, float64(ps.Tasks), p)
		ch <- prometheus.MustNewConstMetric(descPartRefused, prometheus.CounterValue, float64(ps.Evictions), p)
	}
}
