package dashboard

import (
	"context"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/timestamppb"

	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

var funcs = template.FuncMap{
	"when": func(ts *timestamppb.Timestamp) string {
		if ts == nil {
			return "—"
		}
		return ts.AsTime().UTC().Format("2006-01-02 15:04:05Z")
	},
	"ago": func(ts *timestamppb.Timestamp) string {
		if ts == nil {
			return ""
		}
		return roundAgo(time.Since(ts.AsTime()))
	},
	// heard is how long ago a node answered: "just now" within a few
	// seconds.
	"heard": func(ts *timestamppb.Timestamp) string {
		if d := time.Since(ts.AsTime()); d >= 5*time.Second {
			return roundAgo(d)
		}
		return "just now"
	},
	// agoNanos is how long ago a time in Unix nanoseconds was.
	"agoNanos":   func(ns int64) string { return roundAgo(time.Since(time.Unix(0, ns))) },
	"state":      stateName,
	"taskStatus": taskStatusName,
	"clip":       func(s string) string { return clip(s, nameRunesMax) },
	"join":       strings.Join,
	"dur": func(d interface{ AsDuration() time.Duration }) string {
		return d.AsDuration().Round(time.Microsecond).String()
	},
	"body":     taskBody,
	"wait":     waitLabel,
	"children": childLinks,
}

// taskBody says what runs a task: "capability / action", or the child
// workflow it runs.
func taskBody(t *robonetv1.TaskState) string {
	switch {
	case t.GetWorkflow() == "" && t.GetWaitSignal() != "":
		return "wait for signal " + t.GetWaitSignal()
	case t.GetWorkflow() == "" && t.GetCapability() == "" && t.GetAction() == "":
		return "wait"
	}
	if t.GetWorkflow() == "" {
		return t.GetCapability() + " / " + t.GetAction()
	}
	if v := t.GetWorkflowVersion(); v > 0 {
		return fmt.Sprintf("workflow %s v%d", t.GetWorkflow(), v)
	}
	return "workflow " + t.GetWorkflow()
}

// childLink is a child instance a task's attempt started, for a link.
type childLink struct {
	ID, Label string
}

// maxChildLinks bounds the child instances a task's row links to.
const maxChildLinks = 12

// taskChildren are the child instances of a task's attempts to link to,
// and how many more were left out.
type taskChildren struct {
	Links []childLink
	More  int
}

// childLinks are the child instances of a task's attempts (at most
// maxChildLinks), labelled as roboctl get labels attempts: "[2] #1",
// "#2 attempt 1", "#1".
func childLinks(t *robonetv1.TaskState) taskChildren {
	var c taskChildren
	for _, a := range t.GetAttempts() {
		if a.GetChildInstanceId() == "" {
			continue
		}
		if len(c.Links) == maxChildLinks {
			c.More++
			continue
		}
		label := fmt.Sprintf("#%d", a.GetAttempt())
		switch {
		case t.GetSpread():
			label = fmt.Sprintf("[%d] #%d", a.GetIndex(), a.GetAttempt())
		case t.GetLoop():
			label = fmt.Sprintf("#%d attempt %d", a.GetIndex(), a.GetAttempt())
		}
		c.Links = append(c.Links, childLink{ID: a.GetChildInstanceId(), Label: label})
	}
	return c
}

func roundAgo(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	}
	return fmt.Sprintf("%dd ago", int(d.Hours()/24))
}

// stateName is an instance state in lower case: pending, running, ...
func stateName(s robonetv1.InstanceState) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "INSTANCE_STATE_"))
}

// taskStatusName is a task status in lower case: waiting, running, ...
func taskStatusName(s robonetv1.TaskStatus) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "TASK_STATUS_"))
}

func terminal(s robonetv1.InstanceState) bool {
	switch s {
	case robonetv1.InstanceState_INSTANCE_STATE_COMPLETE, robonetv1.InstanceState_INSTANCE_STATE_FAILED, robonetv1.InstanceState_INSTANCE_STATE_CANCELLED:
		return true
	}
	return false
}

