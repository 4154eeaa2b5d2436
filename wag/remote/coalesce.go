package remote

import (
	"slices"

	"google.golang.org/protobuf/proto"

	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// mergeInto appends next to into when both are batches of one kind whose
// order within the stream does not change by merging (assignments,
// cancels, reports, heartbeats, results, progress, starts), or keeps the
// later of two acknowledgements. It reports whether it merged. Requests
// that are answered by id (dispatches, cancels and roles on a Lead
// stream) are never merged.
func mergeInto(into, next proto.Message) bool {
	switch a := into.(type) {
	case *robonetv1.WorkResponse:
		b, ok := next.(*robonetv1.WorkResponse)
		if !ok {
			return false
		}
		switch am := a.GetMsg().(type) {
		case *robonetv1.WorkResponse_Assign:
			if bm, ok := b.GetMsg().(*robonetv1.WorkResponse_Assign); ok {
				am.Assign.Items = append(am.Assign.Items, bm.Assign.GetItems()...)
				return true
			}
		case *robonetv1.WorkResponse_Cancel:
			if bm, ok := b.GetMsg().(*robonetv1.WorkResponse_Cancel); ok {
				am.Cancel.Items = append(am.Cancel.Items, bm.Cancel.GetItems()...)
				return true
			}
		case *robonetv1.WorkResponse_Ack:
			if bm, ok := b.GetMsg().(*robonetv1.WorkResponse_Ack); ok {
				am.Ack.Seq = max(am.Ack.GetSeq(), bm.Ack.GetSeq())
				return true
			}
		}
	case *robonetv1.WorkRequest:
		b, ok := next.(*robonetv1.WorkRequest)
		if !ok {
			return false
		}
		switch am := a.GetMsg().(type) {
		case *robonetv1.WorkRequest_Reports:
			if bm, ok := b.GetMsg().(*robonetv1.WorkRequest_Reports); ok {
				am.Reports.Items = append(am.Reports.Items, bm.Reports.GetItems()...)
				return true
			}
		case *robonetv1.WorkRequest_Heartbeats:
			if bm, ok := b.GetMsg().(*robonetv1.WorkRequest_Heartbeats); ok {
				am.Heartbeats.Items = append(am.Heartbeats.Items, bm.Heartbeats.GetItems()...)
				return true
			}
		}
	case *robonetv1.LeadResponse:
		b, ok := next.(*robonetv1.LeadResponse)
		if !ok {
			return false
		}
		switch am := a.GetMsg().(type) {
		case *robonetv1.LeadResponse_Results:
			if bm, ok := b.GetMsg().(*robonetv1.LeadResponse_Results); ok {
				am.Results.Results = append(am.Results.Results, bm.Results.GetResults()...)
				return true
			}
		case *robonetv1.LeadResponse_Progress:
			if bm, ok := b.GetMsg().(*robonetv1.LeadResponse_Progress); ok {
				am.Progress.Items = append(am.Progress.Items, bm.Progress.GetItems()...)
				return true
			}
		case *robonetv1.LeadResponse_Started:
			if bm, ok := b.GetMsg().(*robonetv1.LeadResponse_Started); ok {
				am.Started.Items = append(am.Started.Items, bm.Started.GetItems()...)
				return true
			}
		}
	case *robonetv1.LeadRequest:
		b, ok := next.(*robonetv1.LeadRequest)
		if !ok {
			return false
		}
		if am, ok := a.GetMsg().(*robonetv1.LeadRequest_Ack); ok {
			if bm, ok := b.GetMsg().(*robonetv1.LeadRequest_Ack); ok {
				am.Ack.Seq = max(am.Ack.GetSeq(), bm.Ack.GetSeq())
				return true
			}
		}
	}
	return false
}

// overtakes reports whether later, queued after earlier on one stream, may
// be delivered before it — what lets coalesce merge later into a message
// of its kind queued before earlier. Only messages whose early delivery
// cannot change what the receiver does:
//
//   - to the leader, a start or progress report: a start is queued before
//     the result of its attempt, so moving it earlier keeps it so, and
//     progress is advisory;
//   - from the leader, and from a Waggler to a pool, an acknowledgement:
//     it only lets the sender forget results it already sent;
//   - from a pool, a heartbeat batch: it may arrive before a report queued
//     ahead of it (never a report before a heartbeat: the Waggler would
//     then see beats of an attempt it considers finished).
//
// Results, reports, dispatches, cancels, assignments, roles and
// registrations never overtake anything.
func overtakes(later, earlier proto.Message) bool {
	switch m := later.(type) {
	case *robonetv1.LeadResponse:
		switch m.GetMsg().(type) {
		case *robonetv1.LeadResponse_Started, *robonetv1.LeadResponse_Progress:
			return true
		}
	case *robonetv1.LeadRequest:
		_, ok := m.GetMsg().(*robonetv1.LeadRequest_Ack)
		return ok
	case *robonetv1.WorkResponse:
		_, ok := m.GetMsg().(*robonetv1.WorkResponse_Ack)
		return ok
	case *robonetv1.WorkRequest:
		if _, ok := m.GetMsg().(*robonetv1.WorkRequest_Heartbeats); ok {
			e, _ := earlier.(*robonetv1.WorkRequest)
			_, isReports := e.GetMsg().(*robonetv1.WorkRequest_Reports)
			return isReports
		}
	}
	return false
}

// batchLen is the number of items of a batch message (what MaxBatchItems
// bounds), 0 for others.
func batchLen(m proto.Message) int {
	switch x := m.(type) {
	case *robonetv1.WorkResponse:
		switch y := x.GetMsg().(type) {
		case *robonetv1.WorkResponse_Assign:
			return len(y.Assign.GetItems())
		case *robonetv1.WorkResponse_Cancel:
			return len(y.Cancel.GetItems())
		}
	case *robonetv1.WorkRequest:
		switch y := x.GetMsg().(type) {
		case *robonetv1.WorkRequest_Reports:
			return len(y.Reports.GetItems())
		case *robonetv1.WorkRequest_Heartbeats:
			return len(y.Heartbeats.GetItems())
		}
	case *robonetv1.LeadResponse:
		switch y := x.GetMsg().(type) {
		case *robonetv1.LeadResponse_Results:
			return len(y.Results.GetResults())
		case *robonetv1.LeadResponse_Progress:
			return len(y.Progress.GetItems())
		case *robonetv1.LeadResponse_Started:
			return len(y.Started.GetItems())
		}
	}
	return 0
}

// attemptID is an attempt key's fields, comparable.
type attemptID struct {
	instance, execution string
	attempt             uint32
}

func attemptIDOf(k *robonetv1.AttemptKey) attemptID {
	return attemptID{k.GetInstanceId(), k.GetExecutionId(), k.GetAttempt()}
}

// dropAnswered removes, from a queue of a host's messages to its leader,
// the starts of attempts whose result is queued too. The result ends the
// attempt at the leader, which keeps a start only to know the attempt's
// worker while it runs, so such a start is work for both ends and nothing
// more; short attempts (a start and a result a few microseconds apart)
// lose most of theirs. A start always precedes its result in the queue,
// so what remains keeps its order. Items someone waits for stay as they
// are, and a start message left empty is dropped. Other queues are
// returned as they are.
func dropAnswered[T proto.Message](q []item[T]) []item[T] {
	// The starts queued (fewer than the results, as a rule) are the set;
	// the results mark those they answer.
	var starts map[attemptID]bool
	for _, it := range q {
		if m, ok := any(it.v).(*robonetv1.LeadResponse); ok && it.done == nil {
			for _, a := range m.GetStarted().GetItems() {
				if starts == nil {
					starts = make(map[attemptID]bool, len(m.GetStarted().GetItems()))
				}
				starts[attemptIDOf(a.GetKey())] = false
			}
		}
	}
	if starts == nil {
		return q
	}
	answered := 0
	for _, it := range q {
		if m, ok := any(it.v).(*robonetv1.LeadResponse); ok {
			for _, r := range m.GetResults().GetResults() {
				k := attemptIDOf(r.GetKey())
				if marked, queued := starts[k]; queued && !marked {
					starts[k] = true
					answered++
				}
			}
		}
	}
	if answered == 0 {
		return q
	}
	out := q[:0]
	for _, it := range q {
		if m, ok := any(it.v).(*robonetv1.LeadResponse); ok && it.done == nil {
			if st := m.GetStarted(); st != nil {
				st.Items = slices.DeleteFunc(st.Items, func(a *robonetv1.AttemptStarted) bool {
					return starts[attemptIDOf(a.GetKey())]
				})
				if len(st.Items) == 0 {
					continue
				}
			}
		}
		out = append(out, it)
	}
	clear(q[len(out):]) // no reference kept to what was dropped
	return out
}
