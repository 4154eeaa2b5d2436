package remote

import (
	"fmt"
	"math"
	"unicode/utf8"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
	"github.com/robonet/robonet/trust"
	"github.com/robonet/robonet/wag"
)

// What one node may send another on a Waggler stream is bounded, as what
// a client may send is: the gRPC message size (the node's
// MaxMessageBytes) bounds a message, and these bound what is in one. A
// message beyond them, or malformed (an attempt key that is not one, a
// number that is not finite), is never what an honest node sends: it ends
// the stream with INVALID_ARGUMENT or RESOURCE_EXHAUSTED naming the limit,
// and counts against the sender (ServerOptions.OnViolation). Nothing from
// it is applied, so the receiver's memory and work stay bounded whatever
// a peer sends.
const (
	// MaxBatchItems bounds the items of one message: handoffs, cancels,
	// results, progress reports, starts, heartbeats, reports,
	// assignments, workers, roles.
	MaxBatchItems = 20_000
	// maxNameBytes bounds names: nodes, workers, capabilities, workflows,
	// tasks, actions.
	maxNameBytes = 256
	// maxExecIDBytes bounds an execution id ("task[index]" and nesting).
	maxExecIDBytes = 1024
	// maxErrorBytes bounds the error text of one attempt or answer (a
	// pool fits its actions' text to it before it reports).
	maxErrorBytes = wag.MaxErrorBytes
	// maxProgressTextBytes bounds a progress message (likewise).
	maxProgressTextBytes = wag.MaxProgressTextBytes
	// MaxWorkStreamsPerNode bounds the Work streams one node holds open
	// to this node at once: one per pool (capability, or worker program)
	// it runs.
	MaxWorkStreamsPerNode = 64
	// maxBeatsPerAttempt bounds the heartbeats one attempt may send per
	// heartbeat interval; an honest worker sends one.
	maxBeatsPerAttempt = 10
)

// ViolationFunc is told that peer sent what no honest node sends (what
// says what, naming the limit); the stream has been ended.
type ViolationFunc func(peer, what string)

// report tells f, if set.
func (f ViolationFunc) report(peer string, err error) {
	if f != nil {
		f(peer, err.Error())
	}
}

// violation is a message a peer must not send: why, and the status that
// ends its stream.
type violation struct {
	code codes.Code
	msg  string
}

func (v *violation) Error() string { return v.msg }

// GRPCStatus lets status.Convert and the gRPC server read the code.
func (v *violation) GRPCStatus() *status.Status { return status.New(v.code, v.msg) }

func invalid(format string, args ...any) error {
	return &violation{code: codes.InvalidArgument, msg: fmt.Sprintf(format, args...)}
}

func exhausted(format string, args ...any) error {
	return &violation{code: codes.ResourceExhausted, msg: fmt.Sprintf(format, args...)}
}

// checkBatch bounds the items of one message.
func checkBatch(what string, n int) error {
	if n > MaxBatchItems {
		return exhausted("%s: %d items in one message, the limit is %d", what, n, MaxBatchItems)
	}
	return nil
}

// checkString bounds a string field and requires UTF-8; it never quotes
// the value (it may be huge or hostile).
func checkString(field, s string, limit int) error { return checkField(field, "", s, limit) }

// checkField is checkString for a field of what ("what: field"); the two
// are joined only for an error, since every dispatch and result is
// checked.
func checkField(what, field, s string, limit int) error {
	name := func() string {
		if field == "" {
			return what
		}
		return what + ": " + field
	}
	if len(s) > limit {
		return exhausted("%s is %d bytes, the limit is %d", name(), len(s), limit)
	}
	if !utf8.ValidString(s) {
		return invalid("%s is not valid UTF-8", name())
	}
	return nil
}

func checkKey(what string, k *robonetv1.AttemptKey) error {
	if k == nil {
		return invalid("%s: no attempt key", what)
	}
	if _, err := uuid.Parse(k.GetInstanceId()); err != nil {
		return invalid("%s: the instance id is not a UUID", what)
	}
	if k.GetExecutionId() == "" {
		return invalid("%s: no execution id", what)
	}
	return checkField(what, "execution id", k.GetExecutionId(), maxExecIDBytes)
}

