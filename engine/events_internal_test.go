package engine

import (
	"fmt"
	"strconv"
	"testing"
)

// The ring keeps the last size events in order whatever their number,
// starts at ringStart events and then takes size at once.
func TestEventLogKeepsTheLastSizeEvents(t *testing.T) {
	for _, c := range []struct{ size, n int }{
		{8, 3}, {8, 8}, {8, 20},
		{1024, 1}, {1024, ringStart}, {1024, ringStart + 1}, {1024, 1024}, {1024, 1025}, {1024, 3000},
	} {
		t.Run(fmt.Sprintf("size%d/%d", c.size, c.n), func(t *testing.T) {
			const last = 10 << 32
			l := newEventLog(c.size, last)
			for i := range c.n {
				if seq := l.append(Event{Task: strconv.Itoa(i)}); seq != last+1+uint64(i) {
					t.Fatalf("event %d numbered %d, want %d", i, seq, last+1+uint64(i))
				}
			}
			held := min(c.n, c.size)
			evs, ok, _, _ := l.read(l.last()-uint64(held), c.n+1, nil)
			if !ok || len(evs) != held {
				t.Fatalf("read the %d held events: ok %v, %d events", held, ok, len(evs))
			}
			for i, ev := range evs {
				if want := strconv.Itoa(c.n - held + i); ev.Task != want || ev.Seq != l.last()-uint64(held-1-i) {
					t.Fatalf("event %d of the read: task %s seq %d, want task %s seq %d", i, ev.Task, ev.Seq, want, l.last()-uint64(held-1-i))
				}
			}
			if _, ok, _, _ := l.read(l.last()-uint64(held)-1, 1, nil); ok {
				t.Fatalf("an event older than the ring was read")
			}
			wantCap := min(c.size, ringStart)
			if c.n > ringStart {
				wantCap = c.size
			}
			if cap(l.ring) != wantCap {
				t.Fatalf("ring capacity %d after %d events, want %d", cap(l.ring), c.n, wantCap)
			}
		})
	}
}
