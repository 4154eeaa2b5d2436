// Package remote carries the Waggler layer between nodes over the
// WagService gRPC streams (proto/robonet/v1/wag.proto): a leader's session
// with another node's Waggler host (Lead), and a pool working for the
// Waggler of its capability on another node (Work). Both ends implement
// the same interfaces as their in-process counterparts — wag.Link for the
// leader's Router, wag.Target for a pool, wag.Worker for a Waggler — so
// neither the Router, the Waggler nor the pool knows whether a peer is in
// the same process. The server side of every stream — Lead, Work, and the
// WorkerService's Serve of worker programs (external.go) — opens the same
// way (handshake.go): the first message's opening admitted, a sender, the
// protocol's set-up, a welcome.
package remote

import (
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/robonet/robonet/engine/port"
	"github.com/robonet/robonet/engine/value"
	"github.com/robonet/robonet/internal/clock"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
	"github.com/robonet/robonet/sentinel"
	"github.com/robonet/robonet/wag"
)

// readable decodes what of ps from can read, passing over the rest (a
// peer's messages were checked against the limits: an item that passed
// and still cannot be read is dropped, not fatal).
func readable[P, T any](ps []P, from func(P) (T, error)) []T {
	out := make([]T, 0, len(ps))
	for _, p := range ps {
		if v, err := from(p); err == nil {
			out = append(out, v)
		}
	}
	return out
}

func keyToProto(k port.AttemptKey) *robonetv1.AttemptKey {
	return &robonetv1.AttemptKey{InstanceId: k.InstanceID.String(), ExecutionId: k.ExecutionID, Attempt: k.Attempt}
}

func keyFromProto(k *robonetv1.AttemptKey) (port.AttemptKey, error) {
	id, err := uuid.Parse(k.GetInstanceId())
	if err != nil {
		return port.AttemptKey{}, fmt.Errorf("attempt key: instance id %q: %w", k.GetInstanceId(), err)
	}
	return port.AttemptKey{InstanceID: id, ExecutionID: k.GetExecutionId(), Attempt: k.GetAttempt()}, nil
}

func dispatchToProto(d port.TaskDispatch) (*robonetv1.Dispatch, error) {
	in, err := value.Encode(d.Input)
	if err != nil {
		return nil, fmt.Errorf("encoding the input of %s: %w", d.IdempotencyKey(), err)
	}
	return &robonetv1.Dispatch{
		Key: keyToProto(d.AttemptKey), Term: d.Term, Workflow: d.Workflow, Task: d.Task, Index: d.Index,
		Capability: d.Capability, Action: d.Action, InputJson: in, TimeoutNs: int64(d.Timeout), Verify: uint32(min(max(d.Verify, 0), 3)),
		Group: d.Group, Avoid: d.Avoid, Node: d.Node,
	}, nil
}

func dispatchFromProto(p *robonetv1.Dispatch) (port.TaskDispatch, error) {
	k, err := keyFromProto(p.GetKey())
	if err != nil {
		return port.TaskDispatch{}, err
	}
	var in any
	if len(p.GetInputJson()) > 0 {
		if in, err = value.Decode(p.GetInputJson()); err != nil {
			return port.TaskDispatch{}, fmt.Errorf("the input of %s: %w", k.IdempotencyKey(), err)
		}
	}
	return port.TaskDispatch{
		AttemptKey: k, Term: p.GetTerm(), Workflow: p.GetWorkflow(), Task: p.GetTask(), Index: p.GetIndex(),
		Capability: p.GetCapability(), Action: p.GetAction(), Input: in, Timeout: time.Duration(p.GetTimeoutNs()),
		Verify: int(p.GetVerify()), Group: p.GetGroup(), Avoid: p.GetAvoid(), Node: p.GetNode(),
	}, nil
}

func assignmentToProto(a wag.Assignment) (*robonetv1.Assignment, error) {
	d, err := dispatchToProto(a.TaskDispatch)
	if err != nil {
		return nil, err
	}
	return &robonetv1.Assignment{Dispatch: d, Generation: a.Generation}, nil
}

func assignmentFromProto(p *robonetv1.Assignment) (wag.Assignment, error) {
	d, err := dispatchFromProto(p.GetDispatch())
	if err != nil {
		return wag.Assignment{}, err
	}
	return wag.Assignment{TaskDispatch: d, Generation: p.GetGeneration()}, nil
}

