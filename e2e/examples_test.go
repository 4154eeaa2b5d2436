package e2e_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/robonet/robonet/internal/childproc"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// demoSummary is what examples/demo.yaml computes for 8 chunks: fixed,
// because the chunks' text is generated deterministically.
const demoSummary = `{"chunks": 8, "words": 144000, "bytes": 639144, "digest": "023076ee4da98e2c"}`

// TestExamplesRun: the example workflows run as they are on a node with the
// default capability set (scan-and-summarize is a language illustration: it
// calls programs named scan and summarize that do not exist).
func TestExamplesRun(t *testing.T) {
	cfg := testConfig(t, sqliteStore)
	cfg.Capabilities = nil // the defaults, as robonode with no flags
	tn := startNodeWith(t, cfg)

	cases := []struct {
		file, inputs string
		outputs      string // exact outputs; "" to check completion only
	}{
		{"hello.yaml", `{"name": "Ada"}`, `{"greeting": "Hello, Ada!"}`},
		{"fan-out.yaml", `{"count": 4}`, `{"squares": [1, 4, 9, 16], "total": 30}`},
		{"diamond.yaml", "", ""},
		{"failure-policies.yaml", "", `{"result": {"flaky_attempt": 3, "enrichment": "none"}}`},
		{"demo.yaml", `{"pause": 0}`, ""},
		{"accept.yaml", "", `{"sample": {"score": 0.9, "attempt": 3}, "lengths": [5, null, 5]}`},
		// decide fires on the two echo votes and reads the sleeping one as
		// null; the instance still records it; fetch cancels the 30 s mirrors.
		{"quorum.yaml", "", `{"decision": {"votes": ["commit", "commit"], "late": null}, "vote_c": {"slept": "2s"},
			"fetched": {"from": "near"}}`},
		{"foreach.yaml", "", `{"steps": ["alpha", "alpha beta", "alpha beta gamma"]}`},
		// How many polls it takes depends on the clock: checked below.
		{"loop-poll.yaml", "", ""},
		// One node serves code.exec: inventory runs once, there. Its
		// output is the host's name: checked below.
		{"every-node.yaml", "", ""},
		// 8 numbers: 15 instances of child, 4 levels: checked below.
		{"child.yaml", "", `{"sum": 31, "levels": 4}`},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			t.Parallel()
			src, err := os.ReadFile(filepath.Join("..", "examples", c.file))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := tn.api.SubmitWorkflow(ctxFor(t, 10*time.Second), &robonetv1.SubmitWorkflowRequest{
				Workflow: inline(string(src), c.file), InputsJson: c.inputs,
			})
			if err != nil {
				t.Fatalf("submit: %v", err)
			}
			in := waitDone(t, tn.api, resp.GetInstanceId(), 60*time.Second)
			wantState(t, in, robonetv1.InstanceState_INSTANCE_STATE_COMPLETE)
			if c.outputs != "" {
				wantOutputs(t, in, c.outputs)
			}
			if c.file == "every-node.yaml" {
				host, err := os.Hostname()
				if err != nil {
					t.Fatal(err)
				}
				want := fmt.Sprintf(`{"hosts": [{"node": %q, "output": %q}], "report": {"nodes": 1, "names": [%[1]q]}}`, cfg.Name, host)
				wantOutputs(t, in, want)
			}
			if c.file == "loop-poll.yaml" {
				var out struct {
					State string `json:"state"`
					Polls int    `json:"polls"`
				}
				if err := json.Unmarshal([]byte(in.GetOutputsJson()), &out); err != nil || out.State != "done" || out.Polls < 1 || out.Polls > 30 {
					t.Fatalf("outputs %s (%v), want state done after 1 to 30 polls", in.GetOutputsJson(), err)
				}
				if poll := task(t, in, "poll"); !poll.GetLoop() || int(poll.GetIterations()) != out.Polls || len(poll.GetAttempts()) != out.Polls {
					t.Fatalf("poll: loop %v, %d iterations, %d attempts; want %d", poll.GetLoop(), poll.GetIterations(), len(poll.GetAttempts()), out.Polls)
				}
				// Each iteration has its own log, named poll#i.
				logs, err := readTaskLog(ctxFor(t, 10*time.Second), tn.api, &robonetv1.TaskLogsRequest{InstanceId: resp.GetInstanceId(), Task: "poll#0"})
				if err != nil || len(logs.lines) != 1 || !strings.HasPrefix(logs.lines[0], `stdout: {"state": "`) || !strings.HasSuffix(logs.lines[0], `"poll": 0}`) {
					t.Fatalf("the log of poll#0: %+v, %v", logs, err)
				}
				_, err = readTaskLog(ctxFor(t, 10*time.Second), tn.api, &robonetv1.TaskLogsRequest{InstanceId: resp.GetInstanceId(), Task: "poll"})
				if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "poll#") {
					t.Fatalf("the log of poll as a whole: %v, want an error naming an iteration", err)
				}
			}
			if c.file == "child.yaml" {
				list, err := tn.api.ListInstances(ctxFor(t, 10*time.Second), &robonetv1.ListInstancesRequest{Workflow: "child", PageSize: 100})
				if err != nil {
					t.Fatal(err)
				}
				children := 0
				for _, s := range list.GetInstances() {
					if s.GetParentInstanceId() != "" {
						children++
					}
					if s.GetState() != robonetv1.InstanceState_INSTANCE_STATE_COMPLETE {
						t.Errorf("instance %s is %s", s.GetId(), s.GetState())
					}
				}
				if len(list.GetInstances()) != 15 || children != 14 {
					t.Fatalf("%d instances of child, %d of them children; want 15 and 14", len(list.GetInstances()), children)
				}
				sum := task(t, in, "sum_halves")
				if sum.GetWorkflow() != "child" || sum.GetWorkflowVersion() != 1 || len(sum.GetAttempts()) != 2 ||
					sum.GetAttempts()[0].GetChildInstanceId() == "" {
					t.Fatalf("sum_halves: %v", sum)
				}
			}
			if c.file == "demo.yaml" {
				wantOutputs(t, in, `{"summary": `+demoSummary+`, "hashes": `+demoHashes+`}`)
			}
		})
	}
}

