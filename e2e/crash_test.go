package e2e_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/robonet/robonet/engine/port"
	"github.com/robonet/robonet/engine/store/postgres"
	"github.com/robonet/robonet/engine/store/postgres/pgtest"
	"github.com/robonet/robonet/engine/store/sqlite"
	"github.com/robonet/robonet/internal/childproc"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// child is a robonode process.
type child struct {
	cmd    *exec.Cmd
	addr   string // gRPC
	gossip string

	mu   sync.Mutex
	logs bytes.Buffer
	done chan struct{} // the log reader finished (the process closed stderr)
}

// startChild runs the robonode binary with args and waits until it logs
// that it started, returning its gRPC address.
func startChild(t testing.TB, bin string, args ...string) *child {
	t.Helper()
	return startChildOn(t, nil, nil, bin, args...)
}

// startChildOn is startChild with env added to the child's environment
// and the child confined to cpus (nil: anywhere).
func startChildOn(t testing.TB, env []string, cpus []int, bin string, args ...string) *child {
	t.Helper()
	c := &child{cmd: exec.Command(bin, args...), done: make(chan struct{})}
	if env != nil {
		c.cmd.Env = append(os.Environ(), env...)
	}
	stderr, err := c.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := childproc.StartOn(c.cmd, cpus); err != nil {
		t.Fatal(err)
	}
	addrCh := make(chan [2]string, 1)
	go func() {
		defer close(c.done)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Bytes()
			c.mu.Lock()
			c.logs.Write(line)
			c.logs.WriteByte('\n')
			c.mu.Unlock()
			var entry struct {
				Msg    string `json:"msg"`
				Addr   string `json:"grpc_addr"`
				Gossip string `json:"gossip_addr"`
			}
			if json.Unmarshal(line, &entry) == nil && entry.Msg == "node started" {
				addrCh <- [2]string{entry.Addr, entry.Gossip}
			}
		}
	}()
	t.Cleanup(func() {
		if c.cmd.ProcessState == nil { // still running: the test failed midway
			_ = c.cmd.Process.Kill()
			<-c.done
			_ = c.cmd.Wait()
		}
		<-c.done
		if t.Failed() {
			t.Logf("robonode %v logs:\n%s", args, c.logText())
		}
	})
	select {
	case a := <-addrCh:
		c.addr, c.gossip = a[0], a[1]
	case <-c.done:
		t.Fatalf("robonode exited before it started")
	case <-time.After(60 * time.Second):
		t.Fatalf("robonode did not start within 60s")
	}
	return c
}

func (c *child) logText() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.logs.String()
}

// kill9 kills the process with SIGKILL and reaps it.
func (c *child) kill9(t testing.TB) {
	t.Helper()
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-c.done // all of its log read first: Wait closes the pipe
	_ = c.cmd.Wait()
}

