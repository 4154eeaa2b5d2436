package tasklog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"

	"github.com/robonet/robonet/internal/clock/clocktest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func newStore(t *testing.T, limits Limits) (*Store, *clocktest.Fake) {
	t.Helper()
	clk := clocktest.New()
	s, err := Open(t.TempDir(), limits, clk, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	return s, clk
}

func key(task string, attempt uint32) Key {
	return Key{Instance: uuid.MustParse("0196a5c0-0000-7000-8000-000000000001"), Execution: task, Attempt: attempt}
}

// readAll reads k's log to its current end.
func readAll(t *testing.T, s *Store, k Key) []Line {
	t.Helper()
	var out []Line
	err := s.Read(context.Background(), k, ReadOptions{Batch: 7}, func(ls []Line) error {
		out = append(out, ls...)
		return nil
	})
	if err != nil {
		t.Fatalf("read %s: %v", k, err)
	}
	return out
}

func texts(lines []Line) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = l.Stream.String()[:3] + ":" + string(l.Text)
	}
	return out
}

// diskBytes sums the sizes of the files under dir.
func diskBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		n += info.Size()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestLinesOfBothStreamsInOrder(t *testing.T) {
	s, clk := newStore(t, Limits{})
	k := key("build", 1)
	w, err := s.Create(k)
	if err != nil {
		t.Fatal(err)
	}
	out, errw := w.Stream(Stdout), w.Stream(Stderr)
	fmt.Fprint(out, "first line\nsecond ")
	clk.Advance(time.Second)
	fmt.Fprint(errw, "warning: disk almost full\n")
	fmt.Fprint(out, "half\n\nno newline at the end")
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got := texts(readAll(t, s, k))
	want := []string{"std:first line", "std:warning: disk almost full", "std:second half", "std:", "std:no newline at the end"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("got %q, want %q", got, want)
	}
	lines := readAll(t, s, k)
	if lines[0].Stream != Stdout || lines[1].Stream != Stderr {
		t.Fatalf("streams: %v %v", lines[0].Stream, lines[1].Stream)
	}
	if !lines[1].Time.Equal(lines[0].Time.Add(time.Second)) {
		t.Fatalf("times %v and %v: the second line was written a second later", lines[0].Time, lines[1].Time)
	}
	if u := s.Usage(); u.Attempts != 1 || u.Bytes != diskBytes(t, s.dir) {
		t.Fatalf("usage %+v, disk %d", u, diskBytes(t, s.dir))
	}
}

func TestLongLinesAreSplit(t *testing.T) {
	s, _ := newStore(t, Limits{})
	k := key("dump", 1)
	w, _ := s.Create(k)
	long := bytes.Repeat([]byte("x"), 2*MaxLineBytes+5)
	_, _ = w.Stream(Stdout).Write(append(long, '\n'))
	_ = w.Close()
	lines := readAll(t, s, k)
	if len(lines) != 3 || len(lines[0].Text) != MaxLineBytes || len(lines[2].Text) != 5 {
		t.Fatalf("got %d lines", len(lines))
	}
}

// An attempt that writes far more than its limit keeps its latest output,
// stays within the limit on disk, and says that earlier output was dropped.
func TestAttemptLogIsBoundedAndKeepsTheEnd(t *testing.T) {
	limits := Limits{AttemptBytes: minAttemptBytes}
	s, _ := newStore(t, limits)
	k := key("chatty", 2)
	w, _ := s.Create(k)
	errw := w.Stream(Stderr)
	const n = 20000
	for i := range n {
		fmt.Fprintf(errw, "line %06d\n", i)
		if disk := diskBytes(t, s.dir); i%1000 == 0 && disk > limits.AttemptBytes {
			t.Fatalf("after %d lines the attempt holds %d bytes on disk, over its %d", i, disk, limits.AttemptBytes)
		}
	}
	_ = w.Close()
	if disk := diskBytes(t, s.dir); disk > limits.AttemptBytes || s.Usage().Bytes != disk {
		t.Fatalf("disk %d, usage %d, limit %d", disk, s.Usage().Bytes, limits.AttemptBytes)
	}
	lines := readAll(t, s, k)
	if lines[0].Stream != Note || !strings.Contains(string(lines[0].Text), "earlier output dropped") {
		t.Fatalf("first line %q: want the note of dropped output", lines[0].Text)
	}
	if last := string(lines[len(lines)-1].Text); last != fmt.Sprintf("line %06d", n-1) {
		t.Fatalf("last line %q", last)
	}
	// What is kept is a contiguous end of the output (notes aside).
	prev := -1
	for _, l := range lines {
		if l.Stream == Note {
			continue
		}
		var i int
		if _, err := fmt.Sscanf(string(l.Text), "line %d", &i); err != nil {
			t.Fatalf("line %q: %v", l.Text, err)
		}
		if prev >= 0 && i != prev+1 {
			t.Fatalf("line %d follows %d", i, prev)
		}
		prev = i
	}
	if kept := len(lines); kept < 1000 {
		t.Fatalf("only %d lines kept of a %d-byte limit", kept, limits.AttemptBytes)
	}
}

