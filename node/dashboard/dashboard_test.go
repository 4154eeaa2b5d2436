package dashboard

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/robonet/robonet/internal/access"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeAPI serves one instance whose tasks advance a step at each read.
type fakeAPI struct {
	robonetv1.UnimplementedWorkflowServiceServer
	mu        sync.Mutex
	reads     int
	cancelled []string
	listed    []*robonetv1.ListInstancesRequest
	actions   []string // signals, pauses, resumes and retries (lifecycle_test.go)
	actionErr error    // the answer to them
}

const instanceID = "0b9c6f3e-4a52-4d6b-9d9e-6f1f0c2a7e11"

// childID is a child instance of instanceID, which starts one of its own.
const childID = "5a1e2b3c-4d5e-5f60-8a7b-8c9d0e1f2a3b"

func (f *fakeAPI) GetInstance(_ context.Context, req *robonetv1.GetInstanceRequest) (*robonetv1.GetInstanceResponse, error) {
	if in, ok := lifecycleInstances()[req.GetInstanceId()]; ok {
		return &robonetv1.GetInstanceResponse{Instance: in}, nil
	}
	if req.GetInstanceId() == childID {
		return &robonetv1.GetInstanceResponse{Instance: &robonetv1.Instance{Id: childID, Workflow: "scan-host", Version: 2,
			State: robonetv1.InstanceState_INSTANCE_STATE_RUNNING, CreatedAt: timestamppb.Now(),
			Parent: &robonetv1.InstanceParent{InstanceId: instanceID, Execution: "scan[3]", Attempt: 2},
			Tasks: []*robonetv1.TaskState{{Name: "deeper", Workflow: "scan-port", WorkflowVersion: 1, Status: robonetv1.TaskStatus_TASK_STATUS_RUNNING,
				Spread: true, Width: 2, Attempts: []*robonetv1.TaskAttempt{
					{Index: 0, Attempt: 1, Running: true, ChildInstanceId: "grandchild-0"},
					{Index: 1, Attempt: 1, Running: true, ChildInstanceId: "grandchild-1"},
				}}}}}, nil
	}
	if req.GetInstanceId() != instanceID {
		return nil, status.Error(codes.NotFound, "instance "+req.GetInstanceId()+" not found")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	step := f.reads // 1: a runs; 2: a done, b and c run; 3: everything done
	st := func(done int) robonetv1.TaskStatus {
		switch {
		case step > done:
			return robonetv1.TaskStatus_TASK_STATUS_COMPLETED
		case step == done:
			return robonetv1.TaskStatus_TASK_STATUS_RUNNING
		}
		return robonetv1.TaskStatus_TASK_STATUS_WAITING
	}
	in := &robonetv1.Instance{Id: instanceID, Workflow: "diamond", Version: 2, State: robonetv1.InstanceState_INSTANCE_STATE_RUNNING,
		CreatedAt: timestamppb.Now(), Progress: &robonetv1.InstanceProgress{Total: 4, Done: int32(min(step-1, 4))},
		Tasks: []*robonetv1.TaskState{
			{Name: "a", Capability: "core", Action: "echo", Status: st(1)},
			{Name: "b", Capability: "core", Action: "echo", Status: st(2), Needs: []string{"a"}, Spread: true, Width: 10, Done: int32(min(max(step-2, 0)*10, 10))},
			{Name: "c", Capability: "core", Action: "exec", Status: st(2), Needs: []string{"a"}, Attempt: 2, MaxAttempts: 3, Error: "exit status 1: <script>boom</script>"},
			{Name: "d", Capability: "core", Action: "echo", Status: st(3), Needs: []string{"b", "c"}},
		}}
	if step > 3 {
		in.State = robonetv1.InstanceState_INSTANCE_STATE_COMPLETE
		in.Progress.Done = 4
	}
	return &robonetv1.GetInstanceResponse{Instance: in}, nil
}

func (f *fakeAPI) CancelInstance(_ context.Context, req *robonetv1.CancelInstanceRequest) (*robonetv1.CancelInstanceResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cancelled = append(f.cancelled, req.GetInstanceId())
	return &robonetv1.CancelInstanceResponse{}, nil
}

func (f *fakeAPI) ListInstances(_ context.Context, req *robonetv1.ListInstancesRequest) (*robonetv1.ListInstancesResponse, error) {
	f.mu.Lock()
	f.listed = append(f.listed, req)
	f.mu.Unlock()
	return &robonetv1.ListInstancesResponse{NextPageToken: "tok2", Instances: []*robonetv1.InstanceSummary{
		{Id: instanceID, Workflow: "diamond", Version: 2, State: robonetv1.InstanceState_INSTANCE_STATE_RUNNING, CreatedAt: timestamppb.Now()},
		{Id: childID, Workflow: "scan-host", Version: 2, State: robonetv1.InstanceState_INSTANCE_STATE_RUNNING, CreatedAt: timestamppb.Now(),
			ParentInstanceId: instanceID},
		{Id: "old-instance", Workflow: "diamond", Version: 1, State: robonetv1.InstanceState_INSTANCE_STATE_COMPLETE,
			CreatedAt: timestamppb.New(time.Now().Add(-48 * time.Hour))},
	}}, nil
}

func (f *fakeAPI) ListWorkflows(context.Context, *robonetv1.ListWorkflowsRequest) (*robonetv1.ListWorkflowsResponse, error) {
	return &robonetv1.ListWorkflowsResponse{Workflows: []*robonetv1.WorkflowInfo{{Name: "diamond", Version: 2, Tasks: 4}}}, nil
}

func (f *fakeAPI) ListSchedules(context.Context, *robonetv1.ListSchedulesRequest) (*robonetv1.ListSchedulesResponse, error) {
	return &robonetv1.ListSchedulesResponse{Schedules: []*robonetv1.ScheduleInfo{{Name: "nightly", Workflow: &robonetv1.WorkflowRef{Name: "diamond"}, Cron: "30 2 * * *"}}}, nil
}

type fakeMesh struct {
	robonetv1.UnimplementedMeshServiceServer
}

func (fakeMesh) ListMembers(context.Context, *robonetv1.ListMembersRequest) (*robonetv1.ListMembersResponse, error) {
	return &robonetv1.ListMembersResponse{Members: []*robonetv1.Member{
		{Name: "s1", Status: "alive", Roles: []string{"server", "worker"}, Leader: true, Capabilities: map[string]int32{"core": 4},
			Pools: []*robonetv1.PoolStats{{Capability: "core", Pool: "core", Slots: 4, Busy: 1, Completed: 12}}, PoolsAt: timestamppb.Now()},
		{Name: "w1", Status: "failed", Roles: []string{"worker"}, PoolsNote: "w1 is failed",
			PoolsAt: timestamppb.New(time.Now().Add(-3 * time.Minute))},
	}}, nil
}

func (fakeMesh) GetLeader(context.Context, *robonetv1.GetLeaderRequest) (*robonetv1.GetLeaderResponse, error) {
	return &robonetv1.GetLeaderResponse{Name: "s1", Term: 7}, nil
}

func (fakeMesh) ListWagglers(context.Context, *robonetv1.ListWagglersRequest) (*robonetv1.ListWagglersResponse, error) {
	return &robonetv1.ListWagglersResponse{Wagglers: []*robonetv1.WagglerRole{{Capability: "core", Node: "s1", Epoch: 3, State: "MONITORING", Workers: 4}}}, nil
}

func (fakeMesh) ListTrust(context.Context, *robonetv1.ListTrustRequest) (*robonetv1.ListTrustResponse, error) {
	return &robonetv1.ListTrustResponse{DispatchTier: "established", Nodes: []*robonetv1.NodeTrust{{Node: "w1", Tier: "provisional"},
		{Node: "w1/gpu-box", Tier: "unverified", Evidence: map[string]uint64{"misbehaviour": 2}}}}, nil
}

func (fakeMesh) Quarantine(context.Context, *robonetv1.QuarantineRequest) (*robonetv1.QuarantineResponse, error) {
	return &robonetv1.QuarantineResponse{Nodes: []*robonetv1.QuarantinedNode{{Node: "w1", Reason: "replayed heartbeats", Since: timestamppb.Now()},
		{Node: "w1/gpu-box", Reason: "sentinel: answers to attempts it was never given", Since: timestamppb.Now()}}}, nil
}

func (fakeMesh) ListPartitions(context.Context, *robonetv1.ListPartitionsRequest) (*robonetv1.ListPartitionsResponse, error) {
	return &robonetv1.ListPartitionsResponse{Count: 2, Placement: "leader", Partitions: []*robonetv1.PartitionInfo{
		{Partition: 0, Owner: "s1", Epoch: 9, Term: 7, MovedAtUnixNanos: time.Now().Add(-2 * time.Minute).UnixNano(), Reason: "new leadership term 7",
			HasStats: true, InstancesHeld: 3, TasksTotal: 41, TasksPerSecond: 2.5},
		{Partition: 1, Owner: "s1", Epoch: 9, Term: 7, Reason: "new leadership term 7"},
	}}, nil
}

func newTestServer(t *testing.T, authorize func(string) (*access.Principal, bool)) (*httptest.Server, *fakeAPI) {
	t.Helper()
	api := &fakeAPI{}
	cfg := Config{API: api, Mesh: fakeMesh{}, Authorize: authorize, Node: "s1", LivePoll: 10 * time.Millisecond}
	if authorize != nil {
		cfg.Permit = testPermit
	}
	h, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, api
}

// noRedirect is a client that shows redirects instead of following them.
var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func get(t *testing.T, c *http.Client, url string) (int, string, http.Header) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		b.WriteString(sc.Text() + "\n")
	}
	return resp.StatusCode, b.String(), resp.Header
}

