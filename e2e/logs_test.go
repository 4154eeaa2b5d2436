package e2e_test

import (
	"strings"
	"sync"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// failureLogLines bounds what failureLogger keeps of a test's logs.
const failureLogLines = 4000

// failureLogger logs at info level into memory and prints the last
// failureLogLines lines only if the test fails, and warnings and errors as
// they happen: a test that passes stays quiet, one that fails (often a
// timing failure on a loaded CI machine, seen once) tells its story.
func failureLogger(t testing.TB) *zap.Logger {
	t.Helper()
	kept := &lineRing{max: failureLogLines}
	enc := zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig())
	memory := zapcore.NewCore(enc, zapcore.AddSync(kept), zap.InfoLevel)
	now := zapcore.NewCore(enc.Clone(), zapcore.AddSync(testWriter{t}), zap.WarnLevel)
	t.Cleanup(func() {
		if t.Failed() && kept.len() > 0 {
			t.Logf("the last %d lines of the nodes' info logs:\n%s", kept.len(), kept.String())
		}
	})
	return zap.New(zapcore.NewTee(memory, now))
}

// testWriter writes log lines to t.Log.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// lineRing keeps the last max lines written to it.
type lineRing struct {
	mu    sync.Mutex
	max   int
	lines []string
	next  int
}

func (r *lineRing) Write(p []byte) (int, error) {
	line := strings.TrimRight(string(p), "\n")
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.lines) < r.max {
		r.lines = append(r.lines, line)
	} else {
		r.lines[r.next] = line
		r.next = (r.next + 1) % r.max
	}
	return len(p), nil
}

func (r *lineRing) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.lines)
}

func (r *lineRing) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	for i := range r.lines {
		b.WriteString(r.lines[(r.next+i)%len(r.lines)])
		b.WriteByte('\n')
	}
	return b.String()
}
