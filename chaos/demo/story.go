package demo

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/robonet/robonet/internal/client"
	"github.com/robonet/robonet/mesh"
	"github.com/robonet/robonet/node"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
	"github.com/robonet/robonet/wag"
)

// storyStage is how far the demo's story has come.
type storyStage int

const (
	stageKillWorker  storyStage = iota // waiting for the workers to run tasks
	stageKillWaggler                   // a worker killed; waiting for its runs to move
	stageSuccessor                     // the Waggler's node killed; waiting for its successor
	stageDone                          // the successor is known
)

// story follows the demo's instance and tells its story: it prints the
// events as they come (onEvent, from the watch) and kills nodes when the
// time comes (step, from its own ticker).
type story struct {
	out     io.Writer
	server  *node.Node
	workers map[string]*node.Node
	began   time.Time
	halts   sync.WaitGroup // nodes being halted

	mu       sync.Mutex
	stage    storyStage
	waggler  string // node of the Waggler of capability
	epoch    uint64
	execs    map[string]*execution
	order    []string             // execution ids, as first seen
	spreads  map[string]bool      // tasks seen spread
	lastBeat map[string]time.Time // node → when its latest heartbeat arrived
	firstRun time.Time            // first heartbeat of a spread's instance
	kills    []*nodeKill
}

// execution is one execution (a task, or one instance of a spread) as its
// heartbeats and events show it.
type execution struct {
	id        string
	worker    string // of its latest heartbeat
	node      string
	seq       uint64 // of its latest heartbeat
	attempt   uint32
	running   bool
	nodes     []string // every node that ran it, in order
	adopt     bool     // ran on a live worker when its Waggler's node died
	seqAtKill uint64   // its heartbeat number then
	adopted   bool     // its heartbeats went on to the successor
	waiting   string   // the latest notice of an attempt waiting for a worker
}

// nodeKill is a node the demo killed.
type nodeKill struct {
	node    string
	at      time.Time
	last    time.Time // when its latest heartbeat arrived, before the kill
	running []string  // what it ran when killed
	missed  int       // heartbeats missed, as told
	failed  bool      // the mesh declared it failed, as told
	worker  bool      // a worker's kill (not the Waggler's node)
}

func newStory(out io.Writer, server *node.Node, workers map[string]*node.Node, waggler string, epoch uint64) *story {
	return &story{
		out: out, server: server, workers: workers, waggler: waggler, epoch: epoch,
		execs: map[string]*execution{}, spreads: map[string]bool{}, lastBeat: map[string]time.Time{},
	}
}

// run follows instance id to its end, telling the story, and returns its
// final view.
func (s *story) run(ctx context.Context, wf robonetv1.WorkflowServiceClient, id string) (*robonetv1.Instance, error) {
	s.began = time.Now()
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(tick)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				s.step(time.Now())
			}
		}
	}()
	_, err := client.Follow(ctx, wf, id, client.FollowOptions{OnEvent: s.onEvent})
	close(done)
	wg.Wait()
	s.halts.Wait()
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	resp, err := wf.GetInstance(cctx, &robonetv1.GetInstanceRequest{InstanceId: id})
	if err != nil {
		return nil, fmt.Errorf("reading instance %s after it finished: %w", id, err)
	}
	return resp.GetInstance(), nil
}

// say prints one line of the story, stamped with the time since the
// submission; s.mu held.
func (s *story) say(format string, args ...any) {
	fmt.Fprintf(s.out, "%5.1fs  %s\n", time.Since(s.began).Seconds(), fmt.Sprintf(format, args...))
}

