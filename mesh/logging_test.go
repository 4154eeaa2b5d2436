package mesh

import (
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// A fresh cluster's first election is logged at debug, a later one (a
// leader was lost) stays a warning; other Raft chatter below warnings goes
// to debug.
func TestRaftLogLevels(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	l := newHCLog(zap.New(core))
	l.Warn("heartbeat timeout reached, starting election", "last-leader-addr", raft.ServerAddress(""), "last-leader-id", raft.ServerID(""))
	l.Warn("heartbeat timeout reached, starting election", "last-leader-addr", raft.ServerAddress("10.0.0.1:7302"), "last-leader-id", raft.ServerID("s1"))
	l.Info("entering candidate state")
	l.Log(hclog.Error, "failed to contact", "server-id", "s2")
	var got []zapcore.Level
	for _, e := range logs.All() {
		got = append(got, e.Level)
	}
	want := []zapcore.Level{zapcore.DebugLevel, zapcore.WarnLevel, zapcore.DebugLevel, zapcore.ErrorLevel}
	if len(got) != len(want) {
		t.Fatalf("levels %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("levels %v, want %v", got, want)
		}
	}
}
