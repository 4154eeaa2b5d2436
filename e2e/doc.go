// Package e2e holds roboNet's end-to-end tests: a node started in-process
// (against SQLite in a temporary directory and against Postgres) is driven
// through its real gRPC API on 127.0.0.1, and for the crash tests a real
// robonode process, built once per run, is killed with SIGKILL mid-workflow
// and restarted on the same data directory or database.
//
// The package has no production code; run it with
//
//	scripts/with-postgres go test -race ./e2e/
//
// Without ROBONET_TEST_POSTGRES the Postgres variants are skipped (they
// fail under CI=true, see engine/store/postgres/pgtest).
package e2e
