package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/robonet/robonet/mesh"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
	"github.com/robonet/robonet/wag/tasklog"
)

// taskLogsPoll is how often a follower of a task's log looks again at the
// instance: for an attempt in flight that has not reached a worker yet, or
// for the next attempt of a task that will retry.
const taskLogsPoll = 250 * time.Millisecond

// TaskLogs streams the log of one attempt from the node that ran it: from
// this node's task logs when it ran here, else relayed from that node's
// API (one hop: the relayed call names the node, which answers from its
// own logs only). Which attempt, and which node, come from the instance's
// view (GetInstance, itself forwarded to the leader while it runs). With
// follow and no attempt named, it follows the task through its retries
// until its last attempt ends.
func (r *forwarder) TaskLogs(req *robonetv1.TaskLogsRequest, stream grpc.ServerStreamingServer[robonetv1.TaskLogsResponse]) error {
	ctx := stream.Context()
	id, err := parseInstanceID(req.GetInstanceId())
	if err != nil {
		return err
	}
	ref, err := parseTaskRef(req.GetTask())
	if err != nil {
		return err
	}
	key := tasklog.Key{Instance: id, Execution: req.GetTask(), Attempt: req.GetAttempt()}
	if n := req.GetNode(); n != "" {
		if n != r.self {
			return status.Errorf(codes.FailedPrecondition, "node: this is node %s, not %s", r.self, n)
		}
		if key.Attempt == 0 {
			return badRequest("attempt", "a call relayed to a node names the attempt")
		}
		return r.localLogs(ctx, key, req.GetFollow(), stream)
	}
	for {
		found, err := r.findAttempt(ctx, id, ref, req.GetAttempt(), req.GetFollow())
		if err != nil {
			return err
		}
		key.Attempt = found.attempt
		if found.node == r.self {
			err = r.localLogs(ctx, key, req.GetFollow(), stream)
		} else {
			err = r.relayLogs(ctx, key, found.node, req.GetFollow(), stream)
		}
		if err != nil || !req.GetFollow() || req.GetAttempt() != 0 {
			return err
		}
		// Following the task: on to its next attempt, if it retries.
		next, err := r.nextAttempt(ctx, id, ref, key.Attempt)
		if err != nil || !next {
			return err
		}
	}
}

// taskRef names an execution: a task (index -1), one instance of a spread
// ("name[index]") or one iteration of a loop ("name#index", loop set).
type taskRef struct {
	name  string
	index int32
	loop  bool
}

func (t taskRef) String() string {
	switch {
	case t.index < 0:
		return t.name
	case t.loop:
		return t.name + "#" + strconv.Itoa(int(t.index))
	}
	return t.name + "[" + strconv.Itoa(int(t.index)) + "]"
}

// parseTaskRef reads "name", "name[index]" or "name#iteration".
func parseTaskRef(task string) (taskRef, error) {
	if err := tasklog.ValidateExecution(task); err != nil {
		return taskRef{}, badRequest("task", fmt.Sprintf("%q is not a task: give its name, name[index] for one instance of a spread task, or name#iteration for one iteration of a loop", task))
	}
	if name, iter, loop := strings.Cut(task, "#"); loop {
		i, err := strconv.ParseInt(iter, 10, 32)
		if err != nil {
			return taskRef{}, badRequest("task", fmt.Sprintf("%q: the iteration of a loop is a number from 0", task))
		}
		return taskRef{name: name, index: int32(i), loop: true}, nil
	}
	name, rest, spread := strings.Cut(task, "[")
	if !spread {
		return taskRef{name: name, index: -1}, nil
	}
	i, err := strconv.ParseInt(strings.TrimSuffix(rest, "]"), 10, 32)
	if err != nil {
		return taskRef{}, badRequest("task", fmt.Sprintf("%q: the index of a spread instance is a number from 0", task))
	}
	return taskRef{name: name, index: int32(i)}, nil
}

// foundAttempt is an attempt whose log to read, and the node holding it.
type foundAttempt struct {
	attempt uint32
	node    string
}