func resultToProto(r wag.SeqResult) (*robonetv1.WagResult, error) {
	p := &robonetv1.WagResult{
		Seq: r.Seq, Key: keyToProto(r.AttemptKey), Ok: r.OK, Error: r.Error, WorkerId: r.WorkerID,
		StartedUnixNs: clock.UnixNanos(r.StartedAt), FinishedUnixNs: clock.UnixNanos(r.FinishedAt),
	}
	if r.OK && r.OutputJSON != nil {
		p.OutputJson = r.OutputJSON // encoded by this node's pool already
		return p, nil
	}
	out, err := outputToJSON(r.OK, r.Output, r.AttemptKey)
	p.OutputJson = out
	return p, err
}

func resultFromProto(p *robonetv1.WagResult) (wag.SeqResult, error) {
	k, err := keyFromProto(p.GetKey())
	if err != nil {
		return wag.SeqResult{}, err
	}
	r := port.TaskResult{AttemptKey: k, OK: p.GetOk(), Error: p.GetError(), WorkerID: p.GetWorkerId(),
		StartedAt: clock.FromUnixNanos(p.GetStartedUnixNs()), FinishedAt: clock.FromUnixNanos(p.GetFinishedUnixNs())}
	r.OK, r.Output, r.Error = outputFromJSON(r.OK, p.GetOutputJson(), r.Error, "from the waggler")
	return wag.SeqResult{Seq: p.GetSeq(), TaskResult: r}, nil
}

func progressToProto(p port.TaskProgress) *robonetv1.WagProgress {
	return &robonetv1.WagProgress{
		Key: keyToProto(p.AttemptKey), WorkerId: p.WorkerID, Seq: p.Seq, StepsDone: p.StepsDone, StepsTotal: p.StepsTotal,
		EtaNs: int64(p.ETA), CpuPercent: p.CPUPercent, MemBytes: p.MemBytes, Message: p.Message, AtUnixNs: clock.UnixNanos(p.At),
	}
}

func progressFromProto(p *robonetv1.WagProgress) (port.TaskProgress, error) {
	k, err := keyFromProto(p.GetKey())
	if err != nil {
		return port.TaskProgress{}, err
	}
	return port.TaskProgress{
		AttemptKey: k, WorkerID: p.GetWorkerId(), Seq: p.GetSeq(), StepsDone: p.GetStepsDone(), StepsTotal: p.GetStepsTotal(),
		ETA: time.Duration(p.GetEtaNs()), CPUPercent: p.GetCpuPercent(), MemBytes: p.GetMemBytes(), Message: p.GetMessage(),
		At: clock.FromUnixNanos(p.GetAtUnixNs()),
	}, nil
}

func startedToProto(s wag.Started) *robonetv1.AttemptStarted {
	return &robonetv1.AttemptStarted{Key: keyToProto(s.Key), Capability: s.Capability, Epoch: s.Epoch, WorkerId: s.WorkerID,
		Generation: s.Generation, AtUnixNs: clock.UnixNanos(s.At)}
}

func startedFromProto(p *robonetv1.AttemptStarted) (wag.Started, error) {
	k, err := keyFromProto(p.GetKey())
	if err != nil {
		return wag.Started{}, err
	}
	return wag.Started{Key: k, Capability: p.GetCapability(), Epoch: p.GetEpoch(), WorkerID: p.GetWorkerId(),
		Generation: p.GetGeneration(), At: clock.FromUnixNanos(p.GetAtUnixNs())}, nil
}

func heartbeatToProto(hb wag.Heartbeat) *robonetv1.Heartbeat {
	return &robonetv1.Heartbeat{
		Key: keyToProto(hb.Key), Generation: hb.Generation, WorkerId: hb.WorkerID, Seq: hb.Seq,
		StepsDone: hb.Progress.StepsDone, StepsTotal: hb.Progress.StepsTotal, EtaNs: int64(hb.Progress.ETA),
		Message: hb.Progress.Message, CpuPercent: hb.CPUPercent, MemBytes: hb.MemBytes, SentUnixNs: clock.UnixNanos(hb.SentAt),
	}
}

func heartbeatFromProto(p *robonetv1.Heartbeat) (wag.Heartbeat, error) {
	k, err := keyFromProto(p.GetKey())
	if err != nil {
		return wag.Heartbeat{}, err
	}
	return wag.Heartbeat{
		Key: k, Generation: p.GetGeneration(), WorkerID: p.GetWorkerId(), Seq: p.GetSeq(),
		Progress: wag.Progress{StepsDone: p.GetStepsDone(), StepsTotal: p.GetStepsTotal(), ETA: time.Duration(p.GetEtaNs()),
			Message: p.GetMessage()},
		CPUPercent: p.GetCpuPercent(), MemBytes: p.GetMemBytes(), SentAt: clock.FromUnixNanos(p.GetSentUnixNs()),
	}, nil
}