// ages are the instance list's age filters.
var ages = map[string]time.Duration{"1h": time.Hour, "24h": 24 * time.Hour, "7d": 7 * 24 * time.Hour}

// programTrust is a worker program's row in the mesh page: a trust
// subject of its own, NODE/PROGRAM, connected through Node.
type programTrust struct {
	Subject, Node, Program string
	Trust                  *robonetv1.NodeTrust
}

// meshPage: members, leader, Waggler roles, trust (of nodes and worker
// programs), quarantine, pools, partitions.
func (s *server) meshPage(w http.ResponseWriter, r *http.Request) {
	c, cancel := ctx(r)
	defer cancel()
	members, err := s.cfg.Mesh.ListMembers(c, &robonetv1.ListMembersRequest{Pools: true})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	data := map[string]any{"Members": members.GetMembers()}
	if l, err := s.cfg.Mesh.GetLeader(c, &robonetv1.GetLeaderRequest{}); err == nil {
		data["Leader"] = l
	}
	if wg, err := s.cfg.Mesh.ListWagglers(c, &robonetv1.ListWagglersRequest{}); err == nil {
		data["Wagglers"] = wg.GetWagglers()
	} else {
		data["WagglersError"] = err.Error()
	}
	tiers := map[string]*robonetv1.NodeTrust{}
	var programs []programTrust
	if tr, err := s.cfg.Mesh.ListTrust(c, &robonetv1.ListTrustRequest{}); err == nil {
		for _, n := range tr.GetNodes() {
			tiers[n.GetNode()] = n
			if node, program, ok := strings.Cut(n.GetNode(), "/"); ok {
				programs = append(programs, programTrust{Subject: n.GetNode(), Node: node, Program: program, Trust: n})
			}
		}
		data["DispatchTier"] = tr.GetDispatchTier()
	} else {
		data["TrustNote"] = "trust tiers: " + errMessage(err)
	}
	data["Trust"] = tiers
	data["Programs"] = programs
	quarantined := map[string]*robonetv1.QuarantinedNode{}
	if q, err := s.cfg.Mesh.Quarantine(c, &robonetv1.QuarantineRequest{Op: robonetv1.QuarantineOp_QUARANTINE_OP_LIST}); err == nil {
		for _, n := range q.GetNodes() {
			quarantined[n.GetNode()] = n
		}
	}
	data["Quarantined"] = quarantined
	if ps, err := s.cfg.Mesh.ListPartitions(c, &robonetv1.ListPartitionsRequest{}); err == nil {
		data["Partitions"] = ps
	} else {
		data["PartitionsError"] = "partitions: " + errMessage(err)
	}
	s.render(w, r, "mesh", http.StatusOK, data)
}

