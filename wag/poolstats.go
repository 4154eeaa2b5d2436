package wag

import (
	"slices"
	"time"

	"github.com/robonet/robonet/internal/metrics"
)

// PoolStats is what one worker pool did lately, for operators: the leader
// collects every node's into the store (worker_status), roboctl members
// -o wide and the metrics show them.
type PoolStats struct {
	Capability string
	Pool       string // the pool's name: the capability for a node's own pool, the program's for an external one
	Slots      int
	Busy       int    // slots running an attempt now
	Completed  uint64 // attempts that succeeded since the pool started
	Failed     uint64 // attempts that failed (errors, timeouts, bad outputs)
	// PerMinute is how many attempts finished in the last minute.
	PerMinute int
	// LatencyP50 and LatencyP99 are the run times of the last (up to)
	// meterSamples attempts.
	LatencyP50, LatencyP99 time.Duration
	// Runs are the run times of every attempt the pool finished, counted
	// in the buckets of metrics.TaskBuckets (the robonet_pool_run_seconds
	// histogram).
	Runs RunHistogram
}

// RunHistogram counts run times in buckets: Counts[i] attempts ran at most
// metrics.TaskBuckets[i] seconds (cumulative, as Prometheus counts them);
// Count and Sum are over every attempt.
type RunHistogram struct {
	Counts []uint64
	Count  uint64
	Sum    time.Duration
}

// Utilisation is the share of the pool's slots busy now.
func (s PoolStats) Utilisation() float64 {
	if s.Slots == 0 {
		return 0
	}
	return float64(s.Busy) / float64(s.Slots)
}

// meterSamples is how many recent run times a pool keeps for its
// percentiles.
const meterSamples = 256

// poolMeter counts a pool's finished attempts: totals, the run times of
// the latest ones, and finishes per second over the last minute. Guarded
// by the pool's mutex.
type poolMeter struct {
	completed, failed uint64
	// buckets[i] counts the run times in (TaskBuckets[i-1], TaskBuckets[i]];
	// the last one those above every bound.
	buckets   []uint64
	runSum    time.Duration
	runs      [meterSamples]time.Duration
	n, next   int
	perSecond [60]struct {
		sec int64
		n   int
	}
}

func (m *poolMeter) record(finished time.Time, run time.Duration, ok bool) {
	if ok {
		m.completed++
	} else {
		m.failed++
	}
	if m.buckets == nil {
		m.buckets = make([]uint64, len(metrics.TaskBuckets)+1)
	}
	m.buckets[bucketOf(run)]++
	m.runSum += run
	m.runs[m.next] = run
	m.next = (m.next + 1) % meterSamples
	m.n = min(m.n+1, meterSamples)
	sec := finished.Unix()
	b := &m.perSecond[sec%60]
	if b.sec != sec {
		b.sec, b.n = sec, 0
	}
	b.n++
}

// bucketOf is the index of the bucket run falls in.
func bucketOf(run time.Duration) int {
	sec := run.Seconds()
	i, _ := slices.BinarySearch(metrics.TaskBuckets, sec) // the first bound >= sec
	return i
}

// read fills the meter's part of s as of now.
func (m *poolMeter) read(s *PoolStats, now time.Time) {
	s.Completed, s.Failed = m.completed, m.failed
	s.Runs = RunHistogram{Counts: make([]uint64, len(metrics.TaskBuckets)), Count: m.completed + m.failed, Sum: m.runSum}
	var below uint64
	for i := range metrics.TaskBuckets {
		if m.buckets != nil {
			below += m.buckets[i]
		}
		s.Runs.Counts[i] = below
	}
	cut := now.Unix() - 60
	for _, b := range m.perSecond {
		if b.sec > cut {
			s.PerMinute += b.n
		}
	}
	if m.n == 0 {
		return
	}
	runs := slices.Clone(m.runs[:m.n])
	slices.Sort(runs)
	s.LatencyP50, s.LatencyP99 = nearestRank(runs, 50), nearestRank(runs, 99)
}

// nearestRank is the pct-th percentile of sorted by the nearest-rank
// method: the smallest value with at least pct% of the values at or below
// it (of four values, the 99th percentile is the largest).
func nearestRank(sorted []time.Duration, pct int) time.Duration {
	rank := (pct*len(sorted) + 99) / 100 // ceil(pct/100 * n)
	return sorted[max(rank, 1)-1]
}

// stats returns the pool's statistics now.
func (p *pool) stats() PoolStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := PoolStats{Capability: p.capability, Pool: p.capability, Slots: len(p.slots)}
	if p.poolName != "" {
		s.Pool = p.poolName
	}
	for _, sl := range p.slots {
		if sl.cur != nil {
			s.Busy++
		}
	}
	p.meter.read(&s, p.clock.Now())
	return s
}

// PoolStats returns the statistics of every pool of this node, by
// capability and pool.
func (h *WorkerHost) PoolStats() []PoolStats {
	h.mu.Lock()
	var pools []*pool
	for _, ps := range h.pools {
		pools = append(pools, ps...)
	}
	h.mu.Unlock()
	out := make([]PoolStats, 0, len(pools))
	for _, p := range pools {
		out = append(out, p.stats())
	}
	slices.SortFunc(out, func(a, b PoolStats) int {
		if a.Capability != b.Capability {
			if a.Capability < b.Capability {
				return -1
			}
			return 1
		}
		if a.Pool < b.Pool {
			return -1
		}
		if a.Pool > b.Pool {
			return 1
		}
		return 0
	})
	return out
}