func reportToProto(seq uint64, r wag.Report) (*robonetv1.Report, error) {
	p := &robonetv1.Report{
		Seq: seq, Key: keyToProto(r.Key), Generation: r.Generation, WorkerId: r.WorkerID, Ok: r.OK, Error: r.Error,
		StartedUnixNs: clock.UnixNanos(r.StartedAt), FinishedUnixNs: clock.UnixNanos(r.FinishedAt), Cancelled: r.Cancelled,
	}
	out, err := outputToJSON(r.OK, r.Output, r.Key)
	p.OutputJson = out
	return p, err
}

func reportFromProto(p *robonetv1.Report) (wag.Report, error) {
	k, err := keyFromProto(p.GetKey())
	if err != nil {
		return wag.Report{}, err
	}
	r := wag.Report{Key: k, Generation: p.GetGeneration(), WorkerID: p.GetWorkerId(), OK: p.GetOk(), Error: p.GetError(),
		StartedAt: clock.FromUnixNanos(p.GetStartedUnixNs()), FinishedAt: clock.FromUnixNanos(p.GetFinishedUnixNs()), Cancelled: p.GetCancelled()}
	r.OK, r.Output, r.Error = outputFromJSON(r.OK, p.GetOutputJson(), r.Error, "to the waggler")
	return r, nil
}

// outputToJSON encodes the output of a successful attempt (nil for a
// failed one).
func outputToJSON(ok bool, output any, key port.AttemptKey) ([]byte, error) {
	if !ok {
		return nil, nil
	}
	out, err := value.Encode(output)
	if err != nil {
		return nil, fmt.Errorf("encoding the output of %s: %w", key.IdempotencyKey(), err)
	}
	return out, nil
}

// outputFromJSON decodes the output of a successful attempt; one that
// does not decode fails the attempt, saying on which trip it broke.
func outputFromJSON(ok bool, data []byte, errMsg, trip string) (bool, any, string) {
	if !ok {
		return false, nil, errMsg
	}
	v, err := value.Decode(data)
	if err != nil {
		return false, nil, "the output did not survive the trip " + trip + ": " + err.Error()
	}
	return true, v, errMsg
}

// Errors of the Waggler layer across the wire: the kind travels, so that
// errors.Is works on the other side.
func errToProto(err error) *robonetv1.WagError {
	if err == nil {
		return nil
	}
	kind := robonetv1.ErrorKind_ERROR_KIND_UNSPECIFIED
	switch {
	case errors.Is(err, port.ErrStaleTerm):
		kind = robonetv1.ErrorKind_ERROR_KIND_STALE_TERM
	case errors.Is(err, wag.ErrNotWaggler):
		kind = robonetv1.ErrorKind_ERROR_KIND_NOT_WAGGLER
	case errors.Is(err, wag.ErrBusy):
		kind = robonetv1.ErrorKind_ERROR_KIND_BUSY
	case errors.Is(err, wag.ErrNotRunning):
		kind = robonetv1.ErrorKind_ERROR_KIND_NOT_RUNNING
	}
	return &robonetv1.WagError{Kind: kind, Message: err.Error()}
}

// remoteError is an error that came over the wire.
type remoteError struct {
	kind robonetv1.ErrorKind
	msg  string
}

func (e *remoteError) Error() string { return e.msg }

func (e *remoteError) Is(target error) bool {
	switch e.kind {
	case robonetv1.ErrorKind_ERROR_KIND_STALE_TERM:
		return target == port.ErrStaleTerm
	case robonetv1.ErrorKind_ERROR_KIND_NOT_WAGGLER:
		return target == wag.ErrNotWaggler
	case robonetv1.ErrorKind_ERROR_KIND_BUSY:
		return target == wag.ErrBusy
	case robonetv1.ErrorKind_ERROR_KIND_NOT_RUNNING:
		return target == wag.ErrNotRunning
	}
	return false
}

func errFromProto(p *robonetv1.WagError) error {
	if p == nil {
		return nil
	}
	return &remoteError{kind: p.GetKind(), msg: p.GetMessage()}
}