// instancesPage: a filtered, paged list.
func (s *server) instancesPage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if id := strings.TrimSpace(q.Get("id")); id != "" {
		http.Redirect(w, r, Prefix+"instances/"+url.PathEscape(id), http.StatusSeeOther)
		return
	}
	req := &robonetv1.ListInstancesRequest{Workflow: q.Get("workflow"), PageToken: q.Get("page"), PageSize: 50}
	var cutoff time.Time
	if age := q.Get("age"); age != "" {
		d, ok := ages[age]
		if !ok {
			s.render(w, r, "error", http.StatusBadRequest, map[string]any{"Error": fmt.Sprintf("age %q: choose 1h, 24h or 7d", age), "Code": http.StatusBadRequest})
			return
		}
		cutoff = time.Now().Add(-d)
	}
	if st := q.Get("state"); st != "" {
		v, ok := robonetv1.InstanceState_value["INSTANCE_STATE_"+strings.ToUpper(st)]
		if !ok {
			s.render(w, r, "error", http.StatusBadRequest, map[string]any{"Error": fmt.Sprintf("state %q: choose pending, running, gathering, paused, complete, failed or cancelled", st), "Code": http.StatusBadRequest})
			return
		}
		req.States = []robonetv1.InstanceState{robonetv1.InstanceState(v)}
	}
	c, cancel := ctx(r)
	defer cancel()
	resp, err := s.cfg.API.ListInstances(c, req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	// Newest first: the first instance older than the cutoff ends the list.
	list, next := resp.GetInstances(), resp.GetNextPageToken()
	if !cutoff.IsZero() {
		if i := slices.IndexFunc(list, func(in *robonetv1.InstanceSummary) bool { return in.GetCreatedAt().AsTime().Before(cutoff) }); i >= 0 {
			list, next = list[:i], ""
		}
	}
	s.render(w, r, "instances", http.StatusOK, map[string]any{
		"Instances": list, "Next": next, "Workflow": req.GetWorkflow(), "State": q.Get("state"), "Age": q.Get("age"),
		"States": []string{"pending", "running", "gathering", "paused", "complete", "failed", "cancelled"}, "Ages": []string{"1h", "24h", "7d"},
	})
}

// instancePage: one instance, its DAG, its tasks; live while it runs.
func (s *server) instancePage(w http.ResponseWriter, r *http.Request) {
	c, cancel := ctx(r)
	defer cancel()
	resp, err := s.cfg.API.GetInstance(c, &robonetv1.GetInstanceRequest{InstanceId: r.PathValue("id")})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	in := resp.GetInstance()
	s.render(w, r, "instance", http.StatusOK, map[string]any{
		"Instance": in, "DAG": layoutDAG(dagNodes(in)), "Terminal": terminal(in.GetState()), "Live": liveOf(in),
		"Controls": s.permittedControls(r, controlsOf(in, !terminal(in.GetState()))),
	})
}

// controls are the buttons and forms of an instance's page besides
// cancel.
type controls struct {
	// Signals are the signals its waiting tasks wait for, a form each.
	Signals []signalForm
	// Pause, Resume, Retry, Cancel: the buttons that apply to its state.
	Pause, Resume, Retry, Cancel bool
	// Tasks are the tasks a retry may start from.
	Tasks []string
}

// signalForm is the form that sends a signal a waiting task waits for.
type signalForm struct {
	Name, Task string
	// Key is the form's idempotency key: the same form posted twice (a
	// double click, a resubmission after reload) delivers the signal once.
	Key string
}

// permittedControls keeps of c what the signed-in role may use.
func (s *server) permittedControls(r *http.Request, c controls) controls {
	if !s.may(r, "SignalInstance") {
		c.Signals = nil
	}
	c.Pause = c.Pause && s.may(r, "PauseInstance")
	c.Resume = c.Resume && s.may(r, "ResumeInstance")
	c.Retry = c.Retry && s.may(r, "RetryInstance")
	c.Cancel = c.Cancel && s.may(r, "CancelInstance")
	return c
}

func controlsOf(in *robonetv1.Instance, live bool) controls {
	c := controls{Cancel: live}
	switch st := in.GetState(); {
	case st == robonetv1.InstanceState_INSTANCE_STATE_FAILED || st == robonetv1.InstanceState_INSTANCE_STATE_CANCELLED:
		c.Retry = true
		for _, t := range in.GetTasks() {
			c.Tasks = append(c.Tasks, t.GetName())
		}
	case terminal(st):
	case st == robonetv1.InstanceState_INSTANCE_STATE_PAUSED || in.GetPaused():
		c.Resume = true
	default:
		c.Pause = true
	}
	if terminal(in.GetState()) {
		return c
	}
	for _, t := range in.GetTasks() {
		if t.GetWaiting() && t.GetWaitSignal() != "" {
			c.Signals = append(c.Signals, signalForm{Name: t.GetWaitSignal(), Task: t.GetName(), Key: "dashboard:" + uuid.NewString()})
		}
	}
	return c
}