func TestPages(t *testing.T) {
	srv, api := newTestServer(t, nil)
	for _, tc := range []struct {
		path string
		code int
		want []string
	}{
		{"/ui/", 200, []string{`id="members"`, "s1", `class="badge leader"`, "term 7", "MONITORING", `<span class="tier provisional"`, "replayed heartbeats",
			`<meter min="0" max="4" value="1">`, "w1 is failed", "established", "just now", "3m ago",
			`id="partitions"`, "2 partitions, placed on the Raft leader", "<td>2.5</td>", "2m ago", "new leadership term 7", "not reported by its owner",
			`id="programs"`, "<td>gpu-box</td>", `<span class="tier unverified"`, "misbehaviour=2", "answers to attempts it was never given"}},
		{"/ui/instances?state=running&workflow=diamond", 200, []string{`href="/ui/instances/` + instanceID + `"`, "diamond v2", `id="next-page"`, "page=tok2"}},
		{"/ui/instances?state=bogus", 400, []string{"choose pending, running"}},
		{"/ui/instances?age=bogus", 400, []string{"choose 1h, 24h or 7d"}},
		{"/ui/instances?age=24h", 200, []string{instanceID, `<option value="24h" selected>`}},
		{"/ui/instances/" + instanceID, 200, []string{`<g class="task running" data-task="a"`, `data-task="d"`, `id="cancel"`, "0/10 done",
			"attempt 2 of 3", "&lt;script&gt;boom&lt;/script&gt;", `data-live="/ui/instances/` + instanceID + `/live"`}},
		{"/ui/instances/nope", 404, []string{"instance nope not found"}},
		// A child links to its parent, a task whose body is a child
		// workflow to the children it started, a listing to the parents.
		{"/ui/instances/" + childID, 200, []string{`id="parent"`, `href="/ui/instances/` + instanceID + `"`, "task scan[3], attempt 2",
			"workflow scan-port v1", `href="/ui/instances/grandchild-1">[1] #1 grandchild-1</a>`, "deeper: workflow scan-port v1 — running"}},
		{"/ui/instances", 200, []string{`(child of <a class="mono" href="/ui/instances/` + instanceID + `">0b9c6f3e</a>)`}},
		{"/ui/workflows", 200, []string{"diamond", "nightly", "30 2 * * *"}},
		{"/ui/static/app.js", 200, []string{"EventSource"}},
		{"/ui/static/app.css", 200, []string{".dag .task.completed rect"}},
	} {
		code, body, hdr := get(t, noRedirect, srv.URL+tc.path)
		if code != tc.code {
			t.Errorf("GET %s: %d, want %d\n%s", tc.path, code, tc.code, body)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(body, w) {
				t.Errorf("GET %s lacks %q", tc.path, w)
			}
		}
		if strings.HasSuffix(tc.path, ".js") || strings.HasSuffix(tc.path, ".css") {
			continue
		}
		if csp := hdr.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
			t.Errorf("GET %s: CSP %q", tc.path, csp)
		}
		if strings.Contains(body, "<script>boom") {
			t.Errorf("GET %s: an error is not escaped", tc.path)
		}
	}
	api.mu.Lock()
	defer api.mu.Unlock()
	if len(api.listed) < 1 || api.listed[0].GetWorkflow() != "diamond" || len(api.listed[0].GetStates()) != 1 ||
		api.listed[0].GetStates()[0] != robonetv1.InstanceState_INSTANCE_STATE_RUNNING {
		t.Errorf("the filter reached ListInstances as %v", api.listed)
	}
}

