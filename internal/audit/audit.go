// Package audit keeps a node's audit trail: a record of each call that
// changes something — when it was made, by which token (its name, never
// the token), of what role, from which address, which method on what
// target, and how it ended — as JSON lines in a bounded file, and reads
// them back.
//
// Bound. When a record would take the file past Config.MaxBytes, the file
// becomes FILE.1 (replacing the one before) and a new FILE starts: the
// trail keeps the newest records and takes at most twice the bound on
// disk. Each field is clipped to MaxFieldBytes, so no record can break
// the bound.
//
// Durability. A record is appended with one write (O_APPEND) before the
// call it records returns, and not synced: a crash of the process loses
// no record of a call that returned, a crash of the machine may lose the
// last ones the operating system had not written yet. A line cut short by
// a crash is skipped by Read, and the next record starts a line of its
// own.
//
// What a record holds is the caller's business (package node decides):
// names and ids, never tokens, inputs or payloads.
package audit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"sync"
	"time"
	"unicode/utf8"
)

// Defaults and bounds of Config.
const (
	// DefaultMaxBytes is the default bound of the file (Config.MaxBytes):
	// with the previous file, the trail takes at most 32 MiB.
	DefaultMaxBytes = 16 << 20
	// MinMaxBytes is the least bound: room for many records of the
	// largest size.
	MinMaxBytes = 64 << 10
	// MaxFieldBytes bounds each string field of a record; a longer value
	// is clipped, ending with "…".
	MaxFieldBytes = 512
)

// ErrClosed is the error of a write after Close (a call that ended while
// the node stopped).
var ErrClosed = errors.New("audit: the trail is closed")

// Record is one entry of the trail.
type Record struct {
	// Time is when the call was made (for a stream, when it opened).
	Time time.Time `json:"time"`
	// Node is the node that recorded it.
	Node string `json:"node"`
	// TokenName names the caller's token ("anonymous" on a node without
	// tokens); empty when the call presented no valid token.
	TokenName string `json:"token_name"`
	// Role is the token's role; empty when there was no valid token.
	Role string `json:"role"`
	// Peer is the caller's address (host:port).
	Peer string `json:"peer"`
	// Method is the full gRPC method (/robonet.v1.WorkflowService/
	// SubmitWorkflow), or the name of what the node did by itself
	// (ReloadTokens).
	Method string `json:"method"`
	// Target is what the call acted on, as key=value pairs (instance=…,
	// workflow=name@version, schedule=…).
	Target string `json:"target"`
	// Outcome is "ok", or the status code and its message
	// (PERMISSION_DENIED: …).
	Outcome string `json:"outcome"`
	// DurationMS is how long the call took, in milliseconds (a stream:
	// how long it was open).
	DurationMS float64 `json:"duration_ms"`
}

// clipped returns r with every string field at most MaxFieldBytes and
// its time in UTC.
func (r Record) clipped() Record {
	r.Time = r.Time.UTC()
	for _, f := range []*string{&r.Node, &r.TokenName, &r.Role, &r.Peer, &r.Method, &r.Target, &r.Outcome} {
		*f = Clip(*f, MaxFieldBytes)
	}
	return r
}

// Clip returns s cut to at most n bytes on a rune boundary, ending with
// "…" when it was cut.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const ellipsis = "…"
	cut := max(n-len(ellipsis), 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + ellipsis
}

// Config says where the trail is and how large it may grow.
type Config struct {
	// Path is the file; the one before it is Path + ".1".
	Path string
	// MaxBytes bounds the file: a record that would take it past this
	// rotates it first. Default: DefaultMaxBytes; at least MinMaxBytes.
	MaxBytes int64
}

// WithDefaults returns a copy of c with defaults filled in.
func (c Config) WithDefaults() Config {
	if c.MaxBytes == 0 {
		c.MaxBytes = DefaultMaxBytes
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.Path == "":
		return errors.New("audit: no file")
	case c.MaxBytes < MinMaxBytes:
		return fmt.Errorf("audit: a bound of %d bytes leaves no room: at least %d", c.MaxBytes, MinMaxBytes)
	}
	return nil
}

// Writer appends records to the trail; it is safe for concurrent use.
type Writer struct {
	cfg  Config
	mu   sync.Mutex
	f    *os.File // nil once closed
	size int64
}

// Open opens (or creates) the trail's file for appending.
func Open(cfg Config) (*Writer, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	w := &Writer{cfg: cfg}
	if err := w.open(); err != nil {
		return nil, err
	}
	return w, nil
}

