package mesh

import (
	"bytes"
	"fmt"
	"io"
	"log"
	"strings"

	"github.com/hashicorp/go-hclog"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/robonet/robonet/internal/loggate"
)

// The libraries log through their own interfaces: memberlist through a
// *log.Logger with "[LEVEL]" prefixes, Raft through hclog. Both are routed
// into the mesh's zap logger here, so that nothing reaches stderr and tests
// see library logs in zaptest output. Library chatter below warnings
// (elections, joins, snapshots: expected outcomes) goes to Debug.

// memberlistLogger returns a standard logger whose lines go to z until
// gate closes (nil: always).
func memberlistLogger(z *zap.Logger, gate *loggate.Gate) *log.Logger {
	return log.New(&levelWriter{z: z.WithOptions(zap.AddCallerSkip(3)), gate: gate}, "", 0)
}

// levelWriter turns memberlist's "[WARN] memberlist: text" lines into zap
// entries of the matching level, until its gate closes.
type levelWriter struct {
	z    *zap.Logger
	gate *loggate.Gate
}

func (w *levelWriter) Write(p []byte) (int, error) {
	if w.gate == nil {
		w.write(p)
	} else {
		w.gate.Pass(func() { w.write(p) })
	}
	return len(p), nil
}

func (w *levelWriter) write(p []byte) {
	for line := range bytes.Lines(p) {
		s := strings.TrimSpace(string(line))
		if s == "" {
			continue
		}
		lvl := zapcore.DebugLevel
		if strings.HasPrefix(s, "[") {
			if end := strings.IndexByte(s, ']'); end > 0 {
				switch s[1:end] {
				case "WARN":
					lvl = zapcore.WarnLevel
				case "ERR", "ERROR":
					lvl = zapcore.ErrorLevel
				}
				s = strings.TrimSpace(s[end+1:])
			}
		}
		s = strings.TrimPrefix(s, "memberlist: ")
		if ce := w.z.Check(lvl, s); ce != nil {
			ce.Write()
		}
	}
}

// hclogZap implements hclog.Logger on top of zap.
type hclogZap struct {
	z       *zap.Logger
	name    string
	implied []any
}

var _ hclog.Logger = (*hclogZap)(nil)

func newHCLog(z *zap.Logger) hclog.Logger {
	return &hclogZap{z: z.WithOptions(zap.AddCallerSkip(2))}
}

func (h *hclogZap) zapLevel(level hclog.Level) zapcore.Level {
	switch level {
	case hclog.Warn:
		return zapcore.WarnLevel
	case hclog.Error:
		return zapcore.ErrorLevel
	default: // Trace, Debug, Info: library chatter
		return zapcore.DebugLevel
	}
}

func (h *hclogZap) Log(level hclog.Level, msg string, args ...any) {
	if level == hclog.Off {
		return
	}
	lvl := h.zapLevel(level)
	if lvl == zapcore.WarnLevel && firstElection(msg, args) {
		lvl = zapcore.DebugLevel
	}
	ce := h.z.Check(lvl, msg)
	if ce == nil {
		return
	}
	ce.Write(kvFields(append(append([]any(nil), h.implied...), args...))...)
}

// firstElection reports Raft's warning that it starts an election when no
// leader was ever known: every fresh cluster's first election (a single
// node elects itself that way at each start), not a problem. Later
// elections — a leader lost — stay warnings.
func firstElection(msg string, args []any) bool {
	if msg != "heartbeat timeout reached, starting election" {
		return false
	}
	for i := 0; i+1 < len(args); i += 2 {
		if args[i] == "last-leader-id" {
			return fmt.Sprint(args[i+1]) == ""
		}
	}
	return false
}

// kvFields converts hclog's alternating key/value arguments to zap fields.
func kvFields(args []any) []zap.Field {
	fields := make([]zap.Field, 0, len(args)/2+1)
	for i := 0; i < len(args); i += 2 {
		if i+1 == len(args) {
			fields = append(fields, zap.Any("extra", args[i]))
			break
		}
		key, ok := args[i].(string)
		if !ok {
			key = fmt.Sprint(args[i])
		}
		val := args[i+1]
		if f, ok := val.(hclog.Format); ok && len(f) > 0 { // hclog.Fmt: a printf format and its arguments
			if format, ok := f[0].(string); ok {
				val = fmt.Sprintf(format, f[1:]...)
			}
		}
		fields = append(fields, zap.Any(key, val))
	}
	return fields
}

func (h *hclogZap) Trace(msg string, args ...any) { h.Log(hclog.Trace, msg, args...) }
func (h *hclogZap) Debug(msg string, args ...any) { h.Log(hclog.Debug, msg, args...) }
func (h *hclogZap) Info(msg string, args ...any)  { h.Log(hclog.Info, msg, args...) }
func (h *hclogZap) Warn(msg string, args ...any)  { h.Log(hclog.Warn, msg, args...) }
func (h *hclogZap) Error(msg string, args ...any) { h.Log(hclog.Error, msg, args...) }

func (h *hclogZap) IsTrace() bool { return h.z.Core().Enabled(zapcore.DebugLevel) }
func (h *hclogZap) IsDebug() bool { return h.z.Core().Enabled(zapcore.DebugLevel) }
func (h *hclogZap) IsInfo() bool  { return h.z.Core().Enabled(zapcore.DebugLevel) }
func (h *hclogZap) IsWarn() bool  { return h.z.Core().Enabled(zapcore.WarnLevel) }
func (h *hclogZap) IsError() bool { return h.z.Core().Enabled(zapcore.ErrorLevel) }

func (h *hclogZap) ImpliedArgs() []any { return h.implied }

func (h *hclogZap) With(args ...any) hclog.Logger {
	c := *h
	c.implied = append(append([]any(nil), h.implied...), args...)
	return &c
}

func (h *hclogZap) Name() string { return h.name }

func (h *hclogZap) Named(name string) hclog.Logger {
	c := *h
	if c.name != "" {
		c.name += "." + name
	} else {
		c.name = name
	}
	c.z = h.z.Named(name)
	return &c
}

func (h *hclogZap) ResetNamed(name string) hclog.Logger { return h.Named(name) }

// SetLevel is ignored: the zap logger's level decides.
func (h *hclogZap) SetLevel(hclog.Level) {}

func (h *hclogZap) GetLevel() hclog.Level {
	switch {
	case h.z.Core().Enabled(zapcore.DebugLevel):
		return hclog.Debug
	case h.z.Core().Enabled(zapcore.WarnLevel):
		return hclog.Warn
	default:
		return hclog.Error
	}
}

func (h *hclogZap) StandardLogger(*hclog.StandardLoggerOptions) *log.Logger {
	return memberlistLogger(h.z, nil)
}

func (h *hclogZap) StandardWriter(*hclog.StandardLoggerOptions) io.Writer {
	return &levelWriter{z: h.z}
}
