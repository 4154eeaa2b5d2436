// Package tasklog keeps the logs of task attempts on the node that ran
// them: every line an exec attempt writes to stderr or stdout, or a worker
// program connected to the node sends for its attempt, stamped with its
// stream and time, in bounded files under the node's data directory.
//
// Each attempt's log is a sequence of segments
// (<dir>/<instance>/<execution>.<attempt>.<seq>.log). A segment grows to
// half the per-attempt limit, then the next one starts and only the last
// two are kept, so an attempt holds at most Limits.AttemptBytes on disk and
// always its latest output; the first record of a segment that replaced
// others says how much was dropped. Over all attempts, the node keeps at
// most Limits.TotalBytes (the oldest finished attempts go first) for at
// most Limits.Retention.
//
// Logs are diagnostics, not state: they are written without fsync, lost
// with the node's disk, and never read by the engine. A reader follows an
// attempt that is still writing (Read with follow) until it ends.
package tasklog

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/robonet/robonet/internal/clock"
)

// Defaults of Limits (docs/limits.md).
const (
	DefaultAttemptBytes = 4 << 20
	DefaultTotalBytes   = 1 << 30
	DefaultRetention    = 72 * time.Hour
	// MaxLineBytes splits longer lines into several records.
	MaxLineBytes = 16 << 10
	// minAttemptBytes keeps two segments able to hold a few lines.
	minAttemptBytes = 4 * MaxLineBytes
	// appendBytes bounds the records of one write below half the smallest
	// per-attempt limit (with a line of MaxLineBytes), so no segment
	// outgrows its half.
	appendBytes = 8 << 10
	// sweepEvery bounds how often Create looks for expired logs.
	sweepEvery = time.Minute
	// createWait is how long a follower of an attempt that has not started
	// writing here waits for it to start.
	createWait = 5 * time.Second
)

// Stream says where a line came from.
type Stream byte

// The streams of a record. Note lines are the log's own remarks (output
// dropped, the attempt started again).
const (
	Stdout Stream = 'O'
	Stderr Stream = 'E'
	Note   Stream = 'N'
)

func (s Stream) String() string {
	switch s {
	case Stdout:
		return "stdout"
	case Stderr:
		return "stderr"
	case Note:
		return "note"
	}
	return "stream(" + strconv.Itoa(int(s)) + ")"
}

// Key names one attempt.
type Key struct {
	Instance  uuid.UUID
	Execution string // "task", "task[i]" or "task#i", as engine.AttemptKey
	Attempt   uint32 // 1-based
}

func (k Key) String() string {
	return fmt.Sprintf("%s/%s#%d", k.Instance, k.Execution, k.Attempt)
}

