package dashboard

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// Instances of the lifecycle tests: one paused with tasks waiting for
// signals and a time, one running, one failed.
const (
	waitingID = "11111111-2222-4333-8444-555555555555"
	runningID = "11111111-2222-4333-8444-666666666666"
	failedID  = "11111111-2222-4333-8444-777777777777"
)

func lifecycleInstances() map[string]*robonetv1.Instance {
	t0 := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	running := robonetv1.TaskStatus_TASK_STATUS_RUNNING
	return map[string]*robonetv1.Instance{
		waitingID: {Id: waitingID, Workflow: "release", Version: 1, State: robonetv1.InstanceState_INSTANCE_STATE_PAUSED, Paused: true, Run: 2,
			Tasks: []*robonetv1.TaskState{
				{Name: "approve", Status: running, WaitSignal: "approve", Waiting: true, WaitUntil: timestamppb.New(t0.Add(48 * time.Hour))},
				{Name: "sign_off", Status: running, WaitSignal: "sign.off", Waiting: true},
				{Name: "cool_down", Status: running, Waiting: true, WaitUntil: timestamppb.New(t0.Add(10 * time.Minute))},
				{Name: "go_live", Status: robonetv1.TaskStatus_TASK_STATUS_WAITING, WaitSignal: "go", Needs: []string{"approve"}},
			},
			Signals: []*robonetv1.Signal{{Seq: 3, Name: "approve", PayloadJson: `{"by":"<b>ada</b>"}`, At: timestamppb.New(t0), Consumed: true, By: "approve#1"},
				{Seq: 4, Name: "go", PayloadJson: "null", At: timestamppb.New(t0)}}},
		runningID: {Id: runningID, Workflow: "release", Version: 1, State: robonetv1.InstanceState_INSTANCE_STATE_RUNNING, Run: 1,
			Tasks: []*robonetv1.TaskState{{Name: "build", Capability: "core", Action: "exec", Status: running}}},
		failedID: {Id: failedID, Workflow: "release", Version: 1, State: robonetv1.InstanceState_INSTANCE_STATE_FAILED, Run: 1, Error: "deploy failed",
			Tasks: []*robonetv1.TaskState{{Name: "build", Capability: "core", Action: "exec", Status: robonetv1.TaskStatus_TASK_STATUS_COMPLETED},
				{Name: "deploy", Capability: "core", Action: "exec", Status: robonetv1.TaskStatus_TASK_STATUS_FAILED, Needs: []string{"build"}}}},
	}
}

func (f *fakeAPI) act(what string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.actions = append(f.actions, what)
	return f.actionErr
}

func (f *fakeAPI) takeActions() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	a := f.actions
	f.actions = nil
	return a
}

func (f *fakeAPI) SignalInstance(_ context.Context, req *robonetv1.SignalInstanceRequest) (*robonetv1.SignalInstanceResponse, error) {
	return &robonetv1.SignalInstanceResponse{Seq: 9}, f.act(fmt.Sprintf("signal %s %s %s key=%t", req.GetInstanceId(), req.GetName(), req.GetPayloadJson(),
		strings.HasPrefix(req.GetIdempotencyKey(), "dashboard:")))
}

func (f *fakeAPI) PauseInstance(_ context.Context, req *robonetv1.PauseInstanceRequest) (*robonetv1.PauseInstanceResponse, error) {
	return &robonetv1.PauseInstanceResponse{}, f.act("pause " + req.GetInstanceId())
}

func (f *fakeAPI) ResumeInstance(_ context.Context, req *robonetv1.ResumeInstanceRequest) (*robonetv1.ResumeInstanceResponse, error) {
	return &robonetv1.ResumeInstanceResponse{}, f.act("resume " + req.GetInstanceId())
}

func (f *fakeAPI) RetryInstance(_ context.Context, req *robonetv1.RetryInstanceRequest) (*robonetv1.RetryInstanceResponse, error) {
	return &robonetv1.RetryInstanceResponse{Run: 2}, f.act("retry " + req.GetInstanceId() + " from=" + req.GetFromTask())
}

// The page shows the buttons and forms that apply to the instance's state.
func TestLifecycleControls(t *testing.T) {
	srv, _ := newTestServer(t, nil)
	for _, c := range []struct {
		id        string
		want, not []string
	}{
		{waitingID, []string{`id="resume"`, `id="cancel"`, `<span class="badge" id="run">run 2</span>`, `class="state paused"`,
			`data-signal="approve"`, `<button>Send signal approve</button>`, `<button>Send signal sign.off</button>`, `name="payload"`,
			"waiting for signal approve, times out at 2026-12-01 10:00:00Z", "waiting until 2026-11-29 10:10:00Z",
			`id="signals"`, "approve#1", "not taken yet", "&lt;b&gt;ada&lt;/b&gt;", "wait for signal go"},
			[]string{`id="pause"`, `id="retry"`, `data-signal="go"`, "<b>ada</b>"}},
		{runningID, []string{`id="pause"`, `id="cancel"`}, []string{`id="resume"`, `id="retry"`, `class="signal-form"`, `id="run"`, `id="signals"`}},
		{failedID, []string{`id="retry"`, `<option value="deploy">deploy and what depends on it</option>`},
			[]string{`id="pause"`, `id="resume"`, `id="cancel"`}},
	} {
		code, body, _ := get(t, noRedirect, srv.URL+"/ui/instances/"+c.id)
		if code != http.StatusOK {
			t.Fatalf("%s: %d\n%s", c.id, code, body)
		}
		for _, w := range c.want {
			if !strings.Contains(body, w) {
				t.Errorf("%s lacks %q", c.id, w)
			}
		}
		for _, n := range c.not {
			if strings.Contains(body, n) {
				t.Errorf("%s has %q", c.id, n)
			}
		}
	}
	// Each signal form has its own idempotency key.
	_, body, _ := get(t, noRedirect, srv.URL+"/ui/instances/"+waitingID)
	keys := regexp.MustCompile(`name="key" value="(dashboard:[0-9a-f-]{36})"`).FindAllStringSubmatch(body, -1)
	if len(keys) != 2 || keys[0][1] == keys[1][1] {
		t.Errorf("signal form keys %v", keys)
	}
}

