package wag

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/robonet/robonet/engine/port"
	"github.com/robonet/robonet/engine/value"
)

var t0 = time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)

// Every field of a result comes back as it went in: an output encoded by
// the pool or only decoded (from another node's pool), a null output, a
// failure, a lost attempt, zero times.
func TestDoneResultsRoundTrip(t *testing.T) {
	out := map[string]any{"v": int64(7), "s": []any{"x", 1.5}}
	results := []port.TaskResult{
		{AttemptKey: testKey("encoded"), OK: true, Output: out, OutputJSON: value.MustEncode(out), WorkerID: "n1/core/3",
			StartedAt: t0, FinishedAt: t0.Add(time.Millisecond)},
		{AttemptKey: testKey("decoded"), OK: true, Output: out, WorkerID: "n2/core/0", StartedAt: t0, FinishedAt: t0.Add(time.Second)},
		{AttemptKey: testKey("null"), OK: true, WorkerID: "n1/core/1", StartedAt: t0, FinishedAt: t0},
		{AttemptKey: port.AttemptKey{InstanceID: uuid.New(), ExecutionID: "probe[3]", Attempt: 4}, Error: "exit code 2: no such file",
			WorkerID: "n3/core/9", StartedAt: t0, FinishedAt: t0.Add(time.Minute)},
		{AttemptKey: testKey("lost"), Lost: true, Error: "no worker can be reached"},
	}
	var d doneResults
	for _, r := range results {
		d.add(r, t0)
	}
	for _, want := range results {
		got, ok := d.get(want.AttemptKey)
		if !ok || !d.has(want.AttemptKey) {
			t.Fatalf("%s: not remembered", want.ExecutionID)
		}
		if got.AttemptKey != want.AttemptKey || got.OK != want.OK || got.Lost != want.Lost || got.Error != want.Error ||
			got.WorkerID != want.WorkerID || !got.StartedAt.Equal(want.StartedAt) || !got.FinishedAt.Equal(want.FinishedAt) ||
			got.StartedAt.IsZero() != want.StartedAt.IsZero() || got.FinishedAt.IsZero() != want.FinishedAt.IsZero() {
			t.Errorf("%s: got %+v, want %+v", want.ExecutionID, got, want)
		}
		if !want.OK {
			if got.Output != nil || got.OutputJSON != nil {
				t.Errorf("%s: a failed result came back with output %v %q", want.ExecutionID, got.Output, got.OutputJSON)
			}
			continue
		}
		if !value.Equal(got.Output, want.Output) || string(got.OutputJSON) != string(value.MustEncode(want.Output)) {
			t.Errorf("%s: output %v %q, want %v", want.ExecutionID, got.Output, got.OutputJSON, want.Output)
		}
	}
	other := results[3].AttemptKey
	other.Attempt++
	if _, ok := d.get(other); ok || d.has(testKey("encoded")) {
		t.Fatal("an attempt never added is remembered")
	}
	// A second result for a remembered attempt does not replace the first.
	d.add(port.TaskResult{AttemptKey: results[0].AttemptKey, Error: "late"}, t0)
	if got, _ := d.get(results[0].AttemptKey); !got.OK || got.Error != "" {
		t.Fatalf("got %+v, want the first result", got)
	}
	// The memory returned is the caller's: the engine may keep it.
	got, _ := d.get(results[0].AttemptKey)
	got.OutputJSON[0] = 'X'
	if again, _ := d.get(results[0].AttemptKey); again.OutputJSON[0] != '{' {
		t.Fatal("get returned the record's own memory")
	}
}