// executionRE is what an execution id looks like: a task name (the spec's
// identifiers) and, for a spread, an index, or for a loop, an iteration.
// Anything else is refused, so a key can never name a path outside the log
// directory.
var executionRE = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}(\[[0-9]{1,9}\]|#[0-9]{1,9})?$`)

// ValidateExecution reports whether exec is an execution id: a task name,
// or name[index] for one instance of a spread task.
func ValidateExecution(exec string) error {
	if !executionRE.MatchString(exec) {
		return fmt.Errorf("task log: %q is not a task (a task name, name[index] for a spread, or name#iteration for a loop)", exec)
	}
	return nil
}

// Validate reports whether k can name a log.
func (k Key) Validate() error {
	if err := ValidateExecution(k.Execution); err != nil {
		return err
	}
	switch {
	case k.Instance == uuid.Nil:
		return errors.New("task log: no instance id")
	case k.Attempt == 0:
		return errors.New("task log: attempts count from 1")
	}
	return nil
}

// Line is one record of a log.
type Line struct {
	Stream Stream
	Time   time.Time
	Text   []byte // without the newline
}

// Limits bound what a node keeps. Zero fields take the defaults.
type Limits struct {
	// AttemptBytes bounds one attempt's log on disk; past it the oldest
	// output is dropped.
	AttemptBytes int64
	// TotalBytes bounds all attempts' logs on this node; past it the
	// oldest finished attempts' logs are removed.
	TotalBytes int64
	// Retention is how long a finished attempt's log is kept.
	Retention time.Duration
}

// WithDefaults fills zero fields.
func (l Limits) WithDefaults() Limits {
	if l.AttemptBytes == 0 {
		l.AttemptBytes = DefaultAttemptBytes
	}
	if l.TotalBytes == 0 {
		l.TotalBytes = DefaultTotalBytes
	}
	if l.Retention == 0 {
		l.Retention = DefaultRetention
	}
	return l
}

func (l Limits) validate() error {
	switch {
	case l.AttemptBytes < minAttemptBytes:
		return fmt.Errorf("task log: the per-attempt limit (%d bytes) must be at least %d bytes", l.AttemptBytes, minAttemptBytes)
	case l.TotalBytes < l.AttemptBytes:
		return fmt.Errorf("task log: the node's limit (%d bytes) must be at least the per-attempt limit (%d bytes)", l.TotalBytes, l.AttemptBytes)
	case l.Retention < 0:
		return fmt.Errorf("task log: retention %s is negative", l.Retention)
	}
	return nil
}

// ErrNotFound: this node holds no log of the attempt.
var ErrNotFound = errors.New("no log of this attempt on this node")

// Store is a node's task logs. Safe for concurrent use.
type Store struct {
	dir    string
	limits Limits
	clock  clock.Clock
	log    *zap.Logger

	mu        sync.Mutex
	attempts  map[Key]*attemptLog
	total     int64         // bytes of all segments
	created   chan struct{} // closed and replaced when an attempt starts writing
	lastSweep time.Time
}

// attemptLog is what the store knows of one attempt's log. Fields are
// guarded by Store.mu.
type attemptLog struct {
	key      Key
	segments []segment // oldest first, at most two
	modified time.Time
	writer   *Writer       // nil once finished (or never written here since the node started)
	changed  chan struct{} // closed and replaced on every write, rotation and close
}

type segment struct {
	seq  int
	size int64
}

// Open opens (creating it if needed) the log directory dir, and takes
// stock of what it holds: logs past the retention, and past the node's
// limit, go at once.
func Open(dir string, limits Limits, clk clock.Clock, log *zap.Logger) (*Store, error) {
	limits = limits.WithDefaults()
	if err := limits.validate(); err != nil {
		return nil, err
	}
	if clk == nil {
		clk = clock.System()
	}
	if log == nil {
		log = zap.NewNop()
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("task log: %w", err)
	}
	s := &Store{dir: dir, limits: limits, clock: clk, log: log,
		attempts: make(map[Key]*attemptLog), created: make(chan struct{})}
	if err := s.scan(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.sweepLocked(clk.Now())
	s.mu.Unlock()
	return s, nil
}

// Limits returns the store's limits, defaults filled.
func (s *Store) Limits() Limits { return s.limits }

// scan indexes the segments already on disk; files it does not recognise
// are left alone.
func (s *Store) scan() error {
	instances, err := os.ReadDir(s.dir)
	if err != nil {
		return fmt.Errorf("task log: %w", err)
	}
	for _, d := range instances {
		id, err := uuid.Parse(d.Name())
		if !d.IsDir() || err != nil {
			continue
		}
		files, err := os.ReadDir(filepath.Join(s.dir, d.Name()))
		if err != nil {
			return fmt.Errorf("task log: %w", err)
		}
		for _, f := range files {
			key, seq, ok := parseName(id, f.Name())
			info, err := f.Info()
			if !ok || err != nil || !info.Mode().IsRegular() {
				continue
			}
			a := s.attempts[key]
			if a == nil {
				a = &attemptLog{key: key, changed: make(chan struct{})}
				s.attempts[key] = a
			}
			a.segments = append(a.segments, segment{seq: seq, size: info.Size()})
			if info.ModTime().After(a.modified) {
				a.modified = info.ModTime()
			}
			s.total += info.Size()
		}
	}
	for _, a := range s.attempts {
		slices.SortFunc(a.segments, func(x, y segment) int { return cmp.Compare(x.seq, y.seq) })
	}
	return nil
}

// fileName is a segment's name within its instance's directory.
func fileName(k Key, seq int) string {
	return k.Execution + "." + strconv.FormatUint(uint64(k.Attempt), 10) + "." + strconv.Itoa(seq) + ".log"
}

// parseName reverses fileName.
func parseName(id uuid.UUID, name string) (Key, int, bool) {
	rest, ok := strings.CutSuffix(name, ".log")
	if !ok {
		return Key{}, 0, false
	}
	i := strings.LastIndexByte(rest, '.')
	if i < 0 {
		return Key{}, 0, false
	}
	seq, err := strconv.Atoi(rest[i+1:])
	rest = rest[:i]
	j := strings.LastIndexByte(rest, '.')
	if err != nil || seq < 0 || j < 0 {
		return Key{}, 0, false
	}
	attempt, err := strconv.ParseUint(rest[j+1:], 10, 32)
	k := Key{Instance: id, Execution: rest[:j], Attempt: uint32(attempt)}
	if err != nil || k.Validate() != nil {
		return Key{}, 0, false
	}
	return k, seq, true
}

func (s *Store) path(k Key, seq int) string {
	return filepath.Join(s.dir, k.Instance.String(), fileName(k, seq))
}

// Create starts (or, for an attempt that runs here again, continues) the
// log of an attempt. The caller writes through the Writer's streams and
// closes it when the attempt ends.
func (s *Store) Create(k Key) (*Writer, error) { return s.create(k, false) }

// CreateOnWrite is Create for an attempt that may write nothing (a worker
// program's, which sends lines only if its action logs): the log's file
// is made by its first write, and a log closed without one is forgotten,
// so quiet attempts leave no empty logs behind. Meanwhile a reader
// following the attempt finds its log, empty, and follows it to its end.
func (s *Store) CreateOnWrite(k Key) (*Writer, error) { return s.create(k, true) }

func (s *Store) create(k Key, onWrite bool) (*Writer, error) {
	if err := k.Validate(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	if now.Sub(s.lastSweep) >= sweepEvery {
		s.sweepLocked(now)
	}
	a := s.attempts[k]
	if a != nil && a.writer != nil {
		return nil, fmt.Errorf("task log: attempt %s is already writing its log on this node", k)
	}
	again := a != nil && len(a.segments) > 0
	if onWrite && !again {
		if a == nil {
			a = &attemptLog{key: k, changed: make(chan struct{})}
			s.attempts[k] = a
		}
		w := &Writer{store: s, att: a}
		a.writer = w
		a.modified = now
		broadcast(&s.created)
		return w, nil
	}
	// After the sweep, which removes directories it empties.
	if err := os.MkdirAll(filepath.Join(s.dir, k.Instance.String()), 0o750); err != nil {
		return nil, fmt.Errorf("task log: %w", err)
	}
	if a == nil {
		a = &attemptLog{key: k, changed: make(chan struct{})}
		s.attempts[k] = a
	}
	seq := 0
	if again {
		seq = a.segments[len(a.segments)-1].seq
	} else {
		a.segments = append(a.segments[:0], segment{seq: 0})
	}
	f, err := os.OpenFile(s.path(k, seq), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		if !again {
			delete(s.attempts, k)
		}
		return nil, fmt.Errorf("task log: %w", err)
	}
	w := &Writer{store: s, att: a, file: f}
	a.writer = w
	a.modified = now
	broadcast(&s.created)
	if again {
		w.noteLocked(now, "the attempt started again on this node (dispatch is at-least-once); its earlier output is above")
	}
	return w, nil
}

// sweepLocked removes finished attempts past the retention, then the
// oldest finished ones while the node is over its limit (down to 90% of
// it, so that one close over the limit does not sweep every time).
func (s *Store) sweepLocked(now time.Time) {
	s.lastSweep = now
	var finished []*attemptLog
	for _, a := range s.attempts {
		if a.writer != nil {
			continue
		}
		if now.Sub(a.modified) > s.limits.Retention {
			s.removeLocked(a)
			continue
		}
		finished = append(finished, a)
	}
	if s.total <= s.limits.TotalBytes {
		return
	}
	slices.SortFunc(finished, func(x, y *attemptLog) int { return x.modified.Compare(y.modified) })
	target := s.limits.TotalBytes / 10 * 9
	for _, a := range finished {
		if s.total <= target {
			break
		}
		s.removeLocked(a)
	}
}

// removeLocked deletes a finished attempt's segments.
func (s *Store) removeLocked(a *attemptLog) {
	for _, seg := range a.segments {
		if err := os.Remove(s.path(a.key, seg.seq)); err != nil && !errors.Is(err, os.ErrNotExist) {
			s.log.Warn("task log: cannot remove a segment", zap.Stringer("attempt", a.key), zap.Error(err))
		}
		s.total -= seg.size
	}
	a.segments = nil
	delete(s.attempts, a.key)
	close(a.changed)
	// The instance's directory goes when it is empty (Remove refuses
	// otherwise); the next Create makes it again.
	_ = os.Remove(filepath.Join(s.dir, a.key.Instance.String()))
}

// Usage is what the store holds.
type Usage struct {
	Attempts int
	Bytes    int64
}

// Usage returns what the store holds now.
func (s *Store) Usage() Usage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Usage{Attempts: len(s.attempts), Bytes: s.total}
}

// Has reports whether this node holds a log of k.
func (s *Store) Has(k Key) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.attempts[k] != nil
}

// Writer writes one attempt's log. Its streams are safe for concurrent
// use (stdout and stderr are copied by different goroutines).
type Writer struct {
	store *Store
	att   *attemptLog

	// Guarded by store.mu: writes are short (one write call per chunk a
	// pipe delivers), and readers need the segment sizes they change.
	file    *os.File
	err     error // the first write error; later writes are dropped
	dropped int64 // bytes rotated away
	closed  bool
	streams []*lineWriter
}

// Stream returns an io.Writer that records what is written to it as lines
// of stream st. It never fails: a log that cannot be written must not fail
// the attempt (the first error is logged, and returned by Close). One
// goroutine writes to a stream; different streams may be written at once.
// Call Stream before writing, not concurrently with Close.
func (w *Writer) Stream(st Stream) io.Writer {
	lw := &lineWriter{w: w, stream: st}
	w.streams = append(w.streams, lw)
	return lw
}

// Close records the streams' last lines without a newline, ends the
// attempt's log and wakes its followers. Call it once nothing writes to the
// streams any more.
func (w *Writer) Close() error {
	for _, lw := range w.streams {
		lw.flushPartial()
	}
	s := w.store
	s.mu.Lock()
	defer s.mu.Unlock()
	if w.closed {
		return w.err
	}
	w.closed = true
	a := w.att
	a.writer = nil
	a.modified = s.clock.Now()
	if w.file == nil { // CreateOnWrite's, never written: no log
		delete(s.attempts, a.key)
	} else if err := w.file.Close(); err != nil && w.err == nil {
		w.err = err
	}
	broadcast(&a.changed)
	if s.total > s.limits.TotalBytes {
		s.sweepLocked(s.clock.Now())
	}
	if w.err != nil {
		return fmt.Errorf("task log of %s: %w", a.key, w.err)
	}
	return nil
}

func broadcast(ch *chan struct{}) {
	close(*ch)
	*ch = make(chan struct{})
}

// appendLocked writes encoded records to the current segment, starting a
// new one first when they would not fit.
func (w *Writer) appendLocked(now time.Time, records []byte) {
	if w.closed || w.err != nil || len(records) == 0 {
		return
	}
	s, a := w.store, w.att
	if w.file == nil {
		w.startLocked()
		if w.err != nil {
			return
		}
	}
	cur := &a.segments[len(a.segments)-1]
	if cur.size > 0 && cur.size+int64(len(records)) > s.limits.AttemptBytes/2 {
		w.rotateLocked(now)
		if w.err != nil {
			return
		}
		cur = &a.segments[len(a.segments)-1]
	}
	n, err := w.file.Write(records)
	cur.size += int64(n)
	s.total += int64(n)
	a.modified = now
	if err != nil {
		w.err = err
		s.log.Warn("task log: cannot write; the rest of this attempt's log is dropped",
			zap.Stringer("attempt", a.key), zap.Error(err))
	}
	broadcast(&a.changed)
}

// startLocked makes the first segment of a CreateOnWrite log.
func (w *Writer) startLocked() {
	s, a := w.store, w.att
	// Under s.mu, as is a sweep that might remove the directory.
	err := os.MkdirAll(filepath.Join(s.dir, a.key.Instance.String()), 0o750)
	var f *os.File
	if err == nil {
		f, err = os.OpenFile(s.path(a.key, 0), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o640)
	}
	if err != nil {
		w.err = err
		s.log.Warn("task log: cannot start; this attempt's log is dropped", zap.Stringer("attempt", a.key), zap.Error(err))
		return
	}
	w.file = f
	a.segments = append(a.segments[:0], segment{seq: 0})
}

// rotateLocked starts the next segment and drops all but the previous one.
func (w *Writer) rotateLocked(now time.Time) {
	s, a := w.store, w.att
	next := a.segments[len(a.segments)-1].seq + 1
	f, err := os.OpenFile(s.path(a.key, next), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o640)
	if err != nil {
		w.err = err
		s.log.Warn("task log: cannot start a new segment; the rest of this attempt's log is dropped",
			zap.Stringer("attempt", a.key), zap.Error(err))
		return
	}
	_ = w.file.Close()
	w.file = f
	for len(a.segments) > 1 {
		old := a.segments[0]
		if err := os.Remove(s.path(a.key, old.seq)); err != nil && !errors.Is(err, os.ErrNotExist) {
			s.log.Warn("task log: cannot remove a segment", zap.Stringer("attempt", a.key), zap.Error(err))
		}
		s.total -= old.size
		w.dropped += old.size
		a.segments = a.segments[1:]
	}
	a.segments = append(a.segments, segment{seq: next})
	if w.dropped > 0 {
		w.noteLocked(now, fmt.Sprintf("earlier output dropped (%d bytes): an attempt's log keeps its last %d bytes on its node", w.dropped, s.limits.AttemptBytes))
	}
}

// noteLocked records a remark of the log itself.
func (w *Writer) noteLocked(now time.Time, text string) {
	w.appendLocked(now, appendRecord(nil, Note, now, []byte(text)))
}

// appendRecord encodes one line: "<stream> <unix ns> <text>\n".
func appendRecord(b []byte, st Stream, t time.Time, text []byte) []byte {
	b = append(b, byte(st), ' ')
	b = strconv.AppendInt(b, t.UnixNano(), 10)
	b = append(b, ' ')
	b = append(b, text...)
	return append(b, '\n')
}

// parseRecord reverses appendRecord (line without its newline).
func parseRecord(line []byte) (Line, bool) {
	if len(line) < 4 || line[1] != ' ' {
		return Line{}, false
	}
	rest := line[2:]
	sp := bytes.IndexByte(rest, ' ')
	if sp <= 0 {
		return Line{}, false
	}
	ns, err := strconv.ParseInt(string(rest[:sp]), 10, 64)
	if err != nil {
		return Line{}, false
	}
	return Line{Stream: Stream(line[0]), Time: time.Unix(0, ns).UTC(), Text: rest[sp+1:]}, true
}

// lineWriter turns a byte stream into records, a line each (long lines
// split at MaxLineBytes).
type lineWriter struct {
	w       *Writer
	stream  Stream
	partial []byte
	buf     []byte
}

func (lw *lineWriter) Write(p []byte) (int, error) {
	n := len(p)
	now := lw.w.store.clock.Now()
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			room := MaxLineBytes - len(lw.partial)
			if len(p) < room {
				lw.partial = append(lw.partial, p...)
				break
			}
			lw.partial = append(lw.partial, p[:room]...)
			p = p[room:]
		} else {
			lw.partial = append(lw.partial, p[:i]...)
			p = p[i+1:]
		}
		line := lw.partial
		for len(line) > MaxLineBytes { // a newline-ended line over the limit
			lw.record(now, line[:MaxLineBytes])
			line = line[MaxLineBytes:]
		}
		lw.record(now, line)
		lw.partial = lw.partial[:0]
	}
	lw.append(now)
	return n, nil
}