// onEvent tells an event of the instance.
func (s *story) onEvent(ev *robonetv1.Event) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	task, id := ev.GetTask(), ev.GetTask()
	if ev.GetIndex() >= 0 {
		id = fmt.Sprintf("%s[%d]", task, ev.GetIndex())
		s.spreads[task] = true
	}
	e := s.execs[id]
	switch ev.GetKind() {
	case robonetv1.EventKind_EVENT_KIND_TASK_PROGRESS:
		s.heartbeat(ev.GetProgress(), now)
	case robonetv1.EventKind_EVENT_KIND_TASK_COMPLETED:
		switch {
		case e != nil:
			e.running, e.attempt = false, ev.GetAttempt()
			s.say("%s done on %s%s", id, e.node, e.history())
		case ev.GetIndex() < 0 && s.spreads[task]:
			s.say("%s: all %d done", task, s.width(task))
		default:
			s.say("%s done (before a heartbeat said where)", id)
		}
	case robonetv1.EventKind_EVENT_KIND_TASK_FAILED:
		where := ""
		if e != nil {
			e.running, where = false, " on "+e.node
		}
		s.say("%s attempt %d failed%s: %s", id, ev.GetAttempt(), where, ev.GetError())
	case robonetv1.EventKind_EVENT_KIND_TASK_RETRYING:
		s.say("%s: another attempt is scheduled", id)
	case robonetv1.EventKind_EVENT_KIND_STATE:
		s.say("instance %s", client.StateName(ev.GetState()))
	default:
	}
}

// heartbeat tells where an execution runs when that is news: its first
// heartbeat, one from another worker (it moved), or the first one its
// adopted run sends the successor Waggler. A heartbeat with no worker is a
// notice of an attempt that waits for one. s.mu held.
func (s *story) heartbeat(p *robonetv1.TaskProgress, now time.Time) {
	id, worker := p.GetExecutionId(), p.GetWorkerId()
	e := s.execs[id]
	if e == nil {
		e = &execution{id: id}
		s.execs[id] = e
		s.order = append(s.order, id)
	}
	if worker == "" {
		if msg := p.GetMessage(); msg != e.waiting {
			e.waiting = msg
			s.say("%s: %s", id, msg)
		}
		return
	}
	e.waiting = ""
	at, _, slot := wag.ParseWorkerID(worker)
	if slot == "" {
		slot = "?" // not a worker's id
	}
	s.lastBeat[at] = now
	switch {
	case !e.running || e.worker != worker:
		from := e.node
		e.running, e.adopt = true, false
		e.nodes = append(e.nodes, at)
		switch {
		case from == "":
			if s.firstRun.IsZero() && strings.Contains(id, "[") {
				s.firstRun = now
			}
			s.say("%s runs on %s (slot %s)", id, at, slot)
		case p.GetAttempt() != e.attempt:
			s.say("%s attempt %d runs on %s (slot %s)", id, p.GetAttempt(), at, slot)
		case s.killed(from) != nil:
			s.say("%s moved from %s to %s, still attempt %d (a node's death spends no retry)", id, from, at, p.GetAttempt())
		default:
			s.say("%s runs again, on %s (slot %s): the same attempt %d, dispatched again", id, at, slot, p.GetAttempt())
		}
	case e.adopt && s.stage == stageDone && p.GetSeq() > e.seq:
		e.adopt, e.adopted = false, true
		s.say("%s heartbeats again from %s, #%d after #%d before the kill: the same run, adopted by the successor, not run again",
			id, at, p.GetSeq(), e.seqAtKill)
	}
	e.worker, e.node, e.seq, e.attempt = worker, at, p.GetSeq(), p.GetAttempt()
}

// step watches the killed nodes and moves the story on: it kills a worker
// once the workers run tasks, the Waggler's node once that worker's runs
// moved, and names the successor Waggler once the mesh shows it.
func (s *story) step(now time.Time) {
	members := s.server.Members()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range s.kills {
		s.watchKilled(k, members, now)
	}
	switch s.stage {
	case stageKillWorker:
		if victim := s.pickWorker(now); victim != "" {
			s.kill(victim, "a worker node (not the Waggler's)", true, now)
			s.stage = stageKillWaggler
		}
	case stageKillWaggler:
		survivor := s.survivor()
		if len(s.stranded(s.kills[0])) > 0 || s.running()[survivor] == 0 {
			return
		}
		for _, e := range s.execs {
			if e.running && e.node == survivor {
				e.adopt, e.seqAtKill = true, e.seq
			}
		}
		s.kill(s.waggler, fmt.Sprintf("the node of the Waggler of %s (epoch %d)", capability, s.epoch), false, now)
		s.stage = stageSuccessor
	case stageSuccessor:
		for _, m := range members {
			if m.Status == mesh.StatusAlive && m.Wagglers[capability] > s.epoch && s.killed(m.Name) == nil {
				s.say(">>> successor Waggler of %s: %s, epoch %d (was %s, epoch %d), %s after the kill", capability,
					m.Name, m.Wagglers[capability], s.waggler, s.epoch, since(s.kills[1].at, now))
				s.waggler, s.epoch = m.Name, m.Wagglers[capability]
				s.stage = stageDone
				break
			}
		}
	default:
	}
}