// taskOf reads the instance and finds the task in it.
func (r *forwarder) taskOf(ctx context.Context, id uuid.UUID, ref taskRef) (*robonetv1.Instance, *robonetv1.TaskState, error) {
	name, index := ref.name, ref.index
	resp, err := r.GetInstance(ctx, &robonetv1.GetInstanceRequest{InstanceId: id.String()})
	if err != nil {
		return nil, nil, err
	}
	inst := resp.GetInstance()
	i := slices.IndexFunc(inst.GetTasks(), func(t *robonetv1.TaskState) bool { return t.GetName() == name })
	if i < 0 {
		names := make([]string, 0, len(inst.GetTasks()))
		for _, t := range inst.GetTasks() {
			names = append(names, t.GetName())
		}
		return nil, nil, status.Errorf(codes.NotFound, "instance %s has no task %q; its tasks: %s", id, name, strings.Join(names, ", "))
	}
	ts := inst.GetTasks()[i]
	switch {
	case ts.GetSpread() && index < 0:
		return nil, nil, badRequest("task", fmt.Sprintf("task %s is a spread of %d: name one of its instances, e.g. %s[0]", name, ts.GetWidth(), name))
	case ts.GetSpread() && index >= ts.GetWidth():
		return nil, nil, status.Errorf(codes.NotFound, "task %s is a spread of %d: there is no %s[%d]", name, ts.GetWidth(), name, index)
	case ts.GetLoop() && index < 0:
		return nil, nil, badRequest("task", fmt.Sprintf("task %s is a loop (%d iterations so far): name one of its iterations, e.g. %s#%d, the latest",
			name, ts.GetIterations(), name, max(ts.GetIterations()-1, 0)))
	case ts.GetLoop() && !ref.loop:
		return nil, nil, badRequest("task", fmt.Sprintf("task %s is a loop: name an iteration as %s#%d", name, name, index))
	case !ts.GetLoop() && ref.loop:
		return nil, nil, badRequest("task", fmt.Sprintf("task %s is not a loop: %s has no iterations", name, ref))
	}
	return inst, ts, nil
}

// attemptsOf are the attempts of one execution (a plain task, or one
// instance of a spread), oldest first.
func attemptsOf(ts *robonetv1.TaskState, index int32) []*robonetv1.TaskAttempt {
	var out []*robonetv1.TaskAttempt
	for _, a := range ts.GetAttempts() {
		if a.GetIndex() == index {
			out = append(out, a)
		}
	}
	return out
}

// findAttempt finds the attempt (0: the latest) and its node. Following,
// it waits for an attempt that has not reached a worker yet (or for a
// task's first attempt); otherwise that is an error saying so.
func (r *forwarder) findAttempt(ctx context.Context, id uuid.UUID, ref taskRef, attempt uint32, follow bool) (foundAttempt, error) {
	exec, index := ref.String(), ref.index
	for {
		inst, ts, err := r.taskOf(ctx, id, ref)
		if err != nil {
			return foundAttempt{}, err
		}
		attempts := attemptsOf(ts, index)
		var at *robonetv1.TaskAttempt
		switch {
		case attempt == 0 && len(attempts) > 0:
			at = attempts[len(attempts)-1]
		case attempt > 0:
			if i := slices.IndexFunc(attempts, func(a *robonetv1.TaskAttempt) bool { return a.GetAttempt() == attempt }); i >= 0 {
				at = attempts[i]
			}
		}
		finished := instanceFinished(inst.GetState())
		switch {
		case ts.GetWorkflow() != "" && at != nil && at.GetChildInstanceId() != "":
			child := at.GetChildInstanceId()
			return foundAttempt{}, status.Errorf(codes.FailedPrecondition, "task %s runs the child workflow %s, not a program: its attempt %d is the instance %s, whose tasks have the logs (roboctl logs %s)",
				exec, ts.GetWorkflow(), at.GetAttempt(), child, child)
		case ts.GetWorkflow() != "":
			return foundAttempt{}, status.Errorf(codes.FailedPrecondition, "task %s runs the child workflow %s, not a program: the tasks of its child instances have the logs (roboctl get lists them)",
				exec, ts.GetWorkflow())
		case at != nil && at.GetNode() != "":
			return foundAttempt{attempt: at.GetAttempt(), node: at.GetNode()}, nil
		case at != nil && !at.GetRunning():
			return foundAttempt{}, status.Errorf(codes.NotFound, "attempt %d of task %s never reached a worker (%s), so no node has a log of it", at.GetAttempt(), exec, orNone(at.GetError()))
		case at == nil && attempt > 0 && (finished || len(attempts) > 0 && attempts[len(attempts)-1].GetAttempt() > attempt):
			return foundAttempt{}, status.Errorf(codes.NotFound, "task %s has no attempt %d; %s", exec, attempt, describeAttempts(attempts, ts))
		case at == nil && finished:
			return foundAttempt{}, status.Errorf(codes.NotFound, "task %s never ran: the instance ended %s first", exec, stateName(inst.GetState()))
		case !follow && at != nil:
			return foundAttempt{}, status.Errorf(codes.FailedPrecondition, "attempt %d of task %s is waiting for a worker, so it has no log yet; follow it to wait (roboctl logs --follow)", at.GetAttempt(), exec)
		case !follow:
			return foundAttempt{}, status.Errorf(codes.FailedPrecondition, "task %s has not started (%s), so it has no log yet; follow it to wait (roboctl logs --follow)", exec, taskStatusName(ts.GetStatus()))
		}
		if err := sleepCtx(ctx, taskLogsPoll); err != nil {
			return foundAttempt{}, err
		}
	}
}