// open opens the file and, when its last line was cut short (a crash in
// the middle of a write), ends that line so the next record starts its
// own.
func (w *Writer) open() error {
	f, err := os.OpenFile(w.cfg.Path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("audit: opening the trail: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return fmt.Errorf("audit: opening the trail: %w", err)
	}
	w.f, w.size = f, st.Size()
	if w.size > 0 {
		last := make([]byte, 1)
		if _, err := f.ReadAt(last, w.size-1); err != nil {
			_ = f.Close()
			return fmt.Errorf("audit: reading the trail's end: %w", err)
		}
		if last[0] != '\n' {
			n, err := f.Write([]byte{'\n'})
			w.size += int64(n)
			if err != nil {
				_ = f.Close()
				return fmt.Errorf("audit: ending a cut line: %w", err)
			}
		}
	}
	return nil
}

// Write appends r (its string fields clipped to MaxFieldBytes), rotating
// the file first when r would take it past the bound.
func (w *Writer) Write(r Record) error {
	line, err := json.Marshal(r.clipped())
	if err != nil {
		return fmt.Errorf("audit: encoding a record: %w", err)
	}
	line = append(line, '\n')
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		return ErrClosed
	}
	if w.size > 0 && w.size+int64(len(line)) > w.cfg.MaxBytes {
		if err := w.rotate(); err != nil {
			return err
		}
	}
	n, err := w.f.Write(line)
	w.size += int64(n)
	if err != nil {
		return fmt.Errorf("audit: writing a record: %w", err)
	}
	return nil
}

// rotate makes the file the previous one and starts a new one. If the
// rename fails the file stays as it was (growing past its bound until a
// rotation succeeds).
func (w *Writer) rotate() error {
	if err := os.Rename(w.cfg.Path, w.cfg.Path+".1"); err != nil {
		return fmt.Errorf("audit: rotating the trail: %w", err)
	}
	old := w.f
	if err := w.open(); err != nil {
		w.f = old // still open: writes go on to the renamed file
		return err
	}
	if err := old.Close(); err != nil {
		return fmt.Errorf("audit: closing the previous file: %w", err)
	}
	return nil
}

// Close closes the file; writes after it fail with ErrClosed. It is
// idempotent.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		return nil
	}
	err := w.f.Close()
	w.f = nil
	if err != nil {
		return fmt.Errorf("audit: closing the trail: %w", err)
	}
	return nil
}

// maxLineBytes bounds a line Read takes: far above any record Write
// makes; a longer line is not a record.
const maxLineBytes = 64 << 10

// Read returns the records of the trail at path — its previous file, then
// itself — whose time is at or after since (the zero time: all), at most
// limit of them (<= 0: all): the last ones written. They are sorted by
// time, oldest first. A missing file reads as empty; lines that are not
// records (cut short by a crash) are skipped.
func Read(path string, since time.Time, limit int) ([]Record, error) {
	var ring []Record
	next := 0 // where the next record goes once ring holds limit
	keep := func(r Record) {
		if limit <= 0 || len(ring) < limit {
			ring = append(ring, r)
			return
		}
		ring[next] = r
		next = (next + 1) % limit
	}
	for _, p := range []string{path + ".1", path} {
		if err := readFile(p, since, keep); err != nil {
			return nil, err
		}
	}
	// In the order written, then by time (a record's time is when its
	// call was made, so a long call's comes after later ones).
	out := slices.Concat(ring[next:], ring[:next])
	slices.SortStableFunc(out, func(a, b Record) int { return a.Time.Compare(b.Time) })
	return out, nil
}

// readFile passes keep each record of the file at p at or after since.
func readFile(p string, since time.Time, keep func(Record)) error {
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("audit: reading the trail: %w", err)
	}
	defer func() { _ = f.Close() }()
	br := bufio.NewReaderSize(f, 64<<10)
	for {
		line, err := readLine(br)
		if len(line) > 0 {
			var r Record
			if json.Unmarshal(line, &r) == nil && !r.Time.IsZero() && !r.Time.Before(since) {
				keep(r)
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("audit: reading %s: %w", p, err)
		}
	}
}

// readLine returns the next line without its newline; a line longer than
// maxLineBytes comes back empty (it is skipped whole).
func readLine(br *bufio.Reader) ([]byte, error) {
	var buf []byte
	tooLong := false
	for {
		chunk, err := br.ReadSlice('\n')
		if !tooLong {
			if len(buf)+len(chunk) > maxLineBytes {
				tooLong, buf = true, nil
			} else {
				buf = append(buf, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return bytes.TrimRight(buf, "\n"), err
	}
}
