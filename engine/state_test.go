package engine

import (
	"slices"
	"testing"
	"time"
)

// The envelope round-trips; without child workflow facts it is written
// as version 1, as before child workflows; a truncated one is refused.
func TestInstanceStateRoundTrip(t *testing.T) {
	at := time.Unix(1_700_000_000, 123).UTC()
	for _, st := range []instanceState{
		{},
		{deadline: time.Minute, deadlineAt: at, startedAt: at.Add(time.Second)},
		{depth: 3},
		{startedAt: at, depth: 1, pins: []childPin{{"a", 2}, {"scan-host", 7}}},
	} {
		b := st.encode([]byte("graph"))
		if want := byte(statePlain); st.depth == 0 && len(st.pins) == 0 && b[1] != want {
			t.Fatalf("%+v: written as version %d, want %d", st, b[1], want)
		}
		got, err := decodeState(b)
		if err != nil {
			t.Fatalf("%+v: %v", st, err)
		}
		if got.deadline != st.deadline || !got.deadlineAt.Equal(st.deadlineAt) || !got.startedAt.Equal(st.startedAt) ||
			got.depth != st.depth || !slices.Equal(got.pins, st.pins) || string(got.graph) != "graph" {
			t.Fatalf("decoded %+v, want %+v", got, st)
		}
		if st.pin("scan-host") != got.pin("scan-host") {
			t.Fatal("pin differs")
		}
		if len(st.pins) > 0 {
			head := st.encode(nil)
			for n := 3; n < len(head); n++ {
				if _, err := decodeState(head[:n]); err == nil {
					t.Fatalf("%d of %d bytes decoded", n, len(head))
				}
			}
		}
	}
	if _, err := decodeState([]byte{stateTag, 9}); err == nil {
		t.Fatal("an unknown version decoded")
	}
}
