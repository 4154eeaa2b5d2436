package sqlite

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap/zaptest"

	"github.com/robonet/robonet/engine/port"
	"github.com/robonet/robonet/engine/store/storetest"
)

// TestResultsKeepTheirOrderAcrossTheRowidMigration: a database written
// before 0004 (results under AUTOINCREMENT ids) opens with every result
// kept, in recording order, and results recorded afterwards follow them;
// the rebuilt table has no AUTOINCREMENT and no sqlite_sequence row.
func TestResultsKeepTheirOrderAcrossTheRowidMigration(t *testing.T) {
	path := filepath.Join(t.TempDir(), "robonet.db")
	raw, err := sql.Open("sqlite", path+"?_pragma=foreign_keys(1)")
	if err != nil {
		t.Fatalf("opening %s: %v", path, err)
	}
	defer func() { _ = raw.Close() }()
	if _, err := raw.Exec(`CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL) STRICT`); err != nil {
		t.Fatalf("creating schema_migrations: %v", err)
	}
	for v, name := range []string{"0001_initial.sql", "0002_schedules.sql", "0003_pool_slots.sql"} {
		body, err := migrationFiles.ReadFile("migrations/" + name)
		if err != nil {
			t.Fatalf("reading %s: %v", name, err)
		}
		if _, err := raw.Exec(string(body)); err != nil {
			t.Fatalf("applying %s: %v", name, err)
		}
		if _, err := raw.Exec(`INSERT INTO schema_migrations VALUES (?, ?, 0)`, v+1, name); err != nil {
			t.Fatalf("recording %s: %v", name, err)
		}
	}
	// Two instances' results, interleaved; the newest row (id 5) belongs to
	// a finished instance that is deleted, so its id is free again.
	a, b := uuid.New(), uuid.New()
	for _, q := range []string{
		`INSERT INTO workflow_versions (workflow_name, workflow_version, ir_hash, ir, created_at) VALUES ('wf', 1, 'sha256:x', x'00', 0)`,
		fmt.Sprintf(`INSERT INTO runner_instances (instance_id, workflow_version_id, status, inputs, state, created_at, updated_at)
			VALUES ('%s', 1, 'running', x'', x'', 0, 0), ('%s', 1, 'complete', x'', x'', 0, 0)`, a, b),
		fmt.Sprintf(`INSERT INTO queued_instances (instance_id, scheduled_at, created_at) VALUES ('%s', 0, 0)`, a),
	} {
		if _, err := raw.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	for _, r := range []struct {
		inst uuid.UUID
		exec string
	}{{a, "z"}, {b, "x"}, {a, "m"}, {a, "a"}, {b, "y"}} {
		if _, err := raw.Exec(`INSERT INTO runner_actions_done (instance_id, execution_id, attempt, ok, recorded_at) VALUES (?, ?, 1, 1, 0)`,
			r.inst, r.exec); err != nil {
			t.Fatalf("recording %s: %v", r.exec, err)
		}
	}
	if _, err := raw.Exec(`DELETE FROM runner_instances WHERE instance_id = ?`, b); err != nil {
		t.Fatalf("deleting %s: %v", b, err)
	}
	if err := raw.Close(); err != nil {
		t.Fatalf("closing: %v", err)
	}

	s, err := Open(t.Context(), Config{Path: path, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatalf("Open after 0003: %v", err)
	}
	defer func() { _ = s.Close() }()
	owner := uuid.New()
	if got, err := s.ClaimInstances(t.Context(), port.ClaimRequest{Owner: owner, Term: 1, Lease: time.Hour, Limit: 10}); err != nil || len(got) != 1 {
		t.Fatalf("ClaimInstances = %d instances, %v; want %s", len(got), err, a)
	}
	out, err := s.PersistProgress(t.Context(), []port.Progress{{InstanceID: a, Owner: owner,
		Results: []port.ActionResult{{InstanceID: a, ExecutionID: "b", Attempt: 1, OK: true}}}})
	if err != nil || out[0] != nil {
		t.Fatalf("PersistProgress = %v, %v", out, err)
	}
	hist, err := s.TaskHistory(t.Context(), a)
	if err != nil {
		t.Fatalf("TaskHistory: %v", err)
	}
	var order []string
	for _, r := range hist {
		order = append(order, r.ExecutionID)
	}
	if got := strings.Join(order, " "); got != "z m a b" {
		t.Fatalf("history after the migration: %q, want the recording order %q", got, "z m a b")
	}

	var ddl string
	if err := s.r.QueryRow(`SELECT sql FROM sqlite_master WHERE name = 'runner_actions_done'`).Scan(&ddl); err != nil {
		t.Fatalf("reading the table's definition: %v", err)
	}
	if strings.Contains(ddl, "AUTOINCREMENT") {
		t.Fatalf("runner_actions_done is still AUTOINCREMENT: %s", ddl)
	}
	var seq int
	if err := s.r.QueryRow(`SELECT count(*) FROM sqlite_sequence WHERE name = 'runner_actions_done'`).Scan(&seq); err != nil {
		t.Fatalf("reading sqlite_sequence: %v", err)
	}
	if seq != 0 {
		t.Fatalf("sqlite_sequence still counts runner_actions_done")
	}
}

// TestRowsQueuedBeforePartitionsArePartitionZero: a database written
// before 0005 opens with its queued instances in partition 0, where a
// claim of partition 0 finds them and a fence of partition 0 gates them.
func TestRowsQueuedBeforePartitionsArePartitionZero(t *testing.T) {
	path := filepath.Join(t.TempDir(), "robonet.db")
	raw, err := sql.Open("sqlite", path+"?_pragma=foreign_keys(1)")
	if err != nil {
		t.Fatalf("opening %s: %v", path, err)
	}
	defer func() { _ = raw.Close() }()
	if _, err := raw.Exec(`CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL) STRICT`); err != nil {
		t.Fatalf("creating schema_migrations: %v", err)
	}
	for v, name := range []string{"0001_initial.sql", "0002_schedules.sql", "0003_pool_slots.sql", "0004_results_rowid.sql"} {
		body, err := migrationFiles.ReadFile("migrations/" + name)
		if err != nil {
			t.Fatalf("reading %s: %v", name, err)
		}
		if _, err := raw.Exec(string(body)); err != nil {
			t.Fatalf("applying %s: %v", name, err)
		}
		if _, err := raw.Exec(`INSERT INTO schema_migrations VALUES (?, ?, 0)`, v+1, name); err != nil {
			t.Fatalf("recording %s: %v", name, err)
		}
	}
	old := uuid.New()
	for _, q := range []string{
		`INSERT INTO workflow_versions (workflow_name, workflow_version, ir_hash, ir, created_at) VALUES ('wf', 1, 'sha256:x', x'00', 0)`,
		fmt.Sprintf(`INSERT INTO runner_instances (instance_id, workflow_version_id, status, inputs, state, created_at, updated_at)
			VALUES ('%s', 1, 'queued', x'', x'', 0, 0)`, old),
		fmt.Sprintf(`INSERT INTO queued_instances (instance_id, scheduled_at, created_at) VALUES ('%s', 0, 0)`, old),
	} {
		if _, err := raw.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := raw.Close(); err != nil {
		t.Fatalf("closing: %v", err)
	}

	s, err := Open(t.Context(), Config{Path: path, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatalf("Open after 0004: %v", err)
	}
	defer func() { _ = s.Close() }()
	storetest.CheckUpgradedRow(t, s, old)
}