func checkNonNegative(what, field string, n int64) error {
	if n < 0 {
		return invalid("%s: %s is negative", what, field)
	}
	return nil
}

// checkStamp checks a stamp's sizes (whether it verifies is the trust
// check's business).
func checkStamp(what string, st *robonetv1.Stamp) error {
	if st == nil {
		return nil
	}
	if n := len(st.GetToken()); n != 0 && n != trust.Size {
		return invalid("%s: a stamp's token is %d bytes, not %d", what, n, trust.Size)
	}
	if n := len(st.GetNextAnchor()); n != 0 && n != trust.AnchorBytes {
		return invalid("%s: a stamp's next anchor is %d bytes, not %d", what, n, trust.AnchorBytes)
	}
	return nil
}

func checkFinite(field string, f float64) error {
	if math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
		return invalid("%s is not a finite non-negative number", field)
	}
	return nil
}

// firstErr returns the first error of checks, which run in order until one
// fails.
func firstErr(checks ...func() error) error {
	for _, c := range checks {
		if err := c(); err != nil {
			return err
		}
	}
	return nil
}

func checkDispatch(what string, d *robonetv1.Dispatch) error {
	if d == nil {
		return invalid("%s: no dispatch", what)
	}
	return firstErr(
		func() error { return checkKey(what, d.GetKey()) },
		func() error { return checkField(what, "workflow", d.GetWorkflow(), maxNameBytes) },
		func() error { return checkField(what, "task", d.GetTask(), maxNameBytes) },
		func() error { return checkField(what, "capability", d.GetCapability(), maxNameBytes) },
		func() error { return checkField(what, "action", d.GetAction(), maxNameBytes) },
		func() error { return checkNonNegative(what, "timeout", d.GetTimeoutNs()) },
		func() error {
			if d.GetVerify() > 3 {
				return invalid("%s: verify %d, at most 3", what, d.GetVerify())
			}
			return nil
		},
		func() error { return checkField(what, "group", d.GetGroup(), 2*maxExecIDBytes) },
		func() error { return checkField(what, "node", d.GetNode(), maxNameBytes) },
		func() error {
			if len(d.GetAvoid()) > 3 {
				return invalid("%s: %d nodes to avoid, at most 3", what, len(d.GetAvoid()))
			}
			for _, n := range d.GetAvoid() {
				if err := checkField(what, "avoid", n, maxNameBytes); err != nil {
					return err
				}
			}
			return nil
		},
	)
}

// checkLeadRequest checks what a leader sends a Waggler host.
func checkLeadRequest(m *robonetv1.LeadRequest) error {
	switch x := m.GetMsg().(type) {
	case *robonetv1.LeadRequest_Open:
		return checkString("LeadOpen: leader", x.Open.GetLeader(), maxNameBytes)
	case *robonetv1.LeadRequest_Roles:
		if err := checkBatch("LeadRoles", len(x.Roles.GetRoles())); err != nil {
			return err
		}
		for c := range x.Roles.GetRoles() {
			if err := checkString("LeadRoles: capability", c, maxNameBytes); err != nil {
				return err
			}
		}
		if err := checkBatch("LeadRoles: quarantined", len(x.Roles.GetQuarantined())); err != nil {
			return err
		}
		for _, n := range x.Roles.GetQuarantined() {
			if err := checkString("LeadRoles: quarantined", n, maxNameBytes); err != nil {
				return err
			}
		}
	case *robonetv1.LeadRequest_Dispatch:
		if err := checkBatch("LeadDispatch", len(x.Dispatch.GetHandoffs())); err != nil {
			return err
		}
		for _, h := range x.Dispatch.GetHandoffs() {
			if err := firstErr(
				func() error { return checkDispatch("LeadDispatch", h.GetDispatch()) },
				func() error { return checkString("LeadDispatch: worker id", h.GetWorkerId(), maxNameBytes) },
			); err != nil {
				return err
			}
		}
	case *robonetv1.LeadRequest_Cancel:
		if err := checkBatch("LeadCancel", len(x.Cancel.GetKeys())); err != nil {
			return err
		}
		for _, k := range x.Cancel.GetKeys() {
			if err := checkKey("LeadCancel", k); err != nil {
				return err
			}
		}
	case *robonetv1.LeadRequest_Ack:
	default:
		return invalid("an empty or unknown Lead request")
	}
	return nil
}