func TestLifecycleActions(t *testing.T) {
	srv, api := newTestServer(t, nil)
	// post answers the status code and the redirect's location.
	post := func(path string, form url.Values, origin string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("Location")
	}
	for _, c := range []struct {
		path string
		form url.Values
		want string
	}{
		{"/ui/instances/" + waitingID + "/signal", url.Values{"name": {"approve"}, "payload": {` {"ok": true} `}, "key": {"dashboard:k"}},
			"signal " + waitingID + ` approve {"ok": true} key=true`},
		{"/ui/instances/" + waitingID + "/signal", url.Values{"name": {"sign.off"}, "payload": {""}}, "signal " + waitingID + " sign.off  key=false"},
		{"/ui/instances/" + waitingID + "/resume", nil, "resume " + waitingID},
		{"/ui/instances/" + runningID + "/pause", nil, "pause " + runningID},
		{"/ui/instances/" + failedID + "/retry", url.Values{"from": {""}}, "retry " + failedID + " from="},
		{"/ui/instances/" + failedID + "/retry", url.Values{"from": {"deploy"}}, "retry " + failedID + " from=deploy"},
	} {
		code, loc := post(c.path, c.form, "")
		id := strings.Split(c.path, "/")[3]
		if code != http.StatusSeeOther || loc != "/ui/instances/"+id {
			t.Errorf("POST %s: %d to %q", c.path, code, loc)
		}
		if got := api.takeActions(); !slices.Equal(got, []string{c.want}) {
			t.Errorf("POST %s: the API got %q, want %q", c.path, got, c.want)
		}
		// The same post from another site is refused before the API.
		if code, _ := post(c.path, c.form, "https://evil.example"); code != http.StatusForbidden {
			t.Errorf("a cross-site POST %s: %d, want 403", c.path, code)
		}
		if got := api.takeActions(); len(got) != 0 {
			t.Errorf("a cross-site POST %s reached the API: %q", c.path, got)
		}
	}

	// The API's refusals are shown with a status a user can act on.
	for _, c := range []struct {
		err  error
		code int
	}{
		{status.Error(codes.InvalidArgument, "payload_json: not valid JSON"), http.StatusBadRequest},
		{status.Error(codes.FailedPrecondition, "no task of the workflow waits for this signal"), http.StatusConflict},
	} {
		api.mu.Lock()
		api.actionErr = c.err
		api.mu.Unlock()
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/ui/instances/"+waitingID+"/signal", strings.NewReader("name=approve&payload=%7B"))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		buf := make([]byte, 4096)
		for {
			n, err := resp.Body.Read(buf)
			b.Write(buf[:n])
			if err != nil {
				break
			}
		}
		resp.Body.Close()
		if resp.StatusCode != c.code || !strings.Contains(b.String(), status.Convert(c.err).Message()) {
			t.Errorf("%v: %d, want %d\n%s", c.err, resp.StatusCode, c.code, b.String())
		}
	}
	api.takeActions()

	// A form over the size bound is refused before the API.
	api.mu.Lock()
	api.actionErr = nil
	api.mu.Unlock()
	if code, _ := post("/ui/instances/"+waitingID+"/signal", url.Values{"name": {"approve"}, "payload": {strings.Repeat("x", maxFormBytes)}}, ""); code != http.StatusBadRequest {
		t.Errorf("an oversized form: %d, want 400", code)
	}
	if got := api.takeActions(); len(got) != 0 {
		t.Errorf("an oversized form reached the API: %d calls", len(got))
	}
}

// The live view says when the page's controls change, so that the page
// reloads to show them.
func TestLiveControls(t *testing.T) {
	ins := lifecycleInstances()
	paused, running := liveOf(ins[waitingID]), liveOf(ins[runningID])
	if paused.Controls == running.Controls || paused.Controls != controlsKey(ins[waitingID]) {
		t.Errorf("controls %q / %q", paused.Controls, running.Controls)
	}
	if l := paused.Tasks["approve"].Label; l != "signal approve" {
		t.Errorf("the approve box says %q", l)
	}
	if l := paused.Tasks["cool_down"].Label; l != "until 10:10:00Z" {
		t.Errorf("the cool_down box says %q", l)
	}
}