// Past the node's limit the oldest finished attempts go; one still writing
// stays.
func TestNodeLimitRemovesOldestFinished(t *testing.T) {
	limits := Limits{AttemptBytes: minAttemptBytes, TotalBytes: 3 * minAttemptBytes}
	s, clk := newStore(t, limits)
	running, _ := s.Create(key("running", 1))
	fmt.Fprintln(running.Stream(Stdout), "still here")
	filler := strings.Repeat("y", 1000)
	for i := range 8 {
		w, err := s.Create(key(fmt.Sprintf("t%d", i), 1))
		if err != nil {
			t.Fatal(err)
		}
		for range 30 {
			fmt.Fprintln(w.Stream(Stdout), filler)
		}
		clk.Advance(time.Second)
		_ = w.Close()
		if u := s.Usage(); u.Bytes > limits.TotalBytes {
			t.Fatalf("after attempt %d the node holds %d bytes, over its %d", i, u.Bytes, limits.TotalBytes)
		}
	}
	if !s.Has(key("running", 1)) || !s.Has(key("t7", 1)) {
		t.Fatal("the running attempt and the newest finished one must stay")
	}
	if s.Has(key("t0", 1)) {
		t.Fatal("the oldest finished attempt should have gone")
	}
	_ = running.Close()
	if s.Usage().Bytes != diskBytes(t, s.dir) {
		t.Fatalf("usage %d, disk %d", s.Usage().Bytes, diskBytes(t, s.dir))
	}
}