// checkLeadResponse checks what a Waggler host sends the leader.
func checkLeadResponse(m *robonetv1.LeadResponse) error {
	switch x := m.GetMsg().(type) {
	case *robonetv1.LeadResponse_Answer:
		if err := checkBatch("LeadAnswer", len(x.Answer.GetAttemptErrors())); err != nil {
			return err
		}
		if err := checkString("LeadAnswer: error", x.Answer.GetError().GetMessage(), maxErrorBytes); err != nil {
			return err
		}
		for _, e := range x.Answer.GetAttemptErrors() {
			if err := checkString("LeadAnswer: attempt error", e.GetMessage(), maxErrorBytes); err != nil {
				return err
			}
		}
	case *robonetv1.LeadResponse_Results:
		if err := checkBatch("LeadResults", len(x.Results.GetResults())); err != nil {
			return err
		}
		for _, r := range x.Results.GetResults() {
			if err := firstErr(
				func() error { return checkKey("LeadResults", r.GetKey()) },
				func() error { return checkString("LeadResults: error", r.GetError(), maxErrorBytes) },
				func() error { return checkString("LeadResults: worker id", r.GetWorkerId(), maxNameBytes) },
			); err != nil {
				return err
			}
		}
	case *robonetv1.LeadResponse_Progress:
		if err := checkBatch("LeadProgress", len(x.Progress.GetItems())); err != nil {
			return err
		}
		for _, p := range x.Progress.GetItems() {
			if err := firstErr(
				func() error { return checkKey("LeadProgress", p.GetKey()) },
				func() error { return checkString("LeadProgress: worker id", p.GetWorkerId(), maxNameBytes) },
				func() error {
					return checkString("LeadProgress: message", p.GetMessage(), maxProgressTextBytes)
				},
				func() error { return checkFinite("LeadProgress: cpu percent", p.GetCpuPercent()) },
				func() error { return checkNonNegative("LeadProgress", "eta", p.GetEtaNs()) },
			); err != nil {
				return err
			}
		}
	case *robonetv1.LeadResponse_Ready:
	case *robonetv1.LeadResponse_Started:
		if err := checkBatch("LeadStarted", len(x.Started.GetItems())); err != nil {
			return err
		}
		for _, s := range x.Started.GetItems() {
			if err := firstErr(
				func() error { return checkKey("LeadStarted", s.GetKey()) },
				func() error { return checkString("LeadStarted: capability", s.GetCapability(), maxNameBytes) },
				func() error { return checkString("LeadStarted: worker id", s.GetWorkerId(), maxNameBytes) },
			); err != nil {
				return err
			}
		}
	case *robonetv1.LeadResponse_Observations:
		if err := checkBatch("LeadObservations", len(x.Observations.GetItems())); err != nil {
			return err
		}
		for _, o := range x.Observations.GetItems() {
			if err := firstErr(
				func() error { return checkString("LeadObservations: node", o.GetNode(), maxNameBytes) },
				func() error { return checkString("LeadObservations: capability", o.GetCapability(), maxNameBytes) },
				func() error { return checkFinite("LeadObservations: value", o.GetValue()) },
				func() error {
					if _, ok := robonetv1.ObservationKind_name[int32(o.GetKind())]; !ok || o.GetKind() == 0 {
						return invalid("LeadObservations: unknown kind %d", o.GetKind())
					}
					return nil
				},
			); err != nil {
				return err
			}
		}
	default:
		return invalid("an empty or unknown Lead response")
	}
	return checkStamp("LeadResponse", m.GetStamp())
}