// record buffers one record, writing the buffer once it holds appendBytes.
func (lw *lineWriter) record(now time.Time, text []byte) {
	lw.buf = appendRecord(lw.buf, lw.stream, now, text)
	if len(lw.buf) >= appendBytes {
		lw.append(now)
	}
}

// append writes the records buffered so far.
func (lw *lineWriter) append(now time.Time) {
	if len(lw.buf) == 0 {
		return
	}
	s := lw.w.store
	s.mu.Lock()
	lw.w.appendLocked(now, lw.buf)
	s.mu.Unlock()
	lw.buf = lw.buf[:0]
}

// flushPartial records a last line without a newline.
func (lw *lineWriter) flushPartial() {
	if len(lw.partial) == 0 {
		return
	}
	s := lw.w.store
	now := s.clock.Now()
	rec := appendRecord(nil, lw.stream, now, lw.partial)
	lw.partial = lw.partial[:0]
	s.mu.Lock()
	lw.w.appendLocked(now, rec)
	s.mu.Unlock()
}

// ReadOptions say what Read delivers.
type ReadOptions struct {
	// Follow keeps reading while the attempt writes, until it ends or ctx
	// does.
	Follow bool
	// Batch bounds the lines of one call of the callback (default 256).
	Batch int
}

// Read delivers the attempt's log, oldest line first, in batches to fn (which
// must not keep the slice; the lines' Text it may keep); a non-nil error
// from fn stops it and is returned. Without a log of k it
// returns ErrNotFound (with Follow, after waiting a little for an attempt
// that is about to start writing here).
func (s *Store) Read(ctx context.Context, k Key, opt ReadOptions, fn func([]Line) error) error {
	if err := k.Validate(); err != nil {
		return err
	}
	if opt.Batch <= 0 {
		opt.Batch = 256
	}
	r := &reader{s: s, k: k, opt: opt, fn: fn, seq: -1}
	if err := r.waitCreated(ctx); err != nil {
		return err
	}
	defer r.closeFile()
	for {
		more, err := r.next(ctx)
		if err != nil || !more {
			return err
		}
	}
}

