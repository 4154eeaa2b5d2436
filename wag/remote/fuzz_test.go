package remote

import (
	"testing"

	"google.golang.org/protobuf/proto"

	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// The stream decoders: whatever bytes a peer sends as one message, the
// receiver's checks and conversions never panic, and a message the checks
// accept converts without an error about its keys.

func seed[T proto.Message](f *testing.F, msgs ...T) {
	for _, m := range msgs {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

func FuzzWorkRequest(f *testing.F) {
	seed(f, workRequests(f)...)
	f.Fuzz(func(t *testing.T, b []byte) {
		var m robonetv1.WorkRequest
		if proto.Unmarshal(b, &m) != nil || checkWorkRequest(&m) != nil {
			return
		}
		switch x := m.GetMsg().(type) {
		case *robonetv1.WorkRequest_Register:
			for _, r := range x.Register.GetRunning() {
				if _, err := keyFromProto(r.GetAssignment().GetDispatch().GetKey()); err != nil {
					t.Fatalf("a checked running attempt's key: %v", err)
				}
				_, _ = assignmentFromProto(r.GetAssignment())
			}
		case *robonetv1.WorkRequest_Heartbeats:
			for _, hb := range x.Heartbeats.GetItems() {
				if _, err := heartbeatFromProto(hb); err != nil {
					t.Fatalf("a checked heartbeat: %v", err)
				}
			}
			_ = newBeatWindow(1).add(x.Heartbeats.GetItems(), fixedNow)
		case *robonetv1.WorkRequest_Reports:
			for _, r := range x.Reports.GetItems() {
				if _, err := reportFromProto(r); err != nil {
					t.Fatalf("a checked report: %v", err)
				}
			}
		}
	})
}

func FuzzWorkResponse(f *testing.F) {
	seed(f, workResponses(f)...)
	f.Fuzz(func(t *testing.T, b []byte) {
		var m robonetv1.WorkResponse
		if proto.Unmarshal(b, &m) != nil || checkWorkResponse(&m) != nil {
			return
		}
		switch x := m.GetMsg().(type) {
		case *robonetv1.WorkResponse_Assign:
			for _, it := range x.Assign.GetItems() {
				if _, err := keyFromProto(it.GetAssignment().GetDispatch().GetKey()); err != nil {
					t.Fatalf("a checked assignment's key: %v", err)
				}
				_, _ = assignmentFromProto(it.GetAssignment())
			}
		case *robonetv1.WorkResponse_Cancel:
			for _, it := range x.Cancel.GetItems() {
				if _, err := keyFromProto(it.GetKey()); err != nil {
					t.Fatalf("a checked cancel: %v", err)
				}
			}
		}
	})
}

func FuzzLeadRequest(f *testing.F) {
	seed(f, leadRequests(f)...)
	f.Fuzz(func(t *testing.T, b []byte) {
		var m robonetv1.LeadRequest
		if proto.Unmarshal(b, &m) != nil || checkLeadRequest(&m) != nil {
			return
		}
		switch x := m.GetMsg().(type) {
		case *robonetv1.LeadRequest_Dispatch:
			for _, h := range x.Dispatch.GetHandoffs() {
				if _, err := keyFromProto(h.GetDispatch().GetKey()); err != nil {
					t.Fatalf("a checked handoff's key: %v", err)
				}
				_, _ = dispatchFromProto(h.GetDispatch())
			}
		case *robonetv1.LeadRequest_Cancel:
			for _, k := range x.Cancel.GetKeys() {
				if _, err := keyFromProto(k); err != nil {
					t.Fatalf("a checked cancel: %v", err)
				}
			}
		}
	})
}

func FuzzLeadResponse(f *testing.F) {
	seed(f, leadResponses(f)...)
	f.Fuzz(func(t *testing.T, b []byte) {
		var m robonetv1.LeadResponse
		if proto.Unmarshal(b, &m) != nil || checkLeadResponse(&m) != nil {
			return
		}
		switch x := m.GetMsg().(type) {
		case *robonetv1.LeadResponse_Results:
			for _, r := range x.Results.GetResults() {
				if _, err := resultFromProto(r); err != nil {
					t.Fatalf("a checked result: %v", err)
				}
			}
		case *robonetv1.LeadResponse_Progress:
			for _, p := range x.Progress.GetItems() {
				if _, err := progressFromProto(p); err != nil {
					t.Fatalf("a checked progress report: %v", err)
				}
			}
		case *robonetv1.LeadResponse_Started:
			for _, s := range x.Started.GetItems() {
				if _, err := startedFromProto(s); err != nil {
					t.Fatalf("a checked start: %v", err)
				}
			}
		case *robonetv1.LeadResponse_Answer:
			_ = errFromProto(x.Answer.GetError())
		}
	})
}
