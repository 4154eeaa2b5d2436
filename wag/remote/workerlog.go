package remote

import (
	"io"
	"strings"
	"sync"

	"go.uber.org/zap"

	"github.com/robonet/robonet/wag"
	"github.com/robonet/robonet/wag/tasklog"
)

// MaxWorkerLogLine bounds one line of a WorkerLog (worker.proto): a
// longer one is clipped, saying how much was cut.
const MaxWorkerLogLine = 4 << 10

// workerLogStream reads a WorkerLog's stream.
func workerLogStream(s string) (tasklog.Stream, bool) {
	switch s {
	case "stdout":
		return tasklog.Stdout, true
	case "stderr":
		return tasklog.Stderr, true
	}
	return 0, false
}

// attemptLog keeps the lines a program sends for one of its attempts in
// the node's task logs, where an exec attempt's output goes: the handler
// opens it as the attempt starts and closes it when it ends, the stream's
// loop writes between. Its file is made by the first line, so attempts
// whose program sends none leave no log. Safe for concurrent use; nil
// keeps nothing.
type attemptLog struct {
	mu      sync.Mutex
	w       *tasklog.Writer // nil once closed
	streams map[tasklog.Stream]io.Writer
}

// openAttemptLog starts the log of call's attempt in store; nil when the
// node keeps no task logs, or cannot keep this one (said in the attempt's
// logger: a log must not fail its attempt).
func openAttemptLog(store *tasklog.Store, call *wag.Call) *attemptLog {
	if store == nil {
		return nil
	}
	w, err := store.CreateOnWrite(tasklog.Key{Instance: call.Key.InstanceID, Execution: call.Key.ExecutionID, Attempt: call.Key.Attempt})
	if err != nil {
		call.Logger().Warn("the attempt runs without a log: the lines its program sends are dropped", zap.Error(err))
		return nil
	}
	return &attemptLog{w: w, streams: make(map[tasklog.Stream]io.Writer, 2)}
}

// write records lines of st, each clipped to MaxWorkerLogLine (a line
// holding line ends becomes several, as in an exec attempt's output). It
// reports false, recording nothing, once the log is closed.
func (l *attemptLog) write(st tasklog.Stream, lines []string) bool {
	if l == nil {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.w == nil {
		return false
	}
	out := l.streams[st]
	if out == nil {
		out = l.w.Stream(st)
		l.streams[st] = out
	}
	var b strings.Builder
	for _, line := range lines {
		b.WriteString(wag.FitText(line, MaxWorkerLogLine))
		b.WriteByte('\n')
	}
	_, _ = io.WriteString(out, b.String()) // never fails: a log's trouble is logged by the store
	return true
}

// close ends the log; later lines are refused.
func (l *attemptLog) close() error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	w := l.w
	l.w = nil
	if w == nil {
		return nil
	}
	return w.Close()
}