type reader struct {
	s    *Store
	k    Key
	opt  ReadOptions
	fn   func([]Line) error
	seq  int // segment being read; -1 before the first
	file *os.File
	br   *bufio.Reader
	line []byte // a record read in part
	out  []Line
}

// waitCreated waits (with Follow, up to createWait) for the attempt's log
// to exist here.
func (r *reader) waitCreated(ctx context.Context) error {
	s := r.s
	var deadline clock.Timer
	for {
		s.mu.Lock()
		a, created := s.attempts[r.k], s.created
		s.mu.Unlock()
		if a != nil {
			return nil
		}
		if !r.opt.Follow {
			return ErrNotFound
		}
		if deadline == nil {
			deadline = s.clock.NewTimer(createWait)
			defer deadline.Stop()
		}
		select {
		case <-created:
		case <-deadline.C():
			return ErrNotFound
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (r *reader) closeFile() {
	if r.file != nil {
		_ = r.file.Close()
		r.file = nil
	}
}

// next reads what is there; it reports false when the log is done (or,
// without Follow, read to its current end).
func (r *reader) next(ctx context.Context) (bool, error) {
	// Look first, read after: a write after the look closes changed, and
	// every write before it is in the file for the drain to find.
	s := r.s
	s.mu.Lock()
	a := s.attempts[r.k]
	var segs []segment
	var writing bool
	var changed chan struct{}
	if a != nil {
		segs, writing, changed = slices.Clone(a.segments), a.writer != nil, a.changed
	}
	s.mu.Unlock()
	if err := r.drain(); err != nil {
		return false, err
	}
	// A later segment: the writer moved on after its last write to this
	// one, which the drain read. Move on too, noting segments dropped
	// meanwhile.
	if i := slices.IndexFunc(segs, func(g segment) bool { return g.seq > r.seq }); i >= 0 {
		r.closeFile()
		f, err := os.Open(s.path(r.k, segs[i].seq))
		if errors.Is(err, os.ErrNotExist) {
			return true, nil // rotated away just now: look again
		}
		if err != nil {
			return false, fmt.Errorf("task log: %w", err)
		}
		if r.seq >= 0 && segs[i].seq > r.seq+1 {
			r.out = append(r.out, Line{Stream: Note, Time: s.clock.Now(),
				Text: []byte("output dropped while following: the log moved on faster than it was read")})
		}
		r.seq, r.file = segs[i].seq, f
		r.br = bufio.NewReaderSize(f, 64<<10)
		r.line = r.line[:0]
		return true, nil
	}
	if err := r.flush(); err != nil {
		return false, err
	}
	if !r.opt.Follow || !writing {
		return false, nil
	}
	select {
	case <-changed:
		return true, nil
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// drain reads the open segment to its current end.
func (r *reader) drain() error {
	if r.br == nil {
		return nil
	}
	for {
		chunk, err := r.br.ReadSlice('\n')
		r.line = append(r.line, chunk...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil // a partial record stays in r.line until the rest arrives
			}
			return fmt.Errorf("task log: %w", err)
		}
		if l, ok := parseRecord(r.line[:len(r.line)-1]); ok {
			l.Text = bytes.Clone(l.Text)
			r.out = append(r.out, l)
		}
		r.line = r.line[:0]
		if len(r.out) >= r.opt.Batch {
			if err := r.flush(); err != nil {
				return err
			}
		}
	}
}

// flush hands the lines read so far to fn.
func (r *reader) flush() error {
	if len(r.out) == 0 {
		return nil
	}
	err := r.fn(r.out)
	r.out = r.out[:0]
	return err
}
