package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// logsSpec writes to stderr on success, on failure, and across retries,
// on the worker nodes of a wagMesh (the server serves nothing).
var logsSpec = testdataSpec("logs.yaml")

// taskLog is what TaskLogs returned: the attempt, its node and its lines
// as "stream: text".
type taskLog struct {
	attempt uint32
	node    string
	lines   []string
}

// readTaskLog reads a task's log through api to the end of the stream.
func readTaskLog(ctx context.Context, api robonetv1.WorkflowServiceClient, req *robonetv1.TaskLogsRequest) (taskLog, error) {
	stream, err := api.TaskLogs(ctx, req)
	if err != nil {
		return taskLog{}, err
	}
	var out taskLog
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		if resp.GetNode() != "" {
			out.attempt, out.node = resp.GetAttempt(), resp.GetNode()
		}
		for _, l := range resp.GetLines() {
			st := strings.ToLower(strings.TrimPrefix(l.GetStream().String(), "LOG_STREAM_"))
			out.lines = append(out.lines, st+": "+string(l.GetText()))
		}
	}
}

// Each attempt's stderr (and stdout) is kept on the worker node that ran
// it, and read through any node: the server, which ran nothing, or another
// worker. Every attempt of a task that succeeded on its third is in its
// history with its own log; a node that is gone is named.
func TestTaskLogsFromWorkerNodes(t *testing.T) {
	m := startWagMesh(t, "w1", "w2")
	m.waggler("")
	id := submitSpec(t, m.server.api, logsSpec, `{}`)
	in := waitDone(t, m.server.api, id, 60*time.Second)
	ctx := ctxFor(t, 30*time.Second)
	logOf := func(api robonetv1.WorkflowServiceClient, task string, attempt uint32) taskLog {
		t.Helper()
		got, err := readTaskLog(ctx, api, &robonetv1.TaskLogsRequest{InstanceId: id, Task: task, Attempt: attempt})
		if err != nil {
			t.Fatalf("logs of %s attempt %d: %v", task, attempt, err)
		}
		return got
	}

	// Success: stderr and stdout, from the node the attempt names.
	ok := task(t, in, "ok")
	got := logOf(m.server.api, "ok", 0)
	if got.node != ok.GetAttempts()[0].GetNode() || got.attempt != 1 {
		t.Fatalf("ok: log of attempt %d on %s, but the attempt ran on %s", got.attempt, got.node, ok.GetAttempts()[0].GetNode())
	}
	lines := slices.Clone(got.lines)
	slices.Sort(lines) // the two pipes are read concurrently
	if want := []string{"stderr: step 1 of 2", "stderr: step 2 of 2", "stdout: 42"}; !slices.Equal(lines, want) {
		t.Fatalf("ok: log %q, want %q", got.lines, want)
	}
	// The same through the other worker node.
	other := m.workers["w1"]
	if got.node == "w1" {
		other = m.workers["w2"]
	}
	if again := logOf(other.api, "ok", 0); !slices.Equal(again.lines, got.lines) || again.node != got.node {
		t.Fatalf("through %s: %+v, through the server: %+v", other.name, again, got)
	}

	// Retried: three attempts in the history, the last one current, each
	// with its own log.
	flaky := task(t, in, "flaky")
	if flaky.GetStatus() != robonetv1.TaskStatus_TASK_STATUS_COMPLETED || flaky.GetError() != "" {
		t.Fatalf("flaky: %s with error %q; a task that succeeded shows no earlier error", flaky.GetStatus(), flaky.GetError())
	}
	attempts := flaky.GetAttempts()
	if len(attempts) != 3 || attempts[0].GetOk() || attempts[1].GetOk() || !attempts[2].GetOk() ||
		!strings.Contains(attempts[0].GetError(), "exited with code 1") {
		t.Fatalf("flaky: attempts %v, want two failures, then a success", attempts)
	}
	for n := uint32(1); n <= 3; n++ {
		got := logOf(m.server.api, "flaky", n)
		want := []string{fmt.Sprintf("stderr: attempt %d starting", n)}
		if n < 3 {
			want = append(want, fmt.Sprintf("stderr: attempt %d failed", n))
		}
		if got.attempt != n || got.node != attempts[n-1].GetNode() || !slices.Equal(got.lines, want) {
			t.Fatalf("flaky attempt %d: %+v, want %q from %s", n, got, want, attempts[n-1].GetNode())
		}
	}
	if latest := logOf(m.server.api, "flaky", 0); latest.attempt != 3 {
		t.Fatalf("the latest attempt of flaky is 3, got %d", latest.attempt)
	}

	// Failure: the log has what the process said.
	if got := logOf(m.server.api, "bad", 0); !slices.Equal(got.lines, []string{"stderr: fatal: no input"}) {
		t.Fatalf("bad: %q", got.lines)
	}

	// Clear errors: a task that does not exist, an attempt that does not.
	_, err := readTaskLog(ctx, m.server.api, &robonetv1.TaskLogsRequest{InstanceId: id, Task: "nope"})
	if status.Code(err) != codes.NotFound || !strings.Contains(err.Error(), `no task "nope"`) {
		t.Fatalf("unknown task: %v", err)
	}
	_, err = readTaskLog(ctx, m.server.api, &robonetv1.TaskLogsRequest{InstanceId: id, Task: "flaky", Attempt: 7})
	if status.Code(err) != codes.NotFound || !strings.Contains(err.Error(), "attempts are 1 to 3") {
		t.Fatalf("attempt 7: %v", err)
	}
	_, err = readTaskLog(ctx, m.server.api, &robonetv1.TaskLogsRequest{InstanceId: id, Task: "../../etc"})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("a path for a task: %v", err)
	}

	// The node that holds a log is gone: it is named.
	holder := m.workers[got.node]
	holder.halted = true
	holder.node.Halt()
	_, err = readTaskLog(ctx, m.server.api, &robonetv1.TaskLogsRequest{InstanceId: id, Task: "ok"})
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "is on node "+got.node) {
		t.Fatalf("the log's node halted: %v", err)
	}
}

// Following a task from before it starts: the lines arrive as it writes
// them, and the stream ends when it does.
func TestTaskLogsFollow(t *testing.T) {
	m := startWagMesh(t, "w1")
	m.waggler("")
	spec := testdataSpec("ticks.yaml")
	id := submitSpec(t, m.server.api, spec, `{}`)
	ctx := ctxFor(t, 60*time.Second)
	stream, err := m.server.api.TaskLogs(ctx, &robonetv1.TaskLogsRequest{InstanceId: id, Task: "tick", Follow: true})
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	var arrived []time.Time
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("after %q: %v", lines, err)
		}
		for _, l := range resp.GetLines() {
			lines = append(lines, string(l.GetText()))
			arrived = append(arrived, time.Now())
		}
	}
	if want := []string{"tick 1", "tick 2", "tick 3"}; !slices.Equal(lines, want) {
		t.Fatalf("followed %q, want %q", lines, want)
	}
	// Written 0.3 s apart, they arrive as written, not all at the end.
	if gap := arrived[2].Sub(arrived[0]); gap < 300*time.Millisecond {
		t.Fatalf("the lines arrived within %s of each other: not followed as written", gap)
	}
	in := waitDone(t, m.server.api, id, 30*time.Second)
	wantState(t, in, robonetv1.InstanceState_INSTANCE_STATE_COMPLETE)
}