// stop asks for a clean shutdown with SIGTERM and returns the exit code.
func (c *child) stop(t testing.TB) int {
	t.Helper()
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// Its log is read to the end before Wait, which closes the pipe: a
	// Wait racing the reader loses the last lines (seen: "node stopped").
	select {
	case <-c.done:
	case <-time.After(60 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
		_ = c.cmd.Wait()
		t.Fatalf("robonode did not stop within 60s of SIGTERM")
	}
	_ = c.cmd.Wait()
	return c.cmd.ProcessState.ExitCode()
}

// The spread's instances record every run (item, attempt, pid) in a log
// file, so the test sees what ran twice; the engine must still record each
// completion once.
var crashSpec = testdataSpec("crash.yaml")

// TestKill9AndRestart: a node killed with SIGKILL mid-workflow and started
// again on the same data directory (SQLite) or database (Postgres) finishes
// the workflow with the right outputs, takes its old leases over at once
// (its term grew), and no task completion is recorded twice.
func TestKill9AndRestart(t *testing.T) {
	bin := buildRobonode(t)
	forEachStore(t, func(t *testing.T, store storeKind) {
		dataDir := t.TempDir()
		args := []string{"--data-dir", dataDir, "--grpc", "127.0.0.1:0", "--http", "off", "--gossip", "0", "--raft", "0", "--log-format", "json",
			"--capability", "code.exec=2", "--capability", "core=2", "--shutdown-timeout", "20s"}
		var dsn, schema string
		if store == postgresStore {
			dsn, schema = pgtest.Schema(t)
			args = append(args, "--postgres", withSearchPath(t, dsn, schema))
		}

		first := startChild(t, bin, args...)
		api := robonetv1.NewWorkflowServiceClient(dial(t, first.addr))
		logFile := filepath.Join(t.TempDir(), "runs.log")
		id := submitSpec(t, api, crashSpec, fmt.Sprintf(`{"log": %q}`, logFile))

		// Kill it once some, but not all, of the spread completed.
		var atKill *robonetv1.Instance
		eventually(t, 60*time.Second, "two spread instances to complete", func() bool {
			resp, err := api.GetInstance(ctxFor(t, 10*time.Second), &robonetv1.GetInstanceRequest{InstanceId: id})
			if err != nil {
				t.Fatalf("GetInstance: %v", err)
			}
			atKill = resp.GetInstance()
			return atKill.GetProgress().GetDone() >= 2
		})
		first.kill9(t)
		if isTerminal(atKill.GetState()) {
			t.Fatalf("the instance finished before the kill; nothing was tested")
		}
		t.Logf("killed with %d of %d units done", atKill.GetProgress().GetDone(), atKill.GetProgress().GetTotal())

		restarted := time.Now()
		second := startChild(t, bin, args...)
		api = robonetv1.NewWorkflowServiceClient(dial(t, second.addr))
		in := waitDone(t, api, id, 60*time.Second)
		wantOutputs(t, in, `{"work": [10, 20, 30, 40, 50, 60, 70, 80], "sum": 360}`)
		// The lease of the killed node runs 30 s; finishing well before that
		// shows the restart took it over at once.
		if took := time.Since(restarted); took > 20*time.Second {
			t.Errorf("the restarted node took %s to finish: it waited for the old lease to expire", took)
		}
		if code := second.stop(t); code != 0 {
			t.Errorf("robonode exited %d after SIGTERM, want 0", code)
		}
		runs, _ := os.ReadFile(logFile)
		t.Logf("runs (item attempt pid):\n%s", runs)

		// 8 spread instances and the sum.
		checkOncePerExecution(t, id, taskHistory(t, store, dataDir, dsn, schema, id), 9)
	})
}

// withSearchPath returns dsn with its search_path set to schema (pgx
// passes unknown URL parameters to the server as run-time parameters).
func withSearchPath(t testing.TB, dsn, schema string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("parsing %s: %v", pgtest.EnvDSN, err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// taskHistory reads every recorded result of an instance straight from the
// store the child used (it has stopped).
func taskHistory(t *testing.T, store storeKind, dataDir, dsn, schema string, id string) []port.ActionResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var s port.Store
	var err error
	if store == postgresStore {
		s, err = postgres.Open(ctx, postgres.Config{DSN: dsn, Schema: schema})
	} else {
		s, err = sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(dataDir, "robonet.db")})
	}
	if err != nil {
		t.Fatalf("opening the store: %v", err)
	}
	defer s.Close()
	h, err := s.TaskHistory(ctx, uuid.MustParse(id))
	if err != nil {
		t.Fatalf("TaskHistory: %v", err)
	}
	if len(h) == 0 {
		t.Fatal("no task history")
	}
	var lines []string
	for _, r := range h {
		lines = append(lines, fmt.Sprintf("%s#%d ok=%v", r.ExecutionID, r.Attempt, r.OK))
	}
	t.Logf("recorded results:\n  %s", strings.Join(lines, "\n  "))
	return h
}
