// Package pgtest gives tests a throwaway place in a real Postgres server:
// a fresh schema per test, dropped when the test ends. The server comes from
// the ROBONET_TEST_POSTGRES environment variable (a DSN); scripts/with-postgres
// starts a throwaway server and sets it.
//
// Without the variable, tests that need Postgres are skipped — except under
// CI=true, where a missing server is a failure, so that CI can never go green
// by silently skipping the database tests.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvDSN names the environment variable holding the test server's DSN.
const EnvDSN = "ROBONET_TEST_POSTGRES"

// DSN returns the test server's DSN. Without one it skips the test, or
// fails it when CI=true.
func DSN(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv(EnvDSN)
	if dsn != "" {
		return dsn
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s is not set, and CI=true forbids skipping the Postgres tests: run them through "+
			"scripts/with-postgres (e.g. `scripts/with-postgres go test ./...`), or set %s to a server's DSN", EnvDSN, EnvDSN)
	}
	t.Skipf("%s is not set: skipping a test that needs Postgres (run it with scripts/with-postgres)", EnvDSN)
	return ""
}

// Schema creates an empty schema named test_<random> on the test server
// and drops it, with everything in it, when the test and its cleanups
// registered earlier are done. It returns the DSN and the schema name; a
// store opened with that schema as its search_path sees only its own
// tables, so tests can run in parallel on one server.
func Schema(t testing.TB) (dsn, schema string) {
	t.Helper()
	dsn = DSN(t)
	schema = "test_" + randomHex(t, 8)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	exec(ctx, t, dsn, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		exec(ctx, t, dsn, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
	})
	return dsn, schema
}

// Exec runs one statement on its own short-lived connection (no pool, so
// no background goroutine outlives the call).
func Exec(t testing.TB, sql string, args ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	exec(ctx, t, DSN(t), sql, args...)
}

func exec(ctx context.Context, t testing.TB, dsn, sql string, args ...any) {
	t.Helper()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("pgtest: connecting to %s: %v", EnvDSN, err)
	}
	defer func() { _ = conn.Close(ctx) }()
	if _, err := conn.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("pgtest: %s: %v", sql, err)
	}
}

func randomHex(t testing.TB, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatalf("pgtest: random schema name: %v", err)
	}
	return hex.EncodeToString(b)
}
