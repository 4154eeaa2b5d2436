package postgres

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"
)

// ReplicationStats is what the primary says of its replication, as the
// store last read it.
type ReplicationStats struct {
	// Known is false until the first successful read.
	Known bool
	// SyncRequired: synchronous_standby_names is set, so a commit waits
	// until a synchronous standby has it.
	SyncRequired bool
	// SyncStandbys is the number of standbys streaming synchronously (or
	// in the quorum); -1 when the store's role may not see it (it needs
	// pg_read_all_stats).
	SyncStandbys int
	// Standbys is the number of standbys streaming at all.
	Standbys int
	// CheckedAt is when it was read.
	CheckedAt time.Time
}

// WritesWait reports whether commits wait for a synchronous standby that
// is not there: the database refuses writes (they block) rather than
// keeping them on one host only.
func (r ReplicationStats) WritesWait() bool {
	return r.Known && r.SyncRequired && r.SyncStandbys == 0
}

// replWatch holds the last ReplicationStats.
type replWatch struct {
	mu   sync.Mutex
	last ReplicationStats
}

// ReplicationStats returns the primary's replication as last read.
func (s *Store) ReplicationStats() ReplicationStats {
	s.repl.mu.Lock()
	defer s.repl.mu.Unlock()
	return s.repl.last
}

const replicationSQL = `-- name: replication_state
SELECT current_setting('synchronous_standby_names') <> '',
       count(*) FILTER (WHERE sync_state IN ('sync', 'quorum')),
       count(*) FILTER (WHERE sync_state IS NULL),
       count(*)
FROM pg_stat_replication`

// watchReplication reads the replication state every interval until ctx
// ends, and says so loudly when commits start (and stop) waiting for a
// synchronous standby that is not there.
func (s *Store) watchReplication(ctx context.Context, interval time.Duration) {
	defer close(s.healthDone)
	if interval < 0 {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		s.readReplication(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *Store) readReplication(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var (
		r              = ReplicationStats{Known: true, CheckedAt: time.Now()}
		syncN, unknown int
	)
	if err := s.pool.QueryRow(ctx, replicationSQL).Scan(&r.SyncRequired, &syncN, &unknown, &r.Standbys); err != nil {
		if ctx.Err() == nil {
			s.log.Debug("reading the replication state", zap.Error(err))
		}
		return
	}
	r.SyncStandbys = syncN
	if unknown > 0 && syncN == 0 {
		r.SyncStandbys = -1
	}
	s.repl.mu.Lock()
	was := s.repl.last
	s.repl.last = r
	s.repl.mu.Unlock()
	switch {
	case r.WritesWait() && !was.WritesWait():
		s.log.Error("writes wait: the primary requires a synchronous standby and none is streaming; "+
			"every commit blocks until one catches up (nothing is acknowledged on one host alone)",
			zap.String("host", s.ConnStats().Host), zap.Int("standbys", r.Standbys))
	case was.WritesWait() && !r.WritesWait():
		s.log.Info("a synchronous standby is streaming again; writes resume", zap.Int("sync_standbys", r.SyncStandbys))
	}
}
