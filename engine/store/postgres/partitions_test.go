package postgres

import (
	"errors"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/robonet/robonet/engine/port"
	"github.com/robonet/robonet/engine/store/postgres/pgtest"
	"github.com/robonet/robonet/engine/store/storetest"
)

// TestConcurrentFencesOfANewPartition: fences racing for a partition that
// has no row yet (so SELECT … FOR UPDATE locks nothing, and they meet only
// at the insert) still judge by epoch, on two nodes. Of fences at distinct
// epochs the highest wins and the stored row is its; of two at one epoch
// exactly one succeeds; every loser gets ErrStaleEpoch and nothing else.
func TestConcurrentFencesOfANewPartition(t *testing.T) {
	dsn, schema := pgtest.Schema(t)
	nodes := []*Store{openOn(t, dsn, schema, nil), openOn(t, dsn, schema, nil)}

	const racers = 6
	race := func(p int, epochs []uint64) (owners []uuid.UUID, errs []error) {
		owners, errs = make([]uuid.UUID, len(epochs)), make([]error, len(epochs))
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i, epoch := range epochs {
			owners[i] = uuid.New()
			wg.Go(func() {
				<-start
				errs[i] = nodes[i%len(nodes)].FencePartitions(t.Context(),
					port.FenceRequest{Owner: owners[i], Epochs: map[int]uint64{p: epoch}})
			})
		}
		close(start)
		wg.Wait()
		for i, err := range errs {
			if err != nil && !errors.Is(err, port.ErrStaleEpoch) {
				t.Fatalf("partition %d: the fence at epoch %d failed with %v, want success or ErrStaleEpoch", p, epochs[i], err)
			}
		}
		return owners, errs
	}
	stored := func(p int) port.PartitionOwner {
		all, err := nodes[0].Partitions(t.Context())
		if err != nil {
			t.Fatalf("Partitions: %v", err)
		}
		for _, got := range all {
			if got.Partition == p {
				return got
			}
		}
		t.Fatalf("partition %d is not stored", p)
		return port.PartitionOwner{}
	}

	for p := range 40 {
		if p%2 == 0 {
			epochs := make([]uint64, racers)
			for i := range epochs {
				epochs[i] = uint64(racers - i) // the highest starts first
			}
			owners, errs := race(p, epochs)
			if errs[0] != nil {
				t.Fatalf("partition %d: the fence at the highest epoch failed: %v", p, errs[0])
			}
			if got := stored(p); got.Owner != owners[0] || got.Epoch != epochs[0] {
				t.Fatalf("partition %d: stored %+v, want the highest epoch's owner %s at %d", p, got, owners[0], epochs[0])
			}
			continue
		}
		owners, errs := race(p, []uint64{7, 7})
		if (errs[0] == nil) == (errs[1] == nil) {
			t.Fatalf("partition %d: two owners fencing at one epoch: %v and %v, want exactly one to succeed", p, errs[0], errs[1])
		}
		winner := owners[0]
		if errs[0] != nil {
			winner = owners[1]
		}
		if got := stored(p); got.Owner != winner || got.Epoch != 7 {
			t.Fatalf("partition %d: stored %+v, want the winner %s at 7", p, got, winner)
		}
	}
}

// TestRowsQueuedBeforePartitionsArePartitionZero: a schema migrated up to
// 0003 and holding a queued instance opens with the instance in partition
// 0, where a claim of partition 0 finds it and a fence of partition 0
// gates it.
func TestRowsQueuedBeforePartitionsArePartitionZero(t *testing.T) {
	dsn, schema := pgtest.Schema(t)
	migrations, err := loadMigrations()
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatalf("connecting: %v", err)
	}
	defer func() { _ = conn.Close(t.Context()) }()
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := conn.Exec(t.Context(), q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec(`SET search_path = ` + pgx.Identifier{schema}.Sanitize())
	exec(`CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`)
	for _, m := range migrations {
		if m.version < 4 {
			exec(m.sql)
			exec(`INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, m.version, m.name)
		}
	}
	old := uuid.New()
	exec(`INSERT INTO workflow_versions (workflow_name, workflow_version, ir_hash, ir) VALUES ('wf', 1, 'sha256:x', 'x')`)
	exec(`INSERT INTO runner_instances (instance_id, workflow_version_id, status, inputs, state) VALUES ($1, 1, 'queued', '', '')`, old)
	exec(`INSERT INTO queued_instances (instance_id, scheduled_at) VALUES ($1, now())`, old)

	s := openOn(t, dsn, schema, nil)
	storetest.CheckUpgradedRow(t, s, old)
}
