package demo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"

	"github.com/robonet/robonet/engine/store/postgres/pgtest"
	"github.com/robonet/robonet/node"
)

// TestMain checks that no goroutine outlives the tests. The mesh demo runs
// memberlist with its default timings, and memberlist's Shutdown does not
// wait for a probe in flight, which ends within a probe interval (1 s,
// longer while Lifeguard scales probe timeouts up after a peer died), so
// goleak is given up to ~15 s (each Find retries for about one) to see
// it go rather than told to ignore it.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		var err error
		for range 15 {
			if err = goleak.Find(); err == nil {
				break
			}
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// options are a test's: the nodes log errors to the test, as robonode
// demo's default --log-level error does to stderr.
func options(t *testing.T) Options {
	return Options{Logger: zaptest.NewLogger(t, zaptest.Level(zapcore.ErrorLevel))}
}

// TestWagglers runs the default demo: a server and three worker-only nodes
// on the embedded store; a worker running tasks is killed, its attempts
// move to live nodes, then the Waggler's node is killed and a successor
// takes the role at a higher epoch; the workflow completes with the
// outputs it always has, and the mesh stops cleanly.
func TestWagglers(t *testing.T) {
	var out bytes.Buffer
	began := time.Now()
	err := RunWagglers(context.Background(), options(t), &out)
	t.Logf("the Wagglers demo took %v", time.Since(began).Round(time.Millisecond))
	text := out.String()
	if err != nil {
		t.Fatalf("RunWagglers: %v\noutput:\n%s", err, text)
	}
	for _, want := range []string{
		"started worker-3 (worker-only, code.exec ×2)",
		"submitted examples/demo.yaml (demo v1)",
		"state     COMPLETE",
		`"digest": "a4ef9c7f4b5d2578"`,
		`"words": 312000`,
		"mesh stopped cleanly",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("demo output lacks %q", want)
		}
	}
	// The story: the Waggler placed; a worker killed (not the Waggler's
	// node), its heartbeats missed and its attempts moved; the Waggler's
	// node killed and a successor at a higher epoch on the third worker.
	first := regexp.MustCompile(`Waggler of code\.exec: (worker-\d), epoch (\d+) \(placed by the leader\)`).FindStringSubmatch(text)
	worker := regexp.MustCompile(`>>> killing (worker-\d), a worker node \(not the Waggler's\), mid-task`).FindStringSubmatch(text)
	waggler := regexp.MustCompile(`>>> killing (worker-\d), the node of the Waggler of code\.exec \(epoch (\d+)\), mid-task`).FindStringSubmatch(text)
	successor := regexp.MustCompile(`>>> successor Waggler of code\.exec: (worker-\d), epoch (\d+) \(was (worker-\d), epoch (\d+)\)`).FindStringSubmatch(text)
	if first == nil || worker == nil || waggler == nil || successor == nil {
		t.Fatalf("demo output lacks the Waggler (%v), the kill of a worker (%v), of the Waggler's node (%v) or the successor (%v):\n%s",
			first != nil, worker != nil, waggler != nil, successor != nil, text)
	}
	if worker[1] == first[1] || waggler[1] != first[1] || waggler[2] != first[2] {
		t.Errorf("killed %s as a worker and %s (epoch %s) as the Waggler's node; the Waggler was %s (epoch %s)",
			worker[1], waggler[1], waggler[2], first[1], first[2])
	}
	if successor[1] == worker[1] || successor[1] == waggler[1] || successor[3] != waggler[1] || atoi(t, successor[2]) <= atoi(t, first[2]) {
		t.Errorf("successor %s at epoch %s (was %s): want a live node at an epoch above %s", successor[1], successor[2], successor[3], first[2])
	}
	for _, want := range []string{
		worker[1] + ": 1 heartbeat missed by ",
		"moved from " + worker[1] + " to ",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("demo output lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("output:\n%s", text)
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestMesh runs the mesh demo: three servers on Postgres and two workers,
// the leader killed mid-run, the workflow finishing on the new leader.
func TestMesh(t *testing.T) {
	dsn, schema := pgtest.Schema(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	o := options(t)
	o.Postgres = u.String()
	var out bytes.Buffer
	if err := RunMesh(context.Background(), o, &out); err != nil {
		t.Fatalf("RunMesh: %v\noutput:\n%s", err, out.String())
	}
	for _, want := range []string{
		"started worker-2 (worker-only)",
		"engine leader: server-",
		">>> killing the leader",
		">>> new engine leader: server-",
		"state     COMPLETE",
		`"digest": "023076ee4da98e2c"`,
		"mesh stopped cleanly",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("demo output lacks %q:\n%s", want, out.String())
		}
	}
}

// A mesh demo without a database is refused before a node starts: its
// servers need a shared store.
func TestMeshNeedsPostgres(t *testing.T) {
	var out bytes.Buffer
	if err := RunMesh(context.Background(), Options{DataDir: t.TempDir()}, &out); !errors.Is(err, node.ErrConfig) || strings.Contains(out.String(), "started") {
		t.Fatalf("RunMesh without Postgres: %v (want node.ErrConfig), output:\n%s", err, out.String())
	}
}
