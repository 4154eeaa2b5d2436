package postgres

import (
	"testing"

	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"

	"github.com/robonet/robonet/engine/port"
	"github.com/robonet/robonet/engine/store/postgres/pgtest"
	"github.com/robonet/robonet/engine/store/storetest"
)

// TestMain checks that no test leaves a goroutine behind: Close waits for
// the pool's goroutines, so no pgx goroutine needs to be ignored.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// openTest opens a store on a fresh schema of the test server; the store is
// closed and the schema dropped when the test ends.
func openTest(t testing.TB) *Store {
	t.Helper()
	dsn, schema := pgtest.Schema(t)
	s, err := Open(t.Context(), Config{DSN: dsn, Schema: schema, MaxConns: 8, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	pgtest.DSN(t) // skip (or fail under CI) before spawning subtests
	storetest.Run(t, func(t *testing.T) port.Store { return openTest(t) })
}

func TestCrashSafety(t *testing.T) {
	pgtest.DSN(t)
	storetest.RunCrashSafety(t, func(t *testing.T) port.Store { return openTest(t) })
}