// A result is remembered for rememberResults after the newest result of
// its chunk; then its chunk is forgotten whole.
func TestDoneResultsForgetWithAge(t *testing.T) {
	var d doneResults
	a, b, c := testKey("a"), testKey("b"), testKey("c")
	d.add(port.TaskResult{AttemptKey: a, OK: true, Output: "a"}, t0)
	d.add(port.TaskResult{AttemptKey: b, OK: true, Output: "b"}, t0.Add(time.Minute))
	d.prune(t0.Add(rememberResults + time.Second))
	if !d.has(a) || !d.has(b) {
		t.Fatal("a result whose chunk has a newer one is forgotten early")
	}
	d.prune(t0.Add(time.Minute + rememberResults))
	if d.has(a) || d.has(b) || len(d.index) != 0 || len(d.chunks) != 0 || d.bytes != 0 {
		t.Fatalf("not forgotten: %d index entries, %d chunks, %d bytes", len(d.index), len(d.chunks), d.bytes)
	}
	d.add(port.TaskResult{AttemptKey: c, OK: true, Output: "c"}, t0.Add(3*rememberResults))
	if !d.has(c) || d.has(a) {
		t.Fatal("remembering again after the memory emptied")
	}
}

// The budget bounds the bytes remembered: the oldest chunks go first, the
// newest results stay.
func TestDoneResultsBudget(t *testing.T) {
	var d doneResults
	big := strings.Repeat("e", 100<<10)
	var keys []port.AttemptKey
	for i := range 800 { // 80 MiB of errors
		k := testKey(fmt.Sprint(i))
		keys = append(keys, k)
		d.add(port.TaskResult{AttemptKey: k, Error: big}, t0)
		if d.bytes > rememberResultsBytes+chunkMax {
			t.Fatalf("after %d results %d bytes are remembered, more than the budget", i+1, d.bytes)
		}
	}
	if d.has(keys[0]) || !d.has(keys[len(keys)-1]) {
		t.Fatal("want the oldest forgotten and the newest remembered")
	}
	var chunks int
	for _, c := range d.chunks {
		chunks += cap(c.buf)
	}
	if want := chunks + indexEntryBytes*len(d.index); d.bytes != want {
		t.Fatalf("bytes counted %d, want %d", d.bytes, want)
	}
	// A result larger than a chunk gets a chunk of its own.
	huge := testKey("huge")
	d.add(port.TaskResult{AttemptKey: huge, Error: strings.Repeat("h", 2*chunkMax)}, t0)
	if r, ok := d.get(huge); !ok || len(r.Error) != 2*chunkMax {
		t.Fatal("a result larger than a chunk is not remembered whole")
	}
}

// Two attempts with the same hash: the first is remembered, the second is
// not, and neither is taken for the other.
func TestDoneResultsHashCollision(t *testing.T) {
	d := doneResults{hash: func(port.AttemptKey) uint64 { return 42 }}
	a, b := testKey("a"), testKey("a")
	b2 := a
	b2.Attempt = 2
	d.add(port.TaskResult{AttemptKey: a, OK: true, Output: "a"}, t0)
	d.add(port.TaskResult{AttemptKey: b, OK: true, Output: "b"}, t0)
	if r, ok := d.get(a); !ok || r.Output != "a" {
		t.Fatalf("got %+v, want a's result", r)
	}
	if d.has(b) || d.has(b2) {
		t.Fatal("an attempt with another's hash is taken for it")
	}
}

// BenchmarkDoneResults adds a busy Waggler host's results (echo outputs,
// encoded by the pool) and looks up a dispatch per result, as enqueue
// does; live-B/result is the heap the remembered results hold.
func BenchmarkDoneResults(b *testing.B) {
	keys := make([]port.AttemptKey, 60_000)
	for i := range keys {
		keys[i] = testKey(fmt.Sprintf("step[%d]", i%10))
	}
	out := value.MustEncode(map[string]any{"n": int64(1)})
	var d doneResults
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	now := t0
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		k := keys[i%len(keys)]
		k.Attempt = uint32(i/len(keys)) + 1
		d.get(k)
		d.add(port.TaskResult{AttemptKey: k, OK: true, OutputJSON: out, WorkerID: "w1/core/12", StartedAt: now, FinishedAt: now}, now)
		now = now.Add(20 * time.Microsecond)
	}
	b.StopTimer()
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/float64(len(d.index)), "live-B/result")
	runtime.KeepAlive(&d)
}
