package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"go.uber.org/zap/zaptest"

	"github.com/robonet/robonet/engine/port"
	"github.com/robonet/robonet/engine/store/postgres/pgtest"
)

func TestClassify(t *testing.T) {
	done, cancel := context.WithCancel(context.Background())
	cancel()
	pg := func(code string) error { return fmt.Errorf("persist: %w", &pgconn.PgError{Code: code, Message: "m"}) }
	cases := []struct {
		name string
		ctx  context.Context
		err  error
		want classification
	}{
		{"read-only: a standby now", nil, pg("25006"), classification{transient: true, reset: true}},
		{"admin shutdown: may have committed locally", nil, pg("57P01"), classification{transient: true, unknown: true, reset: true}},
		{"cannot connect now", nil, pg("57P03"), classification{transient: true, unknown: true, reset: true}},
		{"connection failure", nil, pg("08006"), classification{transient: true, unknown: true, reset: true}},
		{"too many connections", nil, pg("53300"), classification{transient: true}},
		{"serialization failure", nil, pg("40001"), classification{transient: true}},
		{"deadlock", nil, pg("40P01"), classification{transient: true}},
		{"bad data: refused every time", nil, pg("22021"), classification{}},
		{"a constraint", nil, pg("23505"), classification{}},
		{"connection lost mid-request", nil, fmt.Errorf("complete: %w", io.ErrUnexpectedEOF), classification{transient: true, unknown: true, reset: true}},
		{"reset by peer", nil, &net.OpError{Op: "read", Err: errors.New("connection reset by peer")}, classification{transient: true, unknown: true, reset: true}},
		{"connect failed", nil, &pgconn.ConnectError{Config: &pgconn.Config{}}, classification{transient: true, reset: true}},
		{"the caller gave up", done, io.ErrUnexpectedEOF, classification{}},
		{"a bug of ours", nil, errors.New("scanning: cannot scan text into *int"), classification{}},
	}
	for _, c := range cases {
		ctx := c.ctx
		if ctx == nil {
			ctx = context.Background()
		}
		if got := classify(ctx, c.err); got != c.want {
			t.Errorf("%s: classify(%v) = %+v, want %+v", c.name, c.err, got, c.want)
		}
	}
	wrapped := &unavailableError{err: io.ErrUnexpectedEOF, unknown: true}
	if !errors.Is(wrapped, port.ErrStoreUnavailable) || !errors.Is(wrapped, port.ErrOutcomeUnknown) || !errors.Is(wrapped, io.ErrUnexpectedEOF) ||
		wrapped.Error() != io.ErrUnexpectedEOF.Error() {
		t.Errorf("the wrapped error does not match its sentinels and cause: %v", wrapped)
	}
}

// A demoted primary that came back as a standby still holds the pool's
// connections: the first write refused as read-only drops them all, and
// the next write goes to a writable host.
func TestReadOnlyConnectionsAreDropped(t *testing.T) {
	dsn, schema := pgtest.Schema(t)
	s := openOn(t, dsn, schema, nil)
	ids := seed(t, s, 1)
	conns := make([]interface{ Release() }, 0, 4)
	for range 4 { // the pool's every connection turns read-only, as on a standby
		c, err := s.pool.Acquire(t.Context())
		if err != nil {
			t.Fatalf("Acquire: %v", err)
		}
		if _, err := c.Exec(t.Context(), `SET default_transaction_read_only = on`); err != nil {
			t.Fatalf("SET: %v", err)
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		c.Release()
	}
	before := s.ConnStats()

	err := s.RequestCancel(t.Context(), ids[0])
	if !errors.Is(err, port.ErrStoreUnavailable) || errors.Is(err, port.ErrOutcomeUnknown) {
		t.Fatalf("a write on a read-only connection: %v, want ErrStoreUnavailable (not applied)", err)
	}
	if err := s.RequestCancel(t.Context(), ids[0]); err != nil {
		t.Fatalf("the write after the pool was reset: %v", err)
	}
	if after := s.ConnStats(); after.Resets != before.Resets+1 || after.Reconnects <= before.Reconnects {
		t.Fatalf("connection stats %+v after %+v: want one reset and a reconnect", after, before)
	}
}

// A host that takes the connection and never answers (black-holed, or a
// frozen server) costs one connect timeout, then the next host of the DSN
// is used.
func TestConnectSkipsAHostThatDoesNotAnswer(t *testing.T) {
	dsn, schema := pgtest.Schema(t)
	mute, err := net.Listen("tcp", "127.0.0.1:0") // accepts in the kernel, answers nothing
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	defer mute.Close()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("parsing %s: %v", dsn, err)
	}
	real := u.Host
	u.Host = mute.Addr().String() + "," + real
	start := time.Now()
	s, err := Open(t.Context(), Config{DSN: u.String(), Schema: schema, MaxConns: 2, Logger: zaptest.NewLogger(t),
		ConnectTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatalf("Open past a mute host: %v", err)
	}
	defer s.Close()
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("Open took %s past a mute host with a 300 ms connect timeout", took)
	}
	if got := s.ConnStats().Host; got != real {
		t.Fatalf("the store writes to %q, want %q", got, real)
	}
}