// pickWorker returns the worker node to kill first, once the spread's
// instances run on every worker (or fill every slot, or have run for a
// second): the one other than the Waggler's that runs the most; "" to
// wait. s.mu held.
func (s *story) pickWorker(now time.Time) string {
	running := s.running()
	total := 0
	for _, n := range running {
		total += n
	}
	ready := len(running) == len(workerNames) || total >= len(workerNames)*slots ||
		(!s.firstRun.IsZero() && now.Sub(s.firstRun) > time.Second)
	if !ready {
		return ""
	}
	victim := ""
	for _, name := range workerNames {
		if name != s.waggler && running[name] > running[victim] {
			victim = name
		}
	}
	return victim
}

// running counts the spread instances running per node. s.mu held.
func (s *story) running() map[string]int {
	out := map[string]int{}
	for _, e := range s.execs {
		if e.running && strings.Contains(e.id, "[") {
			out[e.node]++
		}
	}
	return out
}

// survivor is the worker node that is neither killed nor the Waggler's.
// s.mu held.
func (s *story) survivor() string {
	for _, name := range workerNames {
		if name != s.waggler && s.killed(name) == nil {
			return name
		}
	}
	return ""
}

// kill halts node name (in the background: Halt waits for its teardown)
// and says what it ran. s.mu held.
func (s *story) kill(name, what string, worker bool, now time.Time) {
	k := &nodeKill{node: name, at: now, last: s.lastBeat[name], worker: worker}
	for _, id := range s.order {
		if e := s.execs[id]; e.running && e.node == name {
			k.running = append(k.running, id)
		}
	}
	s.kills = append(s.kills, k)
	runs := "nothing"
	if len(k.running) > 0 {
		runs = strings.Join(k.running, ", ")
	}
	s.say(">>> killing %s, %s, mid-task (running %s)", name, what, runs)
	n := s.workers[name]
	s.halts.Add(1)
	go func() {
		defer s.halts.Done()
		n.Halt()
	}()
}

// killed returns the kill of node name, or nil. s.mu held.
func (s *story) killed(name string) *nodeKill {
	for _, k := range s.kills {
		if k.node == name {
			return k
		}
	}
	return nil
}

// stranded lists what k's node ran when killed and has not moved yet.
// s.mu held.
func (s *story) stranded(k *nodeKill) []string {
	var out []string
	for _, id := range k.running {
		if e := s.execs[id]; e.running && e.node == k.node {
			out = append(out, id)
		}
	}
	return out
}

// watchKilled tells the heartbeats a killed node misses while its runs
// have not moved (the Waggler's ladder counts the same way: silence less a
// quarter interval, in whole intervals, up to its limit) and when the mesh
// declares the node failed. s.mu held.
func (s *story) watchKilled(k *nodeKill, members []mesh.Member, now time.Time) {
	for _, m := range members {
		if m.Name == k.node && m.Status == mesh.StatusFailed && !k.failed {
			k.failed = true
			s.say("the mesh declares %s failed (memberlist), %s after the kill", k.node, since(k.at, now))
		}
	}
	stranded := s.stranded(k)
	if len(stranded) == 0 || k.last.IsZero() {
		return
	}
	missed := min(int((now.Sub(k.last)-heartbeatInterval/4)/heartbeatInterval), missedHeartbeats)
	for k.missed < missed {
		k.missed++
		line := fmt.Sprintf("%s: %s missed by %s", k.node, plural(k.missed, "heartbeat"), strings.Join(stranded, ", "))
		if k.missed == missedHeartbeats && k.worker {
			line += ": the Waggler's limit, it reassigns them"
		}
		s.say("%s", line)
	}
}