// The live view streams each change of the instance and ends once it is
// terminal.
func TestLiveView(t *testing.T) {
	srv, _ := newTestServer(t, nil)
	resp, err := http.Get(srv.URL + "/ui/instances/" + instanceID + "/live")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	var events []live
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			var l live
			if err := json.Unmarshal([]byte(data), &l); err != nil {
				t.Fatalf("event %q: %v", data, err)
			}
			events = append(events, l)
		}
	}
	if len(events) != 4 || events[0].Tasks["a"].Status != "running" || events[1].Tasks["b"].Status != "running" ||
		events[2].Tasks["b"].Label != "10/10 done" || !events[3].Terminal || events[3].State != "complete" || events[3].Tasks["d"].Status != "completed" {
		t.Fatalf("events %+v", events)
	}
}

func TestCancel(t *testing.T) {
	srv, api := newTestServer(t, nil)
	resp, err := noRedirect.PostForm(srv.URL+"/ui/instances/"+instanceID+"/cancel", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/instances/"+instanceID {
		t.Fatalf("cancel: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/ui/instances/"+instanceID+"/cancel", nil)
	req.Header.Set("Origin", "https://evil.example")
	resp, err = noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a cross-site cancel: %d, want 403", resp.StatusCode)
	}
	api.mu.Lock()
	defer api.mu.Unlock()
	if len(api.cancelled) != 1 || api.cancelled[0] != instanceID {
		t.Fatalf("cancelled %v", api.cancelled)
	}
}