// The replicated set (scripts/with-postgres-ha): a primary promoted under
// load. The pool ends up on the new primary by itself; every write
// acknowledged before the promotion is there; errors in between say the
// store is unavailable (nothing else); and a newer term's claim still
// fences the older owner — no write of the stale term lands.
func TestFailoverUnderLoad(t *testing.T) {
	dsn, monitor := os.Getenv("ROBONET_TEST_POSTGRES_HA"), os.Getenv("ROBONET_TEST_PG_MONITOR")
	if dsn == "" || monitor == "" {
		if os.Getenv("CI") == "true" || os.Getenv("ROBONET_HA_TEST") == "1" {
			t.Fatalf("ROBONET_TEST_POSTGRES_HA and ROBONET_TEST_PG_MONITOR are not set, and CI=true (or ROBONET_HA_TEST=1) forbids skipping: " +
				"run through scripts/with-postgres-ha, with pg_auto_failover installed (apt-get install postgresql-15-auto-failover pg-auto-failover-cli)")
		}
		t.Skip("ROBONET_TEST_POSTGRES_HA is not set: run through scripts/with-postgres-ha (make test does)")
	}
	ha := newHASet(t, monitor)
	schema := "failover_" + strings.ReplaceAll(t.Name(), "/", "_")
	s, err := Open(t.Context(), Config{DSN: dsn, Schema: schema, MaxConns: 4, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		_ = s.Close()
		ha.exec(t, dsn, `DROP SCHEMA IF EXISTS `+schema+` CASCADE`)
	})
	primary := ha.primary(t)
	if got := s.ConnStats().Host; got != primary {
		t.Fatalf("the store writes to %s, the primary is %s", got, primary)
	}
	ids := seed(t, s, 200)
	old, next := owner{id: newID(), term: 1}, owner{id: newID(), term: 2}
	claimAllFor(t, s, old, ids)

	// Load: the old owner records a result per instance per round, until
	// told to stop; every round acknowledged is sent on acked.
	var (
		acked   = make(chan int, 10000)
		stop    = make(chan struct{})
		loadErr = make(chan error, 1)
	)
	go func() {
		defer close(acked)
		for round := 1; ; round++ {
			err := persistRound(t.Context(), s, old, ids, round)
			switch {
			case err == nil:
				acked <- round
			case errors.Is(err, port.ErrStoreUnavailable):
				// A client's backoff before it tries the next round.
			default:
				loadErr <- fmt.Errorf("round %d: %w (want success or ErrStoreUnavailable)", round, err)
				return
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	var rounds []int
	waitAcks := func(n int) {
		t.Helper()
		for range n {
			select {
			case r := <-acked:
				rounds = append(rounds, r)
			case err := <-loadErr:
				t.Fatal(err)
			case <-time.After(60 * time.Second):
				t.Fatalf("no write acknowledged for a minute")
			}
		}
	}
	waitAcks(5)
	ha.failover(t)
	promoted := ha.waitPrimaryOtherThan(t, primary)
	waitAcks(5) // written on the new primary
	close(stop)
	for r := range acked {
		rounds = append(rounds, r)
	}
	select {
	case err := <-loadErr:
		t.Fatal(err)
	default:
	}
	last := rounds[len(rounds)-1]
	t.Logf("primary %s → %s; %d rounds acknowledged of %d", primary, promoted, len(rounds), last)

	if got := s.ConnStats(); got.Host != promoted || got.Failovers < 1 {
		t.Fatalf("connection stats %+v: want the store on %s, a failover seen", got, promoted)
	}
	// Every acknowledged round is on the new primary (synchronous
	// replication: an acknowledged commit was on both hosts).
	for _, r := range rounds {
		if n := count(t, s, `SELECT count(*) FROM runner_actions_done WHERE execution_id = $1`, fmt.Sprint("round-", r)); n != len(ids) {
			t.Fatalf("round %d was acknowledged; %d of its %d results are on the new primary", r, n, len(ids))
		}
	}
	// The newer term takes the instances over; the old owner's writes are
	// refused from then on, on the new primary as on the old.
	claimAllFor(t, s, next, ids)
	out, err := s.PersistProgress(t.Context(), progressRound(old, ids, last+1))
	if err != nil {
		t.Fatalf("PersistProgress of the old term: %v", err)
	}
	for i, o := range out {
		if !errors.Is(o, port.ErrOwnershipLost) {
			t.Fatalf("instance %s: a write of the stale term was accepted after the newer term's claim (%v)", ids[i], o)
		}
	}
	if n := count(t, s, `SELECT count(*) FROM runner_actions_done WHERE execution_id = $1`, fmt.Sprint("round-", last+1)); n != 0 {
		t.Fatalf("%d results of the stale term landed", n)
	}
}

// owner is a runloop of a term, as the store sees it.
type owner struct {
	id   uuid.UUID
	term uint64
}

func newID() uuid.UUID { return uuid.New() }

// claimAllFor claims every one of ids for o (a newer term takes them over).
func claimAllFor(t *testing.T, s *Store, o owner, ids []uuid.UUID) {
	t.Helper()
	got, err := s.ClaimInstances(t.Context(), port.ClaimRequest{Owner: o.id, Term: o.term, Lease: time.Hour, Limit: len(ids) + 1})
	if err != nil || len(got) != len(ids) {
		t.Fatalf("owner of term %d claimed %d of %d instances: %v", o.term, len(got), len(ids), err)
	}
}

// progressRound is one result per instance, execution "round-N".
func progressRound(o owner, ids []uuid.UUID, round int) []port.Progress {
	batch := make([]port.Progress, len(ids))
	for i, id := range ids {
		batch[i] = port.Progress{InstanceID: id, Owner: o.id, Results: []port.ActionResult{{
			InstanceID: id, ExecutionID: fmt.Sprint("round-", round), Attempt: 1, OK: true, Output: []byte("1"), WorkerID: "w"}}}
	}
	return batch
}

// persistRound writes a round and fails unless every instance's write was
// taken.
func persistRound(ctx context.Context, s *Store, o owner, ids []uuid.UUID, round int) error {
	out, err := s.PersistProgress(ctx, progressRound(o, ids, round))
	if err != nil {
		return err
	}
	for i, e := range out {
		if e != nil {
			return fmt.Errorf("instance %s: %w", ids[i], e)
		}
	}
	return nil
}

// haSet is the pg_auto_failover set of scripts/with-postgres-ha, driven
// through its monitor.
type haSet struct{ monitor string }

func newHASet(t *testing.T, monitor string) *haSet {
	t.Helper()
	return &haSet{monitor: monitor}
}

// failover asks the monitor to promote a standby (a switchover: the
// primary is drained and demoted, as in a planned maintenance).
func (h *haSet) failover(t *testing.T) {
	t.Helper()
	h.exec(t, h.monitor, `SELECT pgautofailover.perform_failover()`)
}

// waitPrimaryOtherThan waits until a node other than was is primary, with
// a synchronous standby again.
func (h *haSet) waitPrimaryOtherThan(t *testing.T, was string) string {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		if p := h.primary(t); p != "" && p != was {
			return p
		}
		time.Sleep(100 * time.Millisecond) // polling the monitor, no signal to wait on
	}
	t.Fatalf("no node but %s became primary within 2 minutes", was)
	return ""
}

// With both standbys of a primary gone, writes wait: the primary keeps
// requiring a synchronous standby (number_sync_standbys = 1 with two
// standbys) instead of turning asynchronous, nothing is acknowledged on
// one host, the store says so (WritesWait), and the waiting write
// completes once a standby is back. Needs scripts/with-postgres-ha
// --standbys 2 (make test).
func TestWritesWaitWithoutAStandby(t *testing.T) {
	dsn, monitor, dir := os.Getenv("ROBONET_TEST_POSTGRES_HA"), os.Getenv("ROBONET_TEST_PG_MONITOR"), os.Getenv("ROBONET_TEST_PG_HA_DIR")
	if dsn == "" || monitor == "" || dir == "" {
		if os.Getenv("CI") == "true" || os.Getenv("ROBONET_HA_TEST") == "1" {
			t.Fatalf("ROBONET_TEST_POSTGRES_HA, ROBONET_TEST_PG_MONITOR and ROBONET_TEST_PG_HA_DIR are not set: run through scripts/with-postgres-ha --standbys 2")
		}
		t.Skip("ROBONET_TEST_POSTGRES_HA is not set: run through scripts/with-postgres-ha --standbys 2 (make test does)")
	}
	ha := newHASet(t, monitor)
	var (
		primary  string
		standbys []string
	)
	deadline := time.Now().Add(time.Minute) // a standby demoted by an earlier test may still be catching up
	for primary, standbys = ha.roles(t); primary == "" || len(standbys) < 2; primary, standbys = ha.roles(t) {
		if time.Now().After(deadline) {
			t.Fatalf("the set has primary %q and standbys %v: this test needs a primary and two standbys (scripts/with-postgres-ha --standbys 2)", primary, standbys)
		}
		time.Sleep(200 * time.Millisecond) // polling the monitor, no signal to wait on
	}
	schema := "writes_wait"
	s, err := Open(t.Context(), Config{DSN: dsn, Schema: schema, MaxConns: 4, Logger: zaptest.NewLogger(t), HealthInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		_ = s.Close()
		ha.exec(t, dsn, `DROP SCHEMA IF EXISTS `+schema+` CASCADE`)
	})
	ids := seed(t, s, 10)
	o := owner{id: newID(), term: 1}
	claimAllFor(t, s, o, ids)

	// Both standbys die; they are started again when the test ends.
	down := map[string]bool{}
	for _, name := range standbys {
		ha.kill(t, dir, name)
		down[name] = true
	}
	t.Cleanup(func() {
		for name := range down {
			ha.start(t, dir, name)
		}
	})
	t.Logf("primary %s, standbys %v killed", primary, standbys)

	// The store says writes wait once no standby streams; a write then
	// waits. (Written before that, a commit may still reach a standby
	// whose processes SIGKILL has not ended yet, and be acknowledged
	// rightly.)
	deadline = time.Now().Add(30 * time.Second)
	for !s.ReplicationStats().WritesWait() {
		if time.Now().After(deadline) {
			t.Fatalf("the store does not say that writes wait: %+v", s.ReplicationStats())
		}
		time.Sleep(100 * time.Millisecond) // polling the store's view, read every 200 ms
	}
	done := make(chan error, 1)
	go func() { done <- persistRound(context.WithoutCancel(t.Context()), s, o, ids, 1) }()
	// Well past the monitor's 3 s to judge the standbys unhealthy: the
	// write still waits, and the primary still requires a standby.
	select {
	case err := <-done:
		t.Fatalf("a write was acknowledged with no standby to have it (err %v)", err)
	case <-time.After(8 * time.Second):
	}
	if names := ha.syncStandbyNames(t, dsn); names == "" {
		t.Fatalf("the primary turned replication asynchronous with its standbys gone")
	}

	// A standby back: the waiting write completes.
	ha.start(t, dir, standbys[0])
	delete(down, standbys[0])
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the waiting write, once a standby was back: %v", err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("the waiting write did not complete within 2 minutes of a standby coming back")
	}
	deadline = time.Now().Add(30 * time.Second)
	for s.ReplicationStats().WritesWait() {
		if time.Now().After(deadline) {
			t.Fatalf("the store still says writes wait: %+v", s.ReplicationStats())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// kill SIGKILLs node name's keeper and server (scripts/with-postgres-ha
// writes their process group to DIR/NAME.pgid).
func (h *haSet) kill(t *testing.T, dir, name string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name+".pgid"))
	if err != nil {
		t.Fatalf("reading %s's process group: %v", name, err)
	}
	pgid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("%s's process group %q: %v", name, b, err)
	}
	if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil {
		t.Fatalf("killing %s (process group %d): %v", name, pgid, err)
	}
}

// start starts node name again (DIR/NAME.start).
func (h *haSet) start(t *testing.T, dir, name string) {
	t.Helper()
	if out, err := exec.Command("sh", filepath.Join(dir, name+".start")).CombinedOutput(); err != nil {
		t.Errorf("starting %s again: %v: %s", name, err, out)
	}
}

// with runs f on a connection to dsn, failing the test on any error. It
// works in cleanups too (t.Context() is over by then).
func (h *haSet) with(t *testing.T, dsn string, f func(ctx context.Context, conn *pgx.Conn) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connecting to the set: %v", err)
	}
	defer func() { _ = conn.Close(ctx) }()
	if err := f(ctx, conn); err != nil {
		t.Fatal(err)
	}
}