// width is how many instances of spread task were seen. s.mu held.
func (s *story) width(task string) int {
	n := 0
	for _, id := range s.order {
		if strings.HasPrefix(id, task+"[") {
			n++
		}
	}
	return n
}

// history says where an execution ran before the node it completed on.
func (e *execution) history() string {
	switch {
	case len(e.nodes) > 1:
		return fmt.Sprintf(" (after %s)", strings.Join(e.nodes[:len(e.nodes)-1], ", "))
	case e.adopted:
		return " (adopted by the successor Waggler, run once)"
	default:
		return ""
	}
}

// summary prints where each attempt completed, as the engine recorded it
// (final's task attempts), what moved off a killed node and what the
// successor adopted (from the heartbeats), and whether the kills cost any
// retry.
func (s *story) summary(w io.Writer, final *robonetv1.Instance) {
	s.mu.Lock()
	defer s.mu.Unlock()
	byNode := map[string][]string{}
	var retried []string
	for _, t := range final.GetTasks() {
		for _, a := range t.GetAttempts() {
			id := t.GetName()
			if a.GetIndex() >= 0 {
				id = fmt.Sprintf("%s[%d]", id, a.GetIndex())
			}
			if a.GetAttempt() > 1 {
				retried = append(retried, fmt.Sprintf("%s (attempt %d)", id, a.GetAttempt()))
			}
			if a.GetOk() {
				node := a.GetNode()
				if node == "" {
					node = "?"
				}
				byNode[node] = append(byNode[node], id)
			}
		}
	}
	fmt.Fprintln(w, "where each task completed (the engine's record of its attempts):")
	for _, name := range append(slices.Clone(workerNames), "?") {
		ran := byNode[name]
		if name == "?" && len(ran) == 0 {
			continue
		}
		if name == "?" {
			name = "(unknown)"
		} else if s.killed(name) != nil {
			name += " (killed)"
		}
		list := strings.Join(ran, " ")
		if list == "" {
			list = "-"
		}
		fmt.Fprintf(w, "  %-18s %s\n", name, list)
	}
	var moved, again, adopted []string
	for _, id := range s.order {
		e := s.execs[id]
		switch path := fmt.Sprintf("%s (%s)", id, strings.Join(e.nodes, " → ")); {
		case len(e.nodes) < 2:
		case slices.ContainsFunc(e.nodes[:len(e.nodes)-1], func(n string) bool { return s.killed(n) != nil }):
			moved = append(moved, path)
		default:
			again = append(again, path)
		}
		if e.adopted {
			adopted = append(adopted, id)
		}
	}
	if len(moved) > 0 {
		fmt.Fprintf(w, "moved off a killed node: %s\n", strings.Join(moved, ", "))
	}
	if len(again) > 0 {
		fmt.Fprintf(w, "ran again on a live node (its first run's result was lost): %s\n", strings.Join(again, ", "))
	}
	if len(adopted) > 0 {
		fmt.Fprintf(w, "adopted by the successor Waggler, not run again: %s\n", strings.Join(adopted, ", "))
	}
	switch {
	case len(retried) > 0:
		fmt.Fprintf(w, "needed another attempt: %s\n", strings.Join(retried, ", "))
	case len(s.kills) > 0:
		fmt.Fprintln(w, "every task completed at its first attempt: the kills spent no retry")
	default:
	}
	if s.stage != stageDone {
		fmt.Fprintln(w, "(the workflow finished before the demo had killed a worker and the Waggler's node)")
	}
	fmt.Fprintln(w)
}

// plural is "1 heartbeat", "2 heartbeats".
func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// since is the time from t to now, rounded for a line of the story.
func since(t, now time.Time) string {
	return fmt.Sprintf("%.1f s", now.Sub(t).Seconds())
}
