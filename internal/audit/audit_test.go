package audit

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var t0 = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

// rec is the i-th record of a test: a second after the one before.
func rec(i int) Record {
	return Record{
		Time: t0.Add(time.Duration(i) * time.Second), Node: "n1", TokenName: "alice", Role: "submit", Peer: "127.0.0.1:5000",
		Method: "/robonet.v1.WorkflowService/CancelInstance", Target: fmt.Sprintf("instance=%08d-0000-0000-0000-000000000000", i), Outcome: "ok",
	}
}

func open(t *testing.T, cfg Config) *Writer {
	t.Helper()
	w, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := w.Close(); err != nil {
			t.Error(err)
		}
	})
	return w
}

func size(t *testing.T, p string) int64 {
	t.Helper()
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// TestRotationBound: the file never grows past its bound, the previous
// file is the only other one, and the two hold the newest records, none
// missing between them.
func TestRotationBound(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "audit")
	w := open(t, Config{Path: p, MaxBytes: MinMaxBytes})
	const n = 2000 // about 250 bytes each: 7 files' worth
	for i := range n {
		if err := w.Write(rec(i)); err != nil {
			t.Fatal(err)
		}
		if s := size(t, p); s > MinMaxBytes {
			t.Fatalf("after record %d the file is %d bytes, past its bound %d", i, s, MinMaxBytes)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if strings.Join(names, " ") != "audit audit.1" {
		t.Fatalf("files: %v, want audit and audit.1", names)
	}
	if s := size(t, p+".1"); s > MinMaxBytes || s < MinMaxBytes/2 {
		t.Errorf("audit.1 is %d bytes, want at most %d and most of it used", s, MinMaxBytes)
	}
	got, err := Read(p, time.Time{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	line, _ := json.Marshal(rec(0))
	if perFile := MinMaxBytes / (len(line) + 1); len(got) < perFile+1 || len(got) > 2*perFile {
		t.Fatalf("read %d records back, want the newest of %d that fit in two files", len(got), n)
	}
	first := n - len(got)
	for i, r := range got {
		if want := rec(first + i); r != want {
			t.Fatalf("record %d of %d: %+v, want %+v", i, len(got), r, want)
		}
	}
}

// TestReadSinceAndLimit: since keeps the records made at or after it,
// across the rotated file; limit keeps the last ones; records come back
// sorted by time even when written out of order (a long call's record is
// written when it ends).
func TestReadSinceAndLimit(t *testing.T) {
	p := filepath.Join(t.TempDir(), "audit")
	w := open(t, Config{Path: p, MaxBytes: MinMaxBytes})
	for i := range 400 { // rotates once or twice
		if err := w.Write(rec(i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(p + ".1"); err != nil {
		t.Fatalf("no rotation after 400 records: %v", err)
	}
	late := rec(1000)
	late.Time = t0.Add(390*time.Second + time.Millisecond) // made before the last records, written after them
	if err := w.Write(late); err != nil {
		t.Fatal(err)
	}
	got, err := Read(p, t0.Add(390*time.Second), 0)
	if err != nil {
		t.Fatal(err)
	}
	var targets []string
	for _, r := range got {
		targets = append(targets, strings.TrimSuffix(strings.TrimPrefix(r.Target, "instance="), "-0000-0000-0000-000000000000"))
	}
	want := "00000390 00001000 00000391 00000392 00000393 00000394 00000395 00000396 00000397 00000398 00000399"
	if strings.Join(targets, " ") != want {
		t.Fatalf("since 390 s: %v, want %s", targets, want)
	}
	got, err = Read(p, t0.Add(390*time.Second), 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0] != late || got[1] != rec(398) || got[2] != rec(399) {
		t.Fatalf("limit 3: %+v, want the last three written, by time", got)
	}
	if got, err := Read(filepath.Join(t.TempDir(), "none"), time.Time{}, 0); err != nil || len(got) != 0 {
		t.Fatalf("a missing trail: %v, %v; want nothing", got, err)
	}
}

// TestCutLineAndClipping: a line cut short by a crash is skipped, and the
// next record after reopening starts a line of its own; long fields are
// clipped; writes after Close fail with ErrClosed.
func TestCutLineAndClipping(t *testing.T) {
	p := filepath.Join(t.TempDir(), "audit")
	w := open(t, Config{Path: p})
	if err := w.Write(rec(1)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec(2)); !errors.Is(err, ErrClosed) {
		t.Fatalf("a write after Close: %v, want ErrClosed", err)
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(`{"time":"2026-11-29T10:00:02Z","node":"n1","tok`); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	w = open(t, Config{Path: p})
	long := rec(3)
	long.Target = strings.Repeat("é", MaxFieldBytes)
	if err := w.Write(long); err != nil {
		t.Fatal(err)
	}
	got, err := Read(p, time.Time{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != rec(1) {
		t.Fatalf("read %+v, want records 1 and 3 (the cut line skipped)", got)
	}
	if tg := got[1].Target; len(tg) > MaxFieldBytes || !strings.HasSuffix(tg, "…") || !strings.HasPrefix(tg, "éé") {
		t.Fatalf("a long target is kept as %d bytes (%q…), want at most %d ending with …", len(tg), tg[:8], MaxFieldBytes)
	}
	if _, err := Open(Config{Path: p, MaxBytes: 100}); err == nil {
		t.Fatal("a bound with no room for records was accepted")
	}
}