// controlsKey names what the page's controls depend on: the live view
// reloads the page when it changes.
func controlsKey(in *robonetv1.Instance) string {
	c := controlsOf(in, !terminal(in.GetState()))
	key := fmt.Sprintf("pause=%t resume=%t retry=%t signals=", c.Pause, c.Resume, c.Retry)
	for _, f := range c.Signals {
		key += f.Task + ":" + f.Name + ","
	}
	return key
}

// dagNodes are the instance's tasks as DAG nodes.
func dagNodes(in *robonetv1.Instance) []dagNode {
	out := make([]dagNode, 0, len(in.GetTasks()))
	for _, t := range in.GetTasks() {
		lt := liveTaskOf(t)
		out = append(out, dagNode{Name: t.GetName(), Needs: t.GetNeeds(), Status: lt.Status, Label: lt.Label, Title: lt.Title})
	}
	return out
}

// live is what the live view of an instance updates.
type live struct {
	State    string              `json:"state"`
	Terminal bool                `json:"terminal"`
	Done     int32               `json:"done"`
	Total    int32               `json:"total"`
	More     bool                `json:"more"` // spreads still to expand: the total grows
	ETA      string              `json:"eta"`
	Error    string              `json:"error,omitempty"`
	Tasks    map[string]liveTask `json:"tasks"`
	// Controls changes when the page's buttons and signal forms would:
	// the page reloads to show them.
	Controls string `json:"controls"`
}

type liveTask struct {
	Status string `json:"status"`
	Label  string `json:"label"`
	Title  string `json:"title"`
}

func liveOf(in *robonetv1.Instance) live {
	l := live{State: stateName(in.GetState()), Terminal: terminal(in.GetState()), Done: in.GetProgress().GetDone(),
		Total: in.GetProgress().GetTotal(), Error: in.GetError(), Tasks: map[string]liveTask{}}
	l.ETA = eta(in)
	l.More = in.GetProgress().GetUnexpanded() > 0
	l.Controls = controlsKey(in)
	for _, t := range in.GetTasks() {
		l.Tasks[t.GetName()] = liveTaskOf(t)
	}
	return l
}

// eta says the time left of an instance that runs: its ETA from the API
// (built from its workers' heartbeats, docs/workflows.md "Progress and
// ETA"), or that none is known. "" once it finished.
func eta(in *robonetv1.Instance) string {
	switch d := in.GetEta(); {
	case terminal(in.GetState()):
		return ""
	case d == nil:
		return "time left unknown"
	case d.AsDuration() < time.Second:
		return "less than a second left"
	default:
		return "about " + d.AsDuration().Round(time.Second).String() + " left"
	}
}