// Logs outlive a restart of the node, and expire after the retention.
func TestReopenAndRetention(t *testing.T) {
	dir := t.TempDir()
	clk := clocktest.New()
	limits := Limits{Retention: time.Hour}
	s, err := Open(dir, limits, clk, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	old, fresh := key("old", 1), key("fresh", 3)
	w, _ := s.Create(old)
	fmt.Fprintln(w.Stream(Stderr), "from before the restart")
	_ = w.Close()
	clk.Advance(50 * time.Minute)
	w, _ = s.Create(fresh)
	fmt.Fprintln(w.Stream(Stderr), "newer")
	_ = w.Close()

	// Reopened: both are there, read from disk (the files' times are
	// real, so the fake clock is moved to them).
	clk2 := clocktest.New()
	s2, err := Open(dir, limits, clk2, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if got := texts(readAll(t, s2, old)); len(got) != 1 || got[0] != "std:from before the restart" {
		t.Fatalf("after reopening: %q", got)
	}
	if s2.Usage() != s.Usage() {
		t.Fatalf("reopened usage %+v, was %+v", s2.Usage(), s.Usage())
	}
	clk2.Advance(time.Since(clk2.Now()) + 2*time.Hour) // the files carry real times
	if _, err := s2.Create(key("next", 1)); err != nil {
		t.Fatal(err)
	}
	if s2.Has(old) || s2.Has(fresh) {
		t.Fatal("logs past the retention should have been removed")
	}
	if _, err := os.Stat(filepath.Join(dir, old.Instance.String(), fileName(old, 0))); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the expired file is still there: %v", err)
	}
}

func TestStartedAgainContinues(t *testing.T) {
	s, _ := newStore(t, Limits{})
	k := key("flaky", 1)
	w, _ := s.Create(k)
	fmt.Fprintln(w.Stream(Stdout), "first run")
	if _, err := s.Create(k); err == nil {
		t.Fatal("a second writer of a writing attempt must be refused")
	}
	_ = w.Close()
	w, _ = s.Create(k)
	fmt.Fprintln(w.Stream(Stdout), "second run")
	_ = w.Close()
	got := texts(readAll(t, s, k))
	if len(got) != 3 || got[0] != "std:first run" || !strings.Contains(got[1], "started again") || got[2] != "std:second run" {
		t.Fatalf("got %q", got)
	}
}

// A log made on first write: a quiet attempt's reads as empty while it
// runs and leaves nothing on disk or in the store; one that writes has a
// log like Create's.
func TestCreateOnWrite(t *testing.T) {
	s, _ := newStore(t, Limits{})
	quiet := key("quiet", 1)
	w, err := s.CreateOnWrite(quiet)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateOnWrite(quiet); err == nil {
		t.Fatal("a second writer of a writing attempt must be refused")
	}
	if got := readAll(t, s, quiet); len(got) != 0 {
		t.Fatalf("a quiet attempt's log: %q", texts(got))
	}
	if n := diskBytes(t, s.dir); n != 0 {
		t.Fatalf("a quiet attempt's log takes %d bytes on disk", n)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if s.Has(quiet) || s.Usage() != (Usage{}) {
		t.Fatalf("a quiet attempt left a log: %+v", s.Usage())
	}

	talks := key("talks", 1)
	w, err = s.CreateOnWrite(talks)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(w.Stream(Stderr), "hello")
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if got := texts(readAll(t, s, talks)); len(got) != 1 || got[0] != "std:hello" {
		t.Fatalf("got %q", got)
	}
	if s.Usage().Attempts != 1 || diskBytes(t, s.dir) != s.Usage().Bytes {
		t.Fatalf("usage %+v, %d bytes on disk", s.Usage(), diskBytes(t, s.dir))
	}
	// Run again on this node: it continues the log, as Create does.
	w, _ = s.CreateOnWrite(talks)
	_ = w.Close()
	if got := texts(readAll(t, s, talks)); len(got) != 2 || !strings.Contains(got[1], "started again") {
		t.Fatalf("got %q", got)
	}
}

func TestFollow(t *testing.T) {
	s, _ := newStore(t, Limits{AttemptBytes: minAttemptBytes})
	k := key("slow", 1)
	var mu sync.Mutex
	var got []string
	lines := make(chan struct{}, 1)
	done := make(chan error, 1)
	go func() {
		done <- s.Read(context.Background(), k, ReadOptions{Follow: true}, func(ls []Line) error {
			mu.Lock()
			for _, l := range ls {
				got = append(got, string(l.Text))
			}
			mu.Unlock()
			select { // a wake-up for waitFor; one pending is enough
			case lines <- struct{}{}:
			default:
			}
			return nil
		})
	}()
	// The follower was there before the attempt started writing.
	w, err := s.Create(k)
	if err != nil {
		t.Fatal(err)
	}
	out := w.Stream(Stdout)
	waitFor := func(n int) {
		t.Helper()
		timeout := time.After(10 * time.Second)
		for {
			mu.Lock()
			have := len(got)
			mu.Unlock()
			if have >= n {
				return
			}
			select {
			case <-lines:
			case <-timeout:
				t.Fatalf("followed %d lines, want %d", have, n)
			}
		}
	}
	fmt.Fprintln(out, "one")
	waitFor(1)
	fmt.Fprintln(out, "two")
	waitFor(2)
	// Enough to rotate segments a few times while following.
	for i := range 5000 {
		fmt.Fprintf(out, "bulk %04d\n", i)
	}
	fmt.Fprint(out, "last")
	select {
	case err := <-done:
		t.Fatalf("the follower stopped while the attempt was writing: %v", err)
	default:
	}
	_ = w.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if got[0] != "one" || got[1] != "two" || got[len(got)-1] != "last" {
		t.Fatalf("followed %d lines: first %q, last %q", len(got), got[:2], got[len(got)-1])
	}
	// Every bulk line arrived, or a note says what was dropped.
	noted := false
	for _, g := range got {
		noted = noted || strings.Contains(g, "dropped")
	}
	if len(got) != 5003 && !noted {
		t.Fatalf("followed %d of 5003 lines and nothing says why", len(got))
	}
}

func TestNotFound(t *testing.T) {
	s, clk := newStore(t, Limits{})
	k := key("never", 1)
	if err := s.Read(context.Background(), k, ReadOptions{}, func([]Line) error { return nil }); !errors.Is(err, ErrNotFound) {
		t.Fatalf("got %v, want ErrNotFound", err)
	}
	done := make(chan error, 1)
	go func() {
		done <- s.Read(context.Background(), k, ReadOptions{Follow: true}, func([]Line) error { return nil })
	}()
	clk.AdvanceToTimer(t, createWait)
	if err := <-done; !errors.Is(err, ErrNotFound) {
		t.Fatalf("following an attempt that never starts: got %v, want ErrNotFound after the wait", err)
	}
}

func TestKeysNeverEscapeTheDirectory(t *testing.T) {
	s, _ := newStore(t, Limits{})
	for _, exec := range []string{"../x", "a/b", "", "Task", "t[1", "t[-1]", "t.1"} {
		k := Key{Instance: uuid.New(), Execution: exec, Attempt: 1}
		if _, err := s.Create(k); err == nil {
			t.Errorf("execution %q was accepted", exec)
		}
		if err := s.Read(context.Background(), k, ReadOptions{}, func([]Line) error { return nil }); err == nil || errors.Is(err, ErrNotFound) {
			t.Errorf("reading execution %q: got %v, want a refusal", exec, err)
		}
	}
	for _, k := range []Key{key("fan", 3), key("fan[12]", 100)} {
		got, seq, ok := parseName(k.Instance, fileName(k, 7))
		if !ok || got != k || seq != 7 {
			t.Errorf("%s: parsed back %v %d %v", k, got, seq, ok)
		}
	}
}
