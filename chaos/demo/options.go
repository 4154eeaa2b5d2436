package demo

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Options are what a demo's caller chooses (robonode demo's flags).
type Options struct {
	// DataDir holds the nodes' data, a subdirectory per node. Empty: a
	// temporary directory, removed afterwards unless Keep.
	DataDir string
	// Keep keeps the temporary data directory.
	Keep bool
	// Postgres is the DSN of the database the servers of RunMesh share
	// (required there; RunWagglers runs on SQLite).
	Postgres string
	// Logger is the nodes' logger; nil: none. The demos kill nodes on
	// purpose and narrate it: when it logs nothing below warn, the Raft and
	// memberlist libraries' own complaints about the dead peer (every
	// refused vote request, heartbeat and probe) would drown that out, so
	// their entries below DPanic are dropped.
	Logger *zap.Logger
}

// WithDefaults returns a copy of o with a logger that logs nothing if it
// had none.
func (o Options) WithDefaults() Options {
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	return o
}

// ErrReported is returned by a demo that failed and told why on its
// output (a workflow that did not complete is one). Any other error was
// not told: one wrapping node.ErrConfig is a node's configuration the node
// refused, anything else a failure to run the demo at all.
var ErrReported = errors.New("the demo failed (told on its output)")

// dir returns the demo's data directory: o.DataDir, or a temporary one
// that cleanup removes unless o.Keep.
func (o Options) dir() (dir string, cleanup func(), err error) {
	if o.DataDir != "" {
		return o.DataDir, func() {}, nil
	}
	dir, err = os.MkdirTemp("", "robonode-demo-*")
	if err != nil {
		return "", nil, fmt.Errorf("creating a temporary data directory: %w", err)
	}
	if o.Keep {
		return dir, func() {}, nil
	}
	return dir, func() { _ = os.RemoveAll(dir) }, nil
}

// quiet drops the Raft and memberlist libraries' entries below DPanic
// from log when it logs nothing below warn (see Options.Logger).
func quiet(log *zap.Logger) *zap.Logger {
	if log.Core().Enabled(zapcore.InfoLevel) {
		return log
	}
	return log.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
		return quietLibraries{Core: c}
	}))
}

// quietLibraries drops entries below DPanic from the Raft and memberlist
// libraries' loggers (named mesh.raft and mesh.memberlist) and keeps
// everything else.
type quietLibraries struct{ zapcore.Core }

func (q quietLibraries) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if e.Level < zapcore.DPanicLevel && (strings.HasPrefix(e.LoggerName, "mesh.raft") || strings.HasPrefix(e.LoggerName, "mesh.memberlist")) {
		return ce
	}
	return q.Core.Check(e, ce)
}

func (q quietLibraries) With(fields []zapcore.Field) zapcore.Core {
	return quietLibraries{Core: q.Core.With(fields)}
}