// liveTaskOf is a task's box: its status, a second line, and what hovering
// shows (capability and action, attempts, progress, the last error).
func liveTaskOf(t *robonetv1.TaskState) liveTask {
	lt := liveTask{Status: taskStatusName(t.GetStatus())}
	switch {
	case t.GetWaiting() && t.GetWaitSignal() != "":
		lt.Label = "signal " + t.GetWaitSignal()
	case t.GetWaiting() && t.GetWaitUntil() != nil:
		lt.Label = "until " + t.GetWaitUntil().AsTime().UTC().Format("15:04:05Z")
	case t.GetSpread():
		lt.Label = fmt.Sprintf("%d/%d done", t.GetDone(), t.GetWidth())
		if t.GetFailed() > 0 {
			lt.Label += fmt.Sprintf(", %d failed", t.GetFailed())
		}
	case t.GetLoop() && t.GetIterations() > 0:
		if n := t.GetIterations(); lt.Status == "running" || lt.Status == "retrying" {
			lt.Label = fmt.Sprintf("iteration #%d", n-1)
		} else {
			lt.Label = fmt.Sprintf("%d iterations", n)
		}
		if t.GetAttempt() > 1 {
			lt.Label += fmt.Sprintf(", attempt %d", t.GetAttempt())
		}
	case t.GetAttempt() > 1:
		lt.Label = fmt.Sprintf("attempt %d of %d", t.GetAttempt(), t.GetMaxAttempts())
	case t.GetProgress() != nil && t.GetProgress().GetStepsTotal() > 0:
		p := t.GetProgress()
		lt.Label = fmt.Sprintf("%d/%d steps", p.GetStepsDone(), p.GetStepsTotal())
	default:
		lt.Label = lt.Status
	}
	title := []string{t.GetName() + ": " + taskBody(t) + " — " + lt.Status}
	if t.GetLoop() && t.GetIterations() > 0 {
		title = append(title, fmt.Sprintf("loop: %d iterations (%s#0 … %s#%d)", t.GetIterations(), t.GetName(), t.GetName(), t.GetIterations()-1))
	}
	if n := t.GetAttempt(); n > 0 {
		title = append(title, fmt.Sprintf("attempt %d of %d", n, max(t.GetMaxAttempts(), 1)))
	}
	failedAttempts := 0
	for _, a := range t.GetAttempts() {
		if a.GetError() != "" {
			failedAttempts++
		}
	}
	if failedAttempts > 0 {
		title = append(title, fmt.Sprintf("%d failed attempt(s)", failedAttempts))
	}
	if p := t.GetProgress(); p != nil {
		if p.GetMessage() != "" {
			title = append(title, "progress: "+p.GetMessage())
		}
		if eta := p.GetEta(); eta != nil && eta.AsDuration() > 0 {
			title = append(title, "ETA "+eta.AsDuration().Round(time.Second).String())
		}
	}
	if t.GetWaiting() {
		title = append(title, waitLabel(t))
	}
	if t.GetError() != "" {
		title = append(title, "error: "+clip(t.GetError(), 400))
	}
	lt.Title = strings.Join(title, "\n")
	return lt
}

// waitLabel says what a waiting task waits for: "waiting for signal
// approve", "waiting until 10:00:00Z".
func waitLabel(t *robonetv1.TaskState) string {
	switch until := t.GetWaitUntil(); {
	case t.GetWaitSignal() != "" && until != nil:
		return "waiting for signal " + t.GetWaitSignal() + ", times out at " + until.AsTime().UTC().Format("2006-01-02 15:04:05Z")
	case t.GetWaitSignal() != "":
		return "waiting for signal " + t.GetWaitSignal()
	case until != nil:
		return "waiting until " + until.AsTime().UTC().Format("2006-01-02 15:04:05Z")
	}
	return "waiting"
}

// instanceLive streams the live view of an instance as server-sent
// events: one "live" event whenever it changes, until it is terminal or the
// browser goes away.
func (s *server) instanceLive(w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming is not supported here", http.StatusInternalServerError)
		return
	}
	select {
	case s.live <- struct{}{}:
		defer func() { <-s.live }()
	default:
		http.Error(w, fmt.Sprintf("%d live views are open on this node, the most it serves; reload the page later", s.cfg.MaxLive), http.StatusServiceUnavailable)
		return
	}
	id := r.PathValue("id")
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	rc := http.NewResponseController(w)
	tick := time.NewTicker(s.cfg.LivePoll)
	defer tick.Stop()
	var last []byte
	for {
		c, cancel := ctx(r)
		resp, err := s.cfg.API.GetInstance(c, &robonetv1.GetInstanceRequest{InstanceId: id})
		cancel()
		if r.Context().Err() != nil {
			return
		}
		// Each write may take at most a few seconds: a browser that stops
		// reading does not hold the goroutine.
		_ = rc.SetWriteDeadline(time.Now().Add(10 * time.Second))
		if err != nil {
			fmt.Fprintf(w, "event: problem\ndata: %s\n\n", jsonString(errMessage(err)))
			flusher.Flush()
		} else {
			l := liveOf(resp.GetInstance())
			data, _ := json.Marshal(l)
			if !slices.Equal(data, last) {
				if _, err := fmt.Fprintf(w, "event: live\ndata: %s\n\n", data); err != nil {
					return
				}
				flusher.Flush()
				last = data
			}
			if l.Terminal {
				return
			}
		}
		select {
		case <-r.Context().Done():
			return
		case <-s.cfg.Stopping.Done():
			return // the node is stopping: the browser reconnects elsewhere or later
		case <-tick.C:
		}
	}
}