// With API tokens, pages ask to sign in; a valid token is kept in a
// cookie, a bad one is refused.
func TestSignIn(t *testing.T) {
	srv, _ := newTestServer(t, tokens(map[string]*access.Principal{"s3cret-token": {Name: "alice", Role: access.Admin}}))
	code, _, hdr := get(t, noRedirect, srv.URL+"/ui/instances")
	if code != http.StatusSeeOther || !strings.HasPrefix(hdr.Get("Location"), "/ui/login?next=") {
		t.Fatalf("signed out: %d to %q", code, hdr.Get("Location"))
	}
	if code, body, _ := get(t, noRedirect, srv.URL+"/ui/login"); code != 200 || !strings.Contains(body, `name="token"`) {
		t.Fatalf("login page: %d", code)
	}
	resp, err := noRedirect.PostForm(srv.URL+"/ui/login", url.Values{"token": {"wrong"}, "next": {"/ui/instances"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a bad token: %d, want 401", resp.StatusCode)
	}
	resp, err = noRedirect.PostForm(srv.URL+"/ui/login", url.Values{"token": {"s3cret-token"}, "next": {"https://evil.example/"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cookies := resp.Cookies()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/" || len(cookies) != 1 || !cookies[0].HttpOnly {
		t.Fatalf("a good token: %d to %q, cookies %v (the next page must stay in the dashboard)", resp.StatusCode, resp.Header.Get("Location"), cookies)
	}
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/ui/instances", nil)
	req.AddCookie(cookies[0])
	resp, err = noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("signed in: %d", resp.StatusCode)
	}
	req, _ = http.NewRequest(http.MethodGet, srv.URL+"/ui/workflows", nil)
	req.Header.Set("Authorization", "Bearer s3cret-token")
	if resp, err = noRedirect.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("with a bearer header: %d", resp.StatusCode)
	}
}

// The age filter ends the newest-first list at the first older instance
// (and with it the paging); an id jumps to its instance.
func TestInstanceSearch(t *testing.T) {
	srv, _ := newTestServer(t, nil)
	_, all, _ := get(t, noRedirect, srv.URL+"/ui/instances")
	_, recent, _ := get(t, noRedirect, srv.URL+"/ui/instances?age=24h")
	if !strings.Contains(all, "old-instance") || !strings.Contains(all, `id="next-page"`) {
		t.Fatalf("without an age filter the old instance and the next page are listed")
	}
	if strings.Contains(recent, "old-instance") || strings.Contains(recent, `id="next-page"`) {
		t.Fatalf("age=24h still lists the two-day-old instance or a next page")
	}
	code, _, hdr := get(t, noRedirect, srv.URL+"/ui/instances?id=+"+instanceID+"+")
	if code != http.StatusSeeOther || hdr.Get("Location") != "/ui/instances/"+instanceID {
		t.Fatalf("an id search: %d to %q", code, hdr.Get("Location"))
	}
}

// The page says the API's ETA, and that there is none while it runs
// without one.
func TestETA(t *testing.T) {
	running, complete := robonetv1.InstanceState_INSTANCE_STATE_RUNNING, robonetv1.InstanceState_INSTANCE_STATE_COMPLETE
	for _, c := range []struct {
		state robonetv1.InstanceState
		eta   *durationpb.Duration
		want  string
	}{
		{running, durationpb.New(80*time.Second + 400*time.Millisecond), "about 1m20s left"},
		{running, durationpb.New(0), "less than a second left"},
		{running, nil, "time left unknown"},
		{complete, nil, ""},
	} {
		if got := eta(&robonetv1.Instance{State: c.state, Eta: c.eta}); got != c.want {
			t.Errorf("%s with eta %v: %q, want %q", c.state, c.eta, got, c.want)
		}
	}
}

// tokens authorizes the tokens of m.
func tokens(m map[string]*access.Principal) func(string) (*access.Principal, bool) {
	return func(tok string) (*access.Principal, bool) {
		p, ok := m[tok]
		return p, ok
	}
}

// testPermit stands for the node's table: signals need submit, the
// instance's other buttons operate.
func testPermit(p *access.Principal, fullMethod string) bool {
	if strings.HasSuffix(fullMethod, "/SignalInstance") {
		return p.Role.Allows(access.Submit)
	}
	return p.Role.Allows(access.Operate)
}

// A signed-in role sees only the buttons it may press, and a form it
// posts without the role is refused before any call.
func TestRolesOnPages(t *testing.T) {
	srv, api := newTestServer(t, tokens(map[string]*access.Principal{
		"reader-token-0123456789": {Name: "rita", Role: access.Read},
		"oper-token-0123456789":   {Name: "otto", Role: access.Operate},
	}))
	page := func(token string) string {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/ui/instances/"+childID, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d", token, resp.StatusCode)
		}
		return string(b)
	}
	if body := page("reader-token-0123456789"); strings.Contains(body, `id="cancel-form"`) || !strings.Contains(body, "signed in as rita (role read)") {
		t.Fatal("a reader's page offers cancel, or does not say who is signed in")
	}
	if body := page("oper-token-0123456789"); !strings.Contains(body, `id="cancel-form"`) {
		t.Fatal("an operator's page of a running instance has no cancel button")
	}
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/ui/instances/"+childID+"/cancel", nil)
	req.Header.Set("Authorization", "Bearer reader-token-0123456789")
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(b), "rita (role read) may not do this") {
		t.Fatalf("a reader's cancel: %d %s", resp.StatusCode, b)
	}
	api.mu.Lock()
	defer api.mu.Unlock()
	if len(api.cancelled) != 0 {
		t.Fatalf("a refused cancel reached the API: %v", api.cancelled)
	}
}
