package wag

import (
	"encoding/binary"
	"hash/maphash"
	"time"

	"github.com/robonet/robonet/engine/port"
	"github.com/robonet/robonet/engine/value"
	"github.com/robonet/robonet/internal/clock"
)

// How long, and within what budget, a Waggler remembers its results.
const (
	rememberResults      = 2 * time.Minute
	rememberResultsBytes = 64 << 20
)

// Remembered results are appended to chunks of bytes that grow from
// chunkMin to chunkMax as a Waggler finishes more: one that finishes few
// holds a few KiB, a busy one forgets 256 KiB at a time.
const (
	chunkMin = 4 << 10
	chunkMax = 256 << 10
	// indexEntryBytes is what an entry of the index costs with its share
	// of the map's slack, counted against rememberResultsBytes.
	indexEntryBytes = 32
)

// doneResults remembers finished attempts' results, bounded in age and
// bytes. A busy Waggler host finishes tens of thousands of attempts a
// second and remembers each for two minutes, so the memory is laid out for
// the collector: a result is one record appended to a chunk of bytes, and
// the index maps a 64-bit hash of its attempt key to where the record is.
// Neither holds a pointer, so the collector never scans them, and an
// echo's result costs about 90 bytes in one place where a struct of strings
// and times behind a map of pointers cost about 300 in several objects
// (remembered that way, results cost a busy Waggler host about a third of
// its CPU, in allocation, collection and fresh pages). It forgets a chunk at a time, once the newest result in it is
// rememberResults old or the budget is spent: a result is remembered for at
// least rememberResults unless the budget runs out first.
type doneResults struct {
	seed   maphash.Seed
	hash   func(port.AttemptKey) uint64 // nil: maphash with seed; tests force collisions
	index  map[uint64]uint64            // hash of an attempt key → its record's place
	chunks []doneChunk                  // oldest first
	first  uint64                       // the number of chunks[0]; numbers only grow
	bytes  int                          // chunks' capacity and index entries
	// scratch encodes an output that came decoded (from another node's
	// pool) before it is copied into a record.
	scratch []byte
}

type doneChunk struct {
	buf  []byte    // records, back to back; never grows past its capacity
	last time.Time // when its newest record was added
}

// A record's place packs its chunk's number (the high 40 bits: at one
// chunk a millisecond they last 34 years) and its offset in the chunk
// (below chunkMax, see room).
const offsetBits = 24

func placeOf(chunk uint64, offset int) uint64 { return chunk<<offsetBits | uint64(offset) }

// A record: its length (4 bytes, little-endian, the length included), the
// hash of its key (8 bytes), the instance id (16 bytes), flags (1 byte),
// then the execution id, the attempt, the start and finish times
// (clock.UnixNanos), the output's JSON (when OK), the error and the
// worker, each a varint or a varint-prefixed string.
const (
	recordHead = 4 + 8 + 16 + 1
	// recordRoom bounds the varints a record adds to its strings.
	recordRoom = recordHead + 7*binary.MaxVarintLen64
)

const (
	flagOK = 1 << iota
	flagLost
)

func (d *doneResults) add(r port.TaskResult, now time.Time) {
	if d.index == nil {
		d.index = map[uint64]uint64{}
		d.seed = maphash.MakeSeed()
	}
	h := d.hashOf(r.AttemptKey)
	if _, ok := d.index[h]; ok {
		// Remembered already — or, about once in 2^64, another attempt
		// with the same hash is: this one is then not remembered, and a
		// dispatch of it again runs it again, which dispatch allows.
		return
	}
	var out []byte
	if r.OK {
		out = r.OutputJSON
		if out == nil {
			var err error
			if d.scratch, err = value.AppendEncode(d.scratch[:0], r.Output); err != nil {
				return // not a canonical value: the engine fails the attempt, nothing to send again
			}
			out = d.scratch
		}
	}
	need := recordRoom + len(r.ExecutionID) + len(out) + len(r.Error) + len(r.WorkerID)
	c := d.room(need)
	b := c.buf
	start := len(b)
	b = binary.LittleEndian.AppendUint32(b, 0) // the length, below
	b = binary.LittleEndian.AppendUint64(b, h)
	b = append(b, r.InstanceID[:]...)
	var flags byte
	if r.OK {
		flags |= flagOK
	}
	if r.Lost {
		flags |= flagLost
	}
	b = append(b, flags)
	b = appendString(b, r.ExecutionID)
	b = binary.AppendUvarint(b, uint64(r.Attempt))
	b = binary.AppendVarint(b, clock.UnixNanos(r.StartedAt))
	b = binary.AppendVarint(b, clock.UnixNanos(r.FinishedAt))
	if r.OK {
		b = appendString(b, out)
	}
	b = appendString(b, r.Error)
	b = appendString(b, r.WorkerID)
	binary.LittleEndian.PutUint32(b[start:], uint32(len(b)-start))
	c.buf, c.last = b, now
	if cap(d.scratch) > chunkMax {
		d.scratch = nil // a large output's buffer is not kept for the next
	}
	d.index[h] = placeOf(d.first+uint64(len(d.chunks)-1), start)
	d.bytes += indexEntryBytes
	d.prune(now)
}