// checkWorkRequest checks what a pool sends its Waggler.
func checkWorkRequest(m *robonetv1.WorkRequest) error {
	switch x := m.GetMsg().(type) {
	case *robonetv1.WorkRequest_Register:
		r := x.Register
		if err := firstErr(
			func() error { return checkString("WorkRegister: node", r.GetNode(), maxNameBytes) },
			func() error { return checkString("WorkRegister: capability", r.GetCapability(), maxNameBytes) },
			func() error { return checkBatch("WorkRegister: workers", len(r.GetWorkers())) },
			func() error { return checkBatch("WorkRegister: running", len(r.GetRunning())) },
		); err != nil {
			return err
		}
		for _, w := range r.GetWorkers() {
			if err := checkString("WorkRegister: worker id", w, maxNameBytes); err != nil {
				return err
			}
		}
		for _, run := range r.GetRunning() {
			if err := firstErr(
				func() error { return checkDispatch("WorkRegister: running", run.GetAssignment().GetDispatch()) },
				func() error { return checkString("WorkRegister: worker id", run.GetWorkerId(), maxNameBytes) },
			); err != nil {
				return err
			}
		}
	case *robonetv1.WorkRequest_Heartbeats:
		if err := checkBatch("WorkHeartbeats", len(x.Heartbeats.GetItems())); err != nil {
			return err
		}
		for _, hb := range x.Heartbeats.GetItems() {
			if err := firstErr(
				func() error { return checkKey("WorkHeartbeats", hb.GetKey()) },
				func() error { return checkString("WorkHeartbeats: worker id", hb.GetWorkerId(), maxNameBytes) },
				func() error {
					return checkString("WorkHeartbeats: message", hb.GetMessage(), maxProgressTextBytes)
				},
				func() error { return checkFinite("WorkHeartbeats: cpu percent", hb.GetCpuPercent()) },
				func() error { return checkNonNegative("WorkHeartbeats", "eta", hb.GetEtaNs()) },
			); err != nil {
				return err
			}
		}
	case *robonetv1.WorkRequest_Reports:
		if err := checkBatch("WorkReports", len(x.Reports.GetItems())); err != nil {
			return err
		}
		for _, r := range x.Reports.GetItems() {
			if err := firstErr(
				func() error { return checkKey("WorkReports", r.GetKey()) },
				func() error { return checkString("WorkReports: worker id", r.GetWorkerId(), maxNameBytes) },
				func() error { return checkString("WorkReports: error", r.GetError(), maxErrorBytes) },
			); err != nil {
				return err
			}
		}
	case *robonetv1.WorkRequest_Leave:
		if err := checkBatch("WorkLeave", len(x.Leave.GetWorkers())); err != nil {
			return err
		}
		for _, w := range x.Leave.GetWorkers() {
			if err := checkString("WorkLeave: worker id", w, maxNameBytes); err != nil {
				return err
			}
		}
	case *robonetv1.WorkRequest_Misbehaved:
		if err := checkBatch("WorkMisbehaved", len(x.Misbehaved.GetItems())); err != nil {
			return err
		}
		for _, it := range x.Misbehaved.GetItems() {
			if err := checkString("WorkMisbehaved: worker id", it.GetWorkerId(), maxNameBytes); err != nil {
				return err
			}
			if _, ok := misbehaviourFromProto(it.GetKind()); !ok {
				return invalid("WorkMisbehaved: unknown kind %d", int32(it.GetKind()))
			}
		}
	default:
		return invalid("an empty or unknown Work request")
	}
	return checkStamp("WorkRequest", m.GetStamp())
}

// checkWorkResponse checks what a Waggler sends a pool.
func checkWorkResponse(m *robonetv1.WorkResponse) error {
	switch x := m.GetMsg().(type) {
	case *robonetv1.WorkResponse_Assign:
		if err := checkBatch("WorkAssign", len(x.Assign.GetItems())); err != nil {
			return err
		}
		for _, it := range x.Assign.GetItems() {
			if err := firstErr(
				func() error { return checkString("WorkAssign: worker id", it.GetWorkerId(), maxNameBytes) },
				func() error { return checkDispatch("WorkAssign", it.GetAssignment().GetDispatch()) },
			); err != nil {
				return err
			}
		}
	case *robonetv1.WorkResponse_Cancel:
		if err := checkBatch("WorkCancel", len(x.Cancel.GetItems())); err != nil {
			return err
		}
		for _, it := range x.Cancel.GetItems() {
			if err := firstErr(
				func() error { return checkString("WorkCancel: worker id", it.GetWorkerId(), maxNameBytes) },
				func() error { return checkKey("WorkCancel", it.GetKey()) },
			); err != nil {
				return err
			}
		}
	case *robonetv1.WorkResponse_Ack, *robonetv1.WorkResponse_Ready:
	default:
		return invalid("an empty or unknown Work response")
	}
	return nil
}