// exec runs one statement on dsn.
func (h *haSet) exec(t *testing.T, dsn, sql string, args ...any) {
	t.Helper()
	h.with(t, dsn, func(ctx context.Context, conn *pgx.Conn) error {
		_, err := conn.Exec(ctx, sql, args...)
		return err
	})
}

// haNode is a data node as the monitor has it.
type haNode struct {
	name, addr string // addr: host:port
	state      string // reported and goal state when they agree, else ""
}

// nodes returns the data nodes, as the monitor has them.
func (h *haSet) nodes(t *testing.T) []haNode {
	t.Helper()
	var out []haNode
	h.with(t, h.monitor, func(ctx context.Context, conn *pgx.Conn) error {
		rows, err := conn.Query(ctx, `SELECT nodename, nodehost, nodeport,
			CASE WHEN reportedstate = goalstate THEN reportedstate::text ELSE '' END
			FROM pgautofailover.node ORDER BY nodeid`)
		if err != nil {
			return fmt.Errorf("reading the nodes from the monitor: %w", err)
		}
		var (
			n    haNode
			host string
			port int
		)
		_, err = pgx.ForEachRow(rows, []any{&n.name, &host, &port, &n.state}, func() error {
			n.addr = net.JoinHostPort(host, fmt.Sprint(port))
			out = append(out, n)
			return nil
		})
		return err
	})
	return out
}

// primary returns the host:port of the node the monitor has as primary
// ("" while there is none).
func (h *haSet) primary(t *testing.T) string {
	t.Helper()
	for _, n := range h.nodes(t) {
		if n.state == "primary" {
			return n.addr
		}
	}
	return ""
}

// roles returns the primary's and the standbys' node names.
func (h *haSet) roles(t *testing.T) (primary string, standbys []string) {
	t.Helper()
	for _, n := range h.nodes(t) {
		switch n.state {
		case "primary":
			primary = n.name
		case "secondary":
			standbys = append(standbys, n.name)
		}
	}
	return primary, standbys
}

// syncStandbyNames reads synchronous_standby_names on the primary.
func (h *haSet) syncStandbyNames(t *testing.T, dsn string) string {
	t.Helper()
	var names string
	h.with(t, dsn, func(ctx context.Context, conn *pgx.Conn) error {
		return conn.QueryRow(ctx, `SHOW synchronous_standby_names`).Scan(&names)
	})
	return names
}