func (s *server) cancel(w http.ResponseWriter, r *http.Request) {
	s.act(w, r, func(c context.Context, id string) error {
		_, err := s.cfg.API.CancelInstance(c, &robonetv1.CancelInstanceRequest{InstanceId: id})
		return err
	})
}

// act runs a button's call on the instance of the path and shows the
// instance again, or the call's error.
func (s *server) act(w http.ResponseWriter, r *http.Request, call func(c context.Context, id string) error) {
	c, cancel := ctx(r)
	defer cancel()
	id := r.PathValue("id")
	if err := call(c, id); err != nil {
		s.fail(w, r, err)
		return
	}
	http.Redirect(w, r, Prefix+"instances/"+url.PathEscape(id), http.StatusSeeOther)
}

// maxFormBytes bounds a posted form: a signal's payload and its name
// (the API refuses a payload over its own, smaller, limit).
const maxFormBytes = 1 << 20

// signal sends the signal of a form: name, payload (JSON; empty is
// null) and the form's idempotency key.
func (s *server) signal(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		s.render(w, r, "error", http.StatusBadRequest, map[string]any{"Error": "the form could not be read: " + err.Error(), "Code": http.StatusBadRequest})
		return
	}
	s.act(w, r, func(c context.Context, id string) error {
		_, err := s.cfg.API.SignalInstance(c, &robonetv1.SignalInstanceRequest{InstanceId: id, Name: r.PostFormValue("name"),
			PayloadJson: strings.TrimSpace(r.PostFormValue("payload")), IdempotencyKey: r.PostFormValue("key")})
		return err
	})
}

func (s *server) pause(w http.ResponseWriter, r *http.Request) {
	s.act(w, r, func(c context.Context, id string) error {
		_, err := s.cfg.API.PauseInstance(c, &robonetv1.PauseInstanceRequest{InstanceId: id})
		return err
	})
}

func (s *server) resume(w http.ResponseWriter, r *http.Request) {
	s.act(w, r, func(c context.Context, id string) error {
		_, err := s.cfg.API.ResumeInstance(c, &robonetv1.ResumeInstanceRequest{InstanceId: id})
		return err
	})
}

// retry runs a failed or cancelled instance again, from the form's task
// (empty: from the tasks that did not complete).
func (s *server) retry(w http.ResponseWriter, r *http.Request) {
	s.act(w, r, func(c context.Context, id string) error {
		_, err := s.cfg.API.RetryInstance(c, &robonetv1.RetryInstanceRequest{InstanceId: id, FromTask: r.PostFormValue("from")})
		return err
	})
}

// workflowsPage: registered versions and schedules.
func (s *server) workflowsPage(w http.ResponseWriter, r *http.Request) {
	c, cancel := ctx(r)
	defer cancel()
	wfs, err := s.cfg.API.ListWorkflows(c, &robonetv1.ListWorkflowsRequest{Limit: 1000})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	data := map[string]any{"Workflows": wfs.GetWorkflows()}
	if sc, err := s.cfg.API.ListSchedules(c, &robonetv1.ListSchedulesRequest{}); err == nil {
		data["Schedules"] = sc.GetSchedules()
	} else {
		data["SchedulesError"] = errMessage(err)
	}
	s.render(w, r, "workflows", http.StatusOK, data)
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
