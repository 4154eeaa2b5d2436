package e2e_test

import (
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/robonet/robonet/engine/port"
	"github.com/robonet/robonet/engine/store/postgres"
	"github.com/robonet/robonet/engine/store/sqlite"
	"github.com/robonet/robonet/node"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// metricsSpec has a task that sleeps, so that a scrape sees it running,
// a three-wide spread that ends it, and an exec task that writes a line to
// its task log.
var metricsSpec = testdataSpec("metrics.yaml")

// /metrics shows what the node does while a workflow runs: the engine's
// task and store series, the Wagglers', the node's state, Raft's and
// memberlist's own, the Go runtime's and the process's.
func TestMetricsEndpoint(t *testing.T) {
	cfg := testConfig(t, sqliteStore)
	cfg.HTTPAddr = "127.0.0.1:0"
	tn := startNodeWith(t, cfg)
	scrape := func() string {
		t.Helper()
		resp, err := http.Get("http://" + tn.node.HTTPAddr() + "/metrics")
		if err != nil {
			t.Fatalf("GET /metrics: %v", err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /metrics: %d %s", resp.StatusCode, body)
		}
		return string(body)
	}
	value := func(text, series string) float64 {
		t.Helper()
		m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(text)
		if m == nil {
			return -1
		}
		v, err := strconv.ParseFloat(m[1], 64)
		if err != nil {
			t.Fatalf("%s: %v", series, err)
		}
		return v
	}

	id := submitSpec(t, tn.api, metricsSpec, "")
	eventually(t, 10*time.Second, "a scrape showing the sleeping task running", func() bool {
		return value(scrape(), `robonet_waggler_running{capability="core"}`) == 1
	})
	in := waitDone(t, tn.api, id, 30*time.Second)
	wantState(t, in, robonetv1.InstanceState_INSTANCE_STATE_COMPLETE)
	// The instance reads COMPLETE once its completion is durable; the
	// engine lets go of it just after, when its shard hears of the commit.
	eventually(t, 10*time.Second, "the engine to let go of the finished instance", func() bool {
		return value(scrape(), `robonet_engine_instances_held`) == 0
	})

	text := scrape()
	for series, want := range map[string]float64{
		`robonet_tasks_dispatched_total{capability="core"}`:      4,
		`robonet_tasks_completed_total{capability="core"}`:       4,
		`robonet_task_duration_seconds_count{capability="core"}`: 4,
		`robonet_instances_submitted_total`:                      1,
		`robonet_instances_finished_total{status="complete"}`:    1,
		`robonet_leader`:                                                           1,
		`robonet_leader_known`:                                                     1,
		`robonet_mesh_members{status="alive"}`:                                     1,
		`robonet_waggler_workers{capability="core"}`:                               8,
		`robonet_waggler_running{capability="core"}`:                               0,
		`robonet_heartbeats_received_total{capability="core"}`:                     -2, // some: the sleep beat at 100 ms
		`robonet_engine_instances_held`:                                            0,
		`robonet_engine_instances_held_back`:                                       0,
		`robonet_store_commit_rows_count`:                                          -2,
		`robonet_readiness_propagation_seconds_count`:                              5, // a completion each
		`go_goroutines`:                                                            -2,
		`robonet_process_cpu_seconds_total`:                                        -2,
		`robonet_trust_nodes{tier="trusted"}`:                                      0,
		`robonet_task_log_attempts`:                                                1, // shout's
		`robonet_task_log_bytes`:                                                   -2,
		`robonet_worker_log_lines_dropped_total`:                                   0, // no worker program here
		`robonet_pool_run_seconds_count{capability="core",pool="core"}`:            4,
		`robonet_pool_run_seconds_bucket{capability="core",pool="core",le="+Inf"}`: 4,
	} {
		got := value(text, series)
		switch {
		case got == -1:
			t.Errorf("%s is missing", series)
		case want == -2 && got <= 0:
			t.Errorf("%s = %v, want more than 0", series, got)
		case want >= 0 && got != want:
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
	// Raft's and memberlist's own series come through hashicorp's
	// go-metrics.
	for _, prefix := range []string{"raft_", "memberlist_"} {
		if !regexp.MustCompile(`(?m)^` + prefix).MatchString(text) {
			t.Errorf("no %s series in /metrics", prefix)
		}
	}
	checkPromtool(t, text)
	if t.Failed() {
		t.Logf("/metrics:\n%s", grepRobonet(text))
	}
}

// checkPromtool runs Prometheus' own linter over a scrape and fails on
// what it says of a robonet_ series (the runtime's and hashicorp's are
// not ours to fix). Without promtool it skips, unless
// ROBONET_PROMTOOL_TEST is set (CI installs Debian's prometheus).
func checkPromtool(t *testing.T, text string) {
	t.Helper()
	bin, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("ROBONET_PROMTOOL_TEST") != "" {
			t.Fatal("promtool not found, and ROBONET_PROMTOOL_TEST is set: install Debian's prometheus package")
		}
		t.Log("promtool not found: the scrape is not linted (apt-get install prometheus)")
		return
	}
	cmd := exec.Command(bin, "check", "metrics")
	cmd.Stdin = strings.NewReader(text)
	out, _ := cmd.CombinedOutput() // it exits 1 on any finding, ours or not
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "robonet_") {
			t.Errorf("promtool check metrics: %s", line)
		}
	}
}

// grepRobonet keeps the robonet_ lines of a scrape, for failure output.
func grepRobonet(text string) string {
	var keep []string
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, "robonet_") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

// Every node reports its worker pools: ListMembers with pools asks each
// member live, /metrics shows this node's, and the leader collects them
// into the store (worker_status) every PoolStatsInterval.
func TestPoolStatistics(t *testing.T) {
	forEachStore(t, func(t *testing.T, store storeKind) {
		cfg := testConfig(t, store)
		cfg.HTTPAddr = "127.0.0.1:0"
		cfg.PoolStatsInterval = 100 * time.Millisecond
		tn := startNodeWith(t, cfg)
		in := run(t, tn, metricsSpec, "")
		wantState(t, in, robonetv1.InstanceState_INSTANCE_STATE_COMPLETE)

		ctx := ctxFor(t, 10*time.Second)
		resp, err := robonetv1.NewMeshServiceClient(tn.conn).ListMembers(ctx, &robonetv1.ListMembersRequest{Pools: true})
		if err != nil || len(resp.GetMembers()) != 1 {
			t.Fatalf("ListMembers: %v %v", resp, err)
		}
		if at := resp.GetMembers()[0].GetPoolsAt(); at == nil || time.Since(at.AsTime()) > 10*time.Second {
			t.Errorf("the member was heard from at %v, want just now", at)
		}
		var core *robonetv1.PoolStats
		for _, p := range resp.GetMembers()[0].GetPools() {
			if p.GetPool() == "core" {
				core = p
			}
		}
		if core == nil || core.GetSlots() != 8 || core.GetCompleted() != 4 || core.GetFailed() != 0 || core.GetPerMinute() != 4 ||
			core.GetLatencyP99().AsDuration() < 1500*time.Millisecond {
			t.Fatalf("the core pool: %v (member %v)", core, resp.GetMembers()[0])
		}

		st := openStore(t, store, cfg)
		var rows []port.PoolStatus
		eventually(t, 10*time.Second, "the leader to store the pools", func() bool {
			rows, err = st.ListPoolStats(ctx)
			return err == nil && slices.ContainsFunc(rows, func(p port.PoolStatus) bool {
				return p.Node == "e2e" && p.Pool == "core" && p.Completed == 4 && p.Slots == 8
			})
		})
		if !slices.ContainsFunc(rows, func(p port.PoolStatus) bool { return p.Node == "e2e" && p.Pool == "code.exec" }) {
			t.Errorf("stored pools %+v lack code.exec", rows)
		}
	})
}

// openStore opens the store a running test node uses, to read what it
// wrote.
func openStore(t *testing.T, store storeKind, cfg node.Config) port.Store {
	t.Helper()
	ctx := ctxFor(t, 30*time.Second)
	var (
		s   port.Store
		err error
	)
	if store == postgresStore {
		s, err = postgres.Open(ctx, postgres.Config{DSN: cfg.PostgresDSN, Schema: cfg.PostgresSchema})
	} else {
		s, err = sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(cfg.DataDir, "robonet.db")})
	}
	if err != nil {
		t.Fatalf("opening the node's store: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// A server on Postgres says which database host it writes to, in /readyz
// and /metrics, and whether commits wait for a synchronous standby.
func TestStoreHostInReadinessAndMetrics(t *testing.T) {
	cfg := testConfig(t, postgresStore)
	cfg.HTTPAddr = "127.0.0.1:0"
	tn := startNodeWith(t, cfg)
	u, err := url.Parse(cfg.PostgresDSN)
	if err != nil {
		t.Fatalf("parsing the DSN: %v", err)
	}
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get("http://" + tn.node.HTTPAddr() + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	var body string
	eventually(t, 10*time.Second, "/readyz to name the database host", func() bool {
		var code int
		code, body = get("/readyz")
		return code == http.StatusOK && strings.Contains(body, "which does not replicate synchronously")
	})
	if want := "; writes to " + u.Host + ","; !strings.Contains(body, want) {
		t.Fatalf("GET /readyz: %q, want it to say %q", body, want)
	}
	_, text := get("/metrics")
	for _, series := range []string{
		`robonet_store_writer{host="` + u.Host + `"} 1`,
		`robonet_store_failovers_total 0`,
		`robonet_store_pool_resets_total 0`,
		`robonet_store_sync_standbys 0`,
		`robonet_store_writes_wait 0`,
	} {
		if !strings.Contains(text, "\n"+series+"\n") {
			t.Errorf("/metrics has no line %q", series)
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", grepRobonet(text))
	}
}
