package wag

import (
	"time"

	"github.com/robonet/robonet/engine"
	"github.com/robonet/robonet/engine/value"
)

// How long, and within what budget, a Waggler remembers its results.
const (
	rememberResults      = 2 * time.Minute
	rememberResultsBytes = 64 << 20
)

// doneResults is a FIFO of finished attempts' results, bounded in age and
// bytes.
type doneResults struct {
	byKey map[engine.AttemptKey]*doneResult
	fifo  []*doneResult
	head  int
	bytes int
}

type doneResult struct {
	r    engine.TaskResult
	at   time.Time
	size int
}

func (d *doneResults) add(r engine.TaskResult, now time.Time) {
	if d.byKey == nil {
		d.byKey = map[engine.AttemptKey]*doneResult{}
	}
	if _, ok := d.byKey[r.AttemptKey]; ok {
		return
	}
	if r.OutputJSON != nil {
		// Kept encoded only (decoded again by get, which is rare): bytes
		// the collector need not scan, where the decoded value is a tree
		// of pointers — remembered results are most of a busy Waggler
		// host's heap.
		r.Output = nil
	}
	size := 256 + len(r.Error) + value.Size(r.Output, rememberResultsBytes) + len(r.OutputJSON)
	dr := &doneResult{r: r, at: now, size: size}
	d.byKey[r.AttemptKey] = dr
	d.fifo = append(d.fifo, dr)
	d.bytes += size
	d.prune(now)
}

// prune forgets results older than rememberResults or past the budget.
func (d *doneResults) prune(now time.Time) {
	for d.head < len(d.fifo) {
		dr := d.fifo[d.head]
		if now.Sub(dr.at) < rememberResults && d.bytes <= rememberResultsBytes {
			break
		}
		d.fifo[d.head] = nil
		d.head++
		d.bytes -= dr.size
		delete(d.byKey, dr.r.AttemptKey)
	}
	if d.head > 1024 && d.head*2 > len(d.fifo) {
		d.fifo = append([]*doneResult(nil), d.fifo[d.head:]...)
		d.head = 0
	}
}

// tombstones is a FIFO of attempt keys, bounded in age and count.
type tombstones struct {
	at   map[engine.AttemptKey]time.Time
	fifo []engine.AttemptKey
	head int
}

// maxTombstones bounds the cancelled attempts a Waggler remembers.
const maxTombstones = 100_000

func (t *tombstones) add(key engine.AttemptKey, now time.Time) {
	if t.at == nil {
		t.at = map[engine.AttemptKey]time.Time{}
	}
	if _, ok := t.at[key]; ok {
		return
	}
	t.at[key] = now
	t.fifo = append(t.fifo, key)
	t.prune(now)
}

func (t *tombstones) has(key engine.AttemptKey) bool {
	_, ok := t.at[key]
	return ok
}

func (t *tombstones) prune(now time.Time) {
	for t.head < len(t.fifo) {
		key := t.fifo[t.head]
		if now.Sub(t.at[key]) < rememberResults && len(t.at) <= maxTombstones {
			break
		}
		delete(t.at, key)
		t.head++
	}
	if t.head > 1024 && t.head*2 > len(t.fifo) {
		t.fifo = append([]engine.AttemptKey(nil), t.fifo[t.head:]...)
		t.head = 0
	}
}

func (d *doneResults) get(key engine.AttemptKey) (engine.TaskResult, bool) {
	dr, ok := d.byKey[key]
	if !ok {
		return engine.TaskResult{}, false
	}
	r := dr.r
	if r.OK && r.OutputJSON != nil {
		v, err := value.Decode(r.OutputJSON)
		if err != nil { // it was encoded here: cannot happen
			return engine.TaskResult{}, false
		}
		r.Output = v
	}
	return r, true
}

func (d *doneResults) has(key engine.AttemptKey) bool {
	_, ok := d.byKey[key]
	return ok
}