const demoHashes = `["31c9d6a6de56b2b7", "11939fba556dfb12", "7c29f35eda16b599", "1fdac9a5bd4fff65",
	"60b8cfb89e138add", "ca944e4703046aee", "551b3f01569acd1e", "a79716b0e92ce07c"]`

// TestExampleWorker: examples/worker, built and run as a separate process
// against `robonode --capability none`, serves examples/worker/text.yaml —
// as the README's external-worker section shows.
func TestExampleWorker(t *testing.T) {
	bin := buildRobonode(t)
	workerBin := filepath.Join(t.TempDir(), "text-worker")
	if out, err := exec.Command("go", "build", "-o", workerBin, "github.com/robonet/robonet/examples/worker").CombinedOutput(); err != nil {
		t.Fatalf("go build examples/worker: %v\n%s", err, out)
	}
	n := startChild(t, bin, "--data-dir", t.TempDir(), "--grpc", "127.0.0.1:0", "--http", "off", "--gossip", "0", "--raft", "0",
		"--log-format", "json", "--capability", "none")
	api := robonetv1.NewWorkflowServiceClient(dial(t, n.addr))
	src, err := os.ReadFile(filepath.Join("..", "examples", "worker", "text.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// Submitted first: its tasks wait until the program connects.
	resp, err := api.SubmitWorkflow(ctxFor(t, 10*time.Second), &robonetv1.SubmitWorkflowRequest{Workflow: inline(string(src), "text.yaml")})
	if err != nil {
		t.Fatalf("submit: %v", err)
	}

	var logs bytes.Buffer
	w := exec.Command(workerBin, "--node", n.addr, "--slots", "2")
	childproc.DieWithParent(w)
	w.Stdout, w.Stderr = &logs, &logs
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = w.Process.Signal(syscall.SIGTERM)
		if err := w.Wait(); err != nil {
			t.Errorf("the worker program exited with %v after SIGTERM; logs:\n%s", err, logs.String())
		}
	}()
	in := waitDone(t, api, resp.GetInstanceId(), 60*time.Second)
	wantState(t, in, robonetv1.InstanceState_INSTANCE_STATE_COMPLETE)
	wantOutputs(t, in, `{"words": [9, 11, 6], "total": 26}`)
}

// TestExamplesWaitAndEvent: examples/approval.yaml waits at approve until
// the signal, then applies; examples/on-event.yaml is started by an
// event, once per idempotency key — as the README shows, through the API.
func TestExamplesWaitAndEvent(t *testing.T) {
	cfg := testConfig(t, sqliteStore)
	cfg.Capabilities = nil
	tn := startNodeWith(t, cfg)
	read := func(file string) string {
		src, err := os.ReadFile(filepath.Join("..", "examples", file))
		if err != nil {
			t.Fatal(err)
		}
		return string(src)
	}

	resp, err := tn.api.SubmitWorkflow(ctxFor(t, 10*time.Second), &robonetv1.SubmitWorkflowRequest{Workflow: inline(read("approval.yaml"), "approval.yaml")})
	if err != nil {
		t.Fatalf("submit: %v", err)
	}
	id := resp.GetInstanceId()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := tn.api.GetInstance(ctxFor(t, 10*time.Second), &robonetv1.GetInstanceRequest{InstanceId: id})
		if err != nil {
			t.Fatal(err)
		}
		if approve := task(t, got.GetInstance(), "approve"); approve.GetWaiting() {
			if approve.GetWaitSignal() != "approve" || approve.GetWaitUntil() == nil {
				t.Fatalf("approve waits: %v", approve)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("approve never waited: %v", got.GetInstance())
		}
		time.Sleep(20 * time.Millisecond)
	}
	sig, err := tn.api.SignalInstance(ctxFor(t, 10*time.Second), &robonetv1.SignalInstanceRequest{InstanceId: id, Name: "approve",
		PayloadJson: `{"ok": true, "by": "ada"}`})
	if err != nil || !sig.GetDelivered() {
		t.Fatalf("signal: %v, %v", sig, err)
	}
	in := waitDone(t, tn.api, id, 30*time.Second)
	wantState(t, in, robonetv1.InstanceState_INSTANCE_STATE_COMPLETE)
	wantOutputs(t, in, `{"approval": {"ok": true, "by": "ada"}, "applied": {"applied": "resize the orders database volume to 200 GiB", "approved_by": "ada"}}`)
	if len(in.GetSignals()) != 1 || in.GetSignals()[0].GetBy() != "approve#1" {
		t.Fatalf("signals %v", in.GetSignals())
	}

	if _, err := tn.api.RegisterWorkflow(ctxFor(t, 10*time.Second), &robonetv1.RegisterWorkflowRequest{
		Spec: &robonetv1.InlineSpec{Source: []byte(read("on-event.yaml")), Filename: "on-event.yaml"}}); err != nil {
		t.Fatal(err)
	}
	var first string
	for range 2 {
		ev, err := tn.api.PublishEvent(ctxFor(t, 10*time.Second), &robonetv1.PublishEventRequest{Name: "order.created",
			PayloadJson: `{"id": "A-17", "total": 42.5}`, IdempotencyKey: "order-A-17"})
		if err != nil || len(ev.GetStarted()) != 1 {
			t.Fatalf("publish: %v, %v", ev, err)
		}
		if first == "" {
			first = ev.GetStarted()[0].GetInstanceId()
		} else if got := ev.GetStarted()[0]; got.GetInstanceId() != first || !got.GetExisting() {
			t.Fatalf("the same event again started %v, want %s", got, first)
		}
	}
	in = waitDone(t, tn.api, first, 30*time.Second)
	wantState(t, in, robonetv1.InstanceState_INSTANCE_STATE_COMPLETE)
	wantOutputs(t, in, `{"shipped": "A-17"}`)
	list, err := tn.api.ListInstances(ctxFor(t, 10*time.Second), &robonetv1.ListInstancesRequest{Workflow: "on-event"})
	if err != nil || len(list.GetInstances()) != 1 {
		t.Fatalf("instances of on-event: %v, %v; want one", list, err)
	}
}