// nextAttempt waits until the execution has an attempt after last (true),
// or will not have one (false): its task or instance ended, or last
// succeeded.
func (r *forwarder) nextAttempt(ctx context.Context, id uuid.UUID, ref taskRef, last uint32) (bool, error) {
	index := ref.index
	for {
		inst, ts, err := r.taskOf(ctx, id, ref)
		if err != nil {
			return false, err
		}
		attempts := attemptsOf(ts, index)
		if n := len(attempts); n > 0 && attempts[n-1].GetAttempt() > last {
			return true, nil
		}
		if instanceFinished(inst.GetState()) || taskFinished(ts.GetStatus()) || slices.ContainsFunc(attempts, func(a *robonetv1.TaskAttempt) bool {
			return a.GetAttempt() == last && a.GetOk()
		}) || last >= ts.GetMaxAttempts() && ts.GetMaxAttempts() > 0 {
			return false, nil
		}
		if err := sleepCtx(ctx, taskLogsPoll); err != nil {
			return false, err
		}
	}
}

// localLogs streams an attempt's log from this node's task logs.
func (r *forwarder) localLogs(ctx context.Context, key tasklog.Key, follow bool, stream grpc.ServerStreamingServer[robonetv1.TaskLogsResponse]) error {
	if r.logs == nil {
		return status.Errorf(codes.NotFound, "node %s keeps no task logs", r.self)
	}
	// The first message names the attempt and its node.
	sent := false
	first := func() *robonetv1.TaskLogsResponse {
		if sent {
			return &robonetv1.TaskLogsResponse{}
		}
		sent = true
		return &robonetv1.TaskLogsResponse{Task: key.Execution, Attempt: key.Attempt, Node: r.self}
	}
	err := r.logs.Read(ctx, key, tasklog.ReadOptions{Follow: follow}, func(lines []tasklog.Line) error {
		resp := first()
		resp.Lines = make([]*robonetv1.LogLine, len(lines))
		for i, l := range lines {
			resp.Lines[i] = &robonetv1.LogLine{Stream: logStreamToProto(l.Stream), Time: timestamppb.New(l.Time), Text: l.Text}
		}
		return stream.Send(resp)
	})
	if errors.Is(err, tasklog.ErrNotFound) {
		lim := r.logs.Limits()
		return status.Errorf(codes.NotFound, "node %s holds no log of attempt %d of task %s: only exec actions and worker programs that send their lines write logs, and a node keeps them within its limits (%s per attempt, %s in all, for %s; docs/limits.md)",
			r.self, key.Attempt, key.Execution, byteSize(lim.AttemptBytes), byteSize(lim.TotalBytes), lim.Retention)
	}
	if err == nil && !sent { // an empty log
		err = stream.Send(first())
	}
	return err
}