// room returns the newest chunk, or a new one when it has less than need
// bytes free.
func (d *doneResults) room(need int) *doneChunk {
	if n := len(d.chunks); n > 0 {
		// A chunk sized to one record larger than chunkMax takes no
		// other, so every offset stays below chunkMax.
		if c := &d.chunks[n-1]; cap(c.buf) <= chunkMax && cap(c.buf)-len(c.buf) >= need {
			return c
		}
	}
	size := chunkMin
	if n := len(d.chunks); n > 0 {
		size = min(2*cap(d.chunks[n-1].buf), chunkMax)
	}
	size = max(size, need)
	d.chunks = append(d.chunks, doneChunk{buf: make([]byte, 0, size)})
	d.bytes += size
	return &d.chunks[len(d.chunks)-1]
}

// prune forgets the oldest chunks while their newest result is
// rememberResults old or the budget is spent.
func (d *doneResults) prune(now time.Time) {
	for len(d.chunks) > 0 {
		c := &d.chunks[0]
		if now.Sub(c.last) < rememberResults && d.bytes <= rememberResultsBytes {
			return
		}
		for off := 0; off < len(c.buf); {
			n := int(binary.LittleEndian.Uint32(c.buf[off:]))
			h := binary.LittleEndian.Uint64(c.buf[off+4:])
			delete(d.index, h) // add indexes every record it writes, and only it
			d.bytes -= indexEntryBytes
			off += n
		}
		d.bytes -= cap(c.buf)
		d.chunks[0] = doneChunk{}
		d.chunks = d.chunks[1:]
		d.first++
	}
}

// record returns key's record, if it is remembered.
func (d *doneResults) record(key port.AttemptKey) ([]byte, bool) {
	if len(d.index) == 0 {
		return nil, false
	}
	place, ok := d.index[d.hashOf(key)]
	if !ok {
		return nil, false
	}
	c := d.chunks[place>>offsetBits-d.first]
	off := int(place & (1<<offsetBits - 1))
	rec := c.buf[off : off+int(binary.LittleEndian.Uint32(c.buf[off:]))]
	if string(rec[12:28]) != string(key.InstanceID[:]) {
		return nil, false // another attempt with the same hash
	}
	rd := recordReader{b: rec[recordHead:]}
	if string(rd.bytes()) != key.ExecutionID || uint32(rd.uvarint()) != key.Attempt || rd.bad {
		return nil, false
	}
	return rec, true
}

func (d *doneResults) get(key port.AttemptKey) (port.TaskResult, bool) {
	rec, ok := d.record(key)
	if !ok {
		return port.TaskResult{}, false
	}
	flags := rec[recordHead-1]
	rd := recordReader{b: rec[recordHead:]}
	rd.bytes() // the execution id and the attempt: record compared them
	rd.uvarint()
	r := port.TaskResult{AttemptKey: key, OK: flags&flagOK != 0, Lost: flags&flagLost != 0}
	r.StartedAt, r.FinishedAt = clock.FromUnixNanos(rd.varint()), clock.FromUnixNanos(rd.varint())
	if r.OK {
		r.OutputJSON = append([]byte(nil), rd.bytes()...) // not the chunk's memory: the engine may keep it
	}
	r.Error, r.WorkerID = rd.string(), rd.string()
	if rd.bad {
		return port.TaskResult{}, false // written here: cannot happen
	}
	if r.OK {
		v, err := value.Decode(r.OutputJSON)
		if err != nil { // encoded canonically here: cannot happen
			return port.TaskResult{}, false
		}
		r.Output = v
	}
	return r, true
}

func (d *doneResults) has(key port.AttemptKey) bool {
	_, ok := d.record(key)
	return ok
}

func (d *doneResults) hashOf(key port.AttemptKey) uint64 {
	if d.hash != nil {
		return d.hash(key)
	}
	var h maphash.Hash
	h.SetSeed(d.seed)
	_, _ = h.Write(key.InstanceID[:])
	_, _ = h.WriteString(key.ExecutionID)
	var a [4]byte
	binary.LittleEndian.PutUint32(a[:], key.Attempt)
	_, _ = h.Write(a[:])
	return h.Sum64()
}

func appendString[S string | []byte](b []byte, s S) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// recordReader reads a record's varints and strings; bad is set, and
// zero values returned, past its end.
type recordReader struct {
	b   []byte
	bad bool
}

func (r *recordReader) uvarint() uint64 { return readVarint(r, binary.Uvarint) }
func (r *recordReader) varint() int64   { return readVarint(r, binary.Varint) }

func readVarint[T uint64 | int64](r *recordReader, decode func([]byte) (T, int)) T {
	v, n := decode(r.b)
	if n <= 0 {
		r.bad, r.b = true, nil
		return 0
	}
	r.b = r.b[n:]
	return v
}

// bytes returns the next string, in the record's memory.
func (r *recordReader) bytes() []byte {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.bad, r.b = true, nil
		return nil
	}
	s := r.b[:n:n]
	r.b = r.b[n:]
	return s
}

func (r *recordReader) string() string { return string(r.bytes()) }

// tombstones is a FIFO of attempt keys, bounded in age and count.
type tombstones struct {
	at   map[port.AttemptKey]time.Time
	fifo []port.AttemptKey
	head int
}

// maxTombstones bounds the cancelled attempts a Waggler remembers.
const maxTombstones = 100_000

func (t *tombstones) add(key port.AttemptKey, now time.Time) {
	if t.at == nil {
		t.at = map[port.AttemptKey]time.Time{}
	}
	if _, ok := t.at[key]; ok {
		return
	}
	t.at[key] = now
	t.fifo = append(t.fifo, key)
	t.prune(now)
}

func (t *tombstones) has(key port.AttemptKey) bool {
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
		t.fifo = append([]port.AttemptKey(nil), t.fifo[t.head:]...)
		t.head = 0
	}
}
