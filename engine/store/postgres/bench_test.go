package postgres

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/robonet/robonet/engine/port"
	"github.com/robonet/robonet/engine/store/postgres/pgtest"
	"github.com/robonet/robonet/engine/store/storetest"
)

// Benchmarks against a real server (ROBONET_TEST_POSTGRES):
//
//	scripts/with-postgres go test -run '^$' -bench . -benchtime 3x ./engine/store/postgres/

// openBench opens a store on a fresh schema.
func openBench(b *testing.B) *Store {
	b.Helper()
	dsn, schema := pgtest.Schema(b)
	s, err := Open(b.Context(), Config{DSN: dsn, Schema: schema, MaxConns: 4})
	if err != nil {
		b.Fatalf("Open: %v", err)
	}
	b.Cleanup(func() { _ = s.Close() })
	return s
}

// benchStore opens a store on a fresh schema with n claimed instances.
func benchStore(b *testing.B, n int) (*Store, uuid.UUID, []uuid.UUID) {
	b.Helper()
	s := openBench(b)
	wf, err := s.RegisterWorkflow(b.Context(), port.WorkflowVersion{Name: "bench", Version: 1, IRHash: "sha256:b", IR: []byte("b")})
	if err != nil {
		b.Fatalf("RegisterWorkflow: %v", err)
	}
	batch := make([]port.NewInstance, n)
	ids := make([]uuid.UUID, n)
	for i := range batch {
		ids[i] = uuid.New()
		batch[i] = port.NewInstance{ID: ids[i], WorkflowVersionID: wf.ID, Inputs: []byte(`{"n":1}`), State: []byte("small state")}
	}
	if _, err := s.QueueInstances(b.Context(), batch); err != nil {
		b.Fatalf("QueueInstances: %v", err)
	}
	owner := uuid.New()
	claimed, err := s.ClaimInstances(b.Context(), port.ClaimRequest{Owner: owner, Term: 1, Lease: time.Hour, Limit: n})
	if err != nil || len(claimed) != n {
		b.Fatalf("claim: %d instances, %v", len(claimed), err)
	}
	return s, owner, ids
}

// BenchmarkPersistResults compares persisting action results through the
// adapter (PersistProgress: lease check, lock, dedup) with a plain
// multi-row INSERT of the same number of rows into the same table, in the
// same run. Each op is one batch of 500 results over 100 instances for
// each of the two. Target: adapter-rows/s >= 1/2 of plain-rows/s.
func BenchmarkPersistResults(b *testing.B) {
	const (
		instances   = 100
		perInstance = 5
		rows        = instances * perInstance
	)
	s, owner, ids := benchStore(b, instances)
	output := []byte(`{"status":200,"body":"ok"}`)
	now := time.Now()

	// The plain statement: INSERT … VALUES (…), (…), … with 500 rows.
	var sql strings.Builder
	sql.WriteString(`INSERT INTO runner_actions_done (instance_id, execution_id, attempt, ok, output, error, worker_id, started_at, finished_at) VALUES `)
	for r := range rows {
		if r > 0 {
			sql.WriteString(", ")
		}
		p := r*9 + 1
		fmt.Fprintf(&sql, "($%d, $%d, $%d, $%d, $%d, $%d, $%d, $%d, $%d)", p, p+1, p+2, p+3, p+4, p+5, p+6, p+7, p+8)
	}
	plainSQL := sql.String()

	var adapterTime, plainTime time.Duration
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		attempt := uint32(i + 1)
		batch := make([]port.Progress, instances)
		args := make([]any, 0, rows*9)
		for k, id := range ids {
			results := make([]port.ActionResult, perInstance)
			for j := range results {
				results[j] = port.ActionResult{ExecutionID: fmt.Sprintf("task[%d]", j), Attempt: attempt, OK: true,
					Output: output, WorkerID: "w1", StartedAt: now, FinishedAt: now}
				args = append(args, id, fmt.Sprintf("plain[%d]", j), int64(attempt), true, output, "", "w1", now, now)
			}
			batch[k] = port.Progress{InstanceID: id, Owner: owner, Results: results}
		}

		start := time.Now()
		outcomes, err := s.PersistProgress(b.Context(), batch)
		adapterTime += time.Since(start)
		if err != nil {
			b.Fatalf("PersistProgress: %v", err)
		}
		for _, err := range outcomes {
			if err != nil {
				b.Fatalf("PersistProgress outcome: %v", err)
			}
		}

		start = time.Now()
		if _, err := s.pool.Exec(b.Context(), plainSQL, args...); err != nil {
			b.Fatalf("plain insert: %v", err)
		}
		plainTime += time.Since(start)
	}
	n := float64(b.N * rows)
	adapterRate, plainRate := n/adapterTime.Seconds(), n/plainTime.Seconds()
	b.ReportMetric(adapterRate, "adapter-rows/s")
	b.ReportMetric(plainRate, "plain-rows/s")
	b.ReportMetric(adapterRate/plainRate, "adapter/plain")
}

// BenchmarkClaimHydrate1000 claims 1,000 small instances, each with three
// recorded results, in one call, and hydrates them (snapshot, inputs,
// latest result per execution). Every op claims with a newer term, which
// takes the previous op's leases over at once. Target: < 50 ms/op.
func BenchmarkClaimHydrate1000(b *testing.B) {
	const n = 1000
	s, owner, ids := benchStore(b, n)
	progress := make([]port.Progress, n)
	for i, id := range ids {
		progress[i] = port.Progress{InstanceID: id, Owner: owner, State: []byte("state after three tasks"), Results: []port.ActionResult{
			{ExecutionID: "a", Attempt: 1, OK: true, Output: []byte(`1`)},
			{ExecutionID: "b", Attempt: 1, OK: false, Error: "flaky"},
			{ExecutionID: "b", Attempt: 2, OK: true, Output: []byte(`2`)},
			{ExecutionID: "c", Attempt: 1, OK: true, Output: []byte(`3`)},
		}}
	}
	if _, err := s.PersistProgress(b.Context(), progress); err != nil {
		b.Fatalf("PersistProgress: %v", err)
	}
	if _, err := s.pool.Exec(b.Context(), `VACUUM ANALYZE`); err != nil {
		b.Fatalf("vacuum: %v", err)
	}

	b.ResetTimer()
	for term := uint64(2); b.Loop(); term++ {
		claimed, err := s.ClaimInstances(b.Context(), port.ClaimRequest{Owner: uuid.New(), Term: term, Lease: time.Hour, Limit: n})
		if err != nil {
			b.Fatalf("claim: %v", err)
		}
		if len(claimed) != n || len(claimed[0].Results) != 3 {
			b.Fatalf("claimed %d instances with %d results, want %d with 3", len(claimed), len(claimed[0].Results), n)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/op")
}

// BenchmarkRecordSignals is a storm of signals, one transaction per signal
// against one per batch of 100 (storetest.BenchRecordSignals). With
// ROBONET_PG_DURABLE=1 the server fsyncs every commit, as in production.
func BenchmarkRecordSignals(b *testing.B) {
	storetest.BenchRecordSignals(b, func(b *testing.B) port.Store { return openBench(b) })
}