// relayLogs streams an attempt's log from the node that holds it.
func (r *forwarder) relayLogs(ctx context.Context, key tasklog.Key, node string, follow bool, stream grpc.ServerStreamingServer[robonetv1.TaskLogsResponse]) error {
	where := fmt.Sprintf("the log of attempt %d of task %s is on node %s", key.Attempt, key.Execution, node)
	members := r.mesh.Members()
	i := slices.IndexFunc(members, func(m mesh.Member) bool { return m.Name == node })
	switch {
	case i < 0:
		return status.Errorf(codes.Unavailable, "%s, which is not in the mesh now; the log is served again if it rejoins", where)
	case members[i].Status != mesh.StatusAlive && members[i].Status != mesh.StatusSuspect:
		return status.Errorf(codes.Unavailable, "%s, which %s the mesh; the log is served again if it rejoins", where, map[mesh.MemberStatus]string{mesh.StatusLeft: "left", mesh.StatusFailed: "failed out of"}[members[i].Status])
	case members[i].GRPCAddr == "":
		return status.Errorf(codes.Unavailable, "%s, which advertises no API address", where)
	}
	c, err := r.conns.get(node, members[i].GRPCAddr)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	remote, err := c.TaskLogs(r.outgoing(ctx, target{node: node}), &robonetv1.TaskLogsRequest{
		InstanceId: key.Instance.String(), Task: key.Execution, Attempt: key.Attempt, Follow: follow, Node: node,
	})
	if err != nil {
		return relayError(where, err)
	}
	for {
		resp, err := remote.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return relayError(where, err)
		}
		if err := stream.Send(resp); err != nil {
			return err
		}
	}
}

// relayError keeps the holder's answer, saying where it came from when the
// holder could not be reached.
func relayError(where string, err error) error {
	st := status.Convert(err)
	if st.Code() == codes.Unavailable {
		return status.Errorf(codes.Unavailable, "%s, which cannot be reached: %s", where, st.Message())
	}
	return st.Err()
}

func logStreamToProto(s tasklog.Stream) robonetv1.LogStream {
	switch s {
	case tasklog.Stdout:
		return robonetv1.LogStream_LOG_STREAM_STDOUT
	case tasklog.Stderr:
		return robonetv1.LogStream_LOG_STREAM_STDERR
	case tasklog.Note:
		return robonetv1.LogStream_LOG_STREAM_NOTE
	}
	return robonetv1.LogStream_LOG_STREAM_UNSPECIFIED
}

func describeAttempts(attempts []*robonetv1.TaskAttempt, ts *robonetv1.TaskState) string {
	if len(attempts) == 0 {
		return "it has not run yet (" + taskStatusName(ts.GetStatus()) + ")"
	}
	return fmt.Sprintf("its attempts are 1 to %d", attempts[len(attempts)-1].GetAttempt())
}

func taskFinished(s robonetv1.TaskStatus) bool {
	switch s {
	case robonetv1.TaskStatus_TASK_STATUS_COMPLETED, robonetv1.TaskStatus_TASK_STATUS_FAILED,
		robonetv1.TaskStatus_TASK_STATUS_SKIPPED, robonetv1.TaskStatus_TASK_STATUS_CANCELLED:
		return true
	}
	return false
}

func taskStatusName(s robonetv1.TaskStatus) string {
	return strings.TrimPrefix(s.String(), "TASK_STATUS_")
}

func stateName(s robonetv1.InstanceState) string {
	return strings.TrimPrefix(s.String(), "INSTANCE_STATE_")
}

func orNone(s string) string {
	if s == "" {
		return "no error recorded"
	}
	return s
}

// byteSize renders a limit in KiB, MiB or GiB.
func byteSize(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return strconv.FormatInt(n>>30, 10) + " GiB"
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + " MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.FormatInt(n>>10, 10) + " KiB"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