// observationKinds maps the Sentinel's kinds to the wire's and back.
var observationKinds = map[sentinel.Kind]robonetv1.ObservationKind{
	sentinel.Heartbeat:  robonetv1.ObservationKind_OBSERVATION_KIND_HEARTBEAT,
	sentinel.Accepted:   robonetv1.ObservationKind_OBSERVATION_KIND_ACCEPTED,
	sentinel.Completed:  robonetv1.ObservationKind_OBSERVATION_KIND_COMPLETED,
	sentinel.Lost:       robonetv1.ObservationKind_OBSERVATION_KIND_LOST,
	sentinel.Failed:     robonetv1.ObservationKind_OBSERVATION_KIND_FAILED,
	sentinel.Replay:     robonetv1.ObservationKind_OBSERVATION_KIND_REPLAY,
	sentinel.ChainBreak: robonetv1.ObservationKind_OBSERVATION_KIND_CHAIN_BREAK,
	sentinel.CPU:        robonetv1.ObservationKind_OBSERVATION_KIND_CPU,
	sentinel.Mem:        robonetv1.ObservationKind_OBSERVATION_KIND_MEM,
	sentinel.Violation:  robonetv1.ObservationKind_OBSERVATION_KIND_VIOLATION,
	sentinel.Misbehaved: robonetv1.ObservationKind_OBSERVATION_KIND_MISBEHAVED,
}

// misbehaviourKinds maps a worker program's misbehaviours to the wire's.
var misbehaviourKinds = map[wag.Misbehaviour]robonetv1.MisbehaviourKind{
	wag.Unsolicited: robonetv1.MisbehaviourKind_MISBEHAVIOUR_KIND_UNSOLICITED,
	wag.TooFast:     robonetv1.MisbehaviourKind_MISBEHAVIOUR_KIND_TOO_FAST,
}

func misbehaviourFromProto(k robonetv1.MisbehaviourKind) (wag.Misbehaviour, bool) {
	for m, w := range misbehaviourKinds {
		if w == k {
			return m, true
		}
	}
	return 0, false
}

// maxObservationCount bounds the count of one observation a host sends:
// more than a quarter second's worth of anything a node can do.
const maxObservationCount = 100_000

func observationToProto(o sentinel.Observation) *robonetv1.Observation {
	return &robonetv1.Observation{Node: o.Node, Kind: observationKinds[o.Kind], Capability: o.Capability, Value: o.Value,
		Count: uint32(min(max(o.Count, 1), maxObservationCount)), AtUnixNs: clock.UnixNanos(o.At)}
}

// observationsFromProto reads observations, each count at most
// maxObservationCount; kinds a host may not report (verification votes
// are the leader's own) are dropped.
func observationsFromProto(ps []*robonetv1.Observation) []sentinel.Observation {
	out := make([]sentinel.Observation, 0, len(ps))
	for _, p := range ps {
		kind := sentinel.Kind(0)
		for k, w := range observationKinds {
			if w == p.GetKind() {
				kind = k
			}
		}
		if kind == 0 {
			continue
		}
		out = append(out, sentinel.Observation{Node: p.GetNode(), Capability: p.GetCapability(), Kind: kind, Value: p.GetValue(),
			Count: int(min(max(p.GetCount(), 1), maxObservationCount)), At: clock.FromUnixNanos(p.GetAtUnixNs())})
	}
	return out
}

// ownerToProto fills open with what o says of the session's owner.
func ownerToProto(o wag.Owner, open *robonetv1.LeadOpen) {
	open.Term, open.Follower, open.PartitionCount = o.Term, o.Follower, uint32(o.Count)
	if len(o.Partitions) > 0 {
		open.Partitions = make(map[uint32]uint64, len(o.Partitions))
		for p, e := range o.Partitions {
			open.Partitions[uint32(p)] = e
		}
	}
}

// ownerFromProto reads the session's owner from open, refusing a partition
// set no honest owner sends.
func ownerFromProto(open *robonetv1.LeadOpen) (wag.Owner, error) {
	o := wag.Owner{Term: open.GetTerm(), Follower: open.GetFollower(), Count: int(open.GetPartitionCount())}
	if o.Count > port.MaxPartitions {
		return wag.Owner{}, fmt.Errorf("LeadOpen: %d partitions, more than the %d a mesh can have", o.Count, port.MaxPartitions)
	}
	if len(open.GetPartitions()) > 0 && o.Count == 0 {
		return wag.Owner{}, errors.New("LeadOpen: partitions without a partition count")
	}
	if len(open.GetPartitions()) > 0 {
		o.Partitions = make(map[int]uint64, len(open.GetPartitions()))
		for p, e := range open.GetPartitions() {
			if int(p) >= o.Count {
				return wag.Owner{}, fmt.Errorf("LeadOpen: partition %d of a mesh of %d", p, o.Count)
			}
			o.Partitions[int(p)] = e
		}
	}
	return o, nil
}
