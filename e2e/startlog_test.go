package e2e_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// A normal start and a clean stop of a fresh single node log no warning
// (its first Raft election is expected, not a problem), and the node's
// own lines name their logger.
func TestQuietStartAndStop(t *testing.T) {
	bin := buildRobonode(t)
	c := startChild(t, bin, "--data-dir", t.TempDir(), "--grpc", "127.0.0.1:0", "--http", "off",
		"--gossip", "127.0.0.1:0", "--raft", "127.0.0.1:0", "--log-format", "json", "--name", "quiet")
	// Leadership, and the engine, before the stop.
	eventually(t, 30*time.Second, "the engine to start", func() bool { return strings.Contains(c.logText(), `"leading: engine started"`) })
	if code := c.stop(t); code != 0 {
		t.Fatalf("exit %d", code)
	}
	loggers := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(c.logText()), "\n") {
		var e struct {
			Level  string `json:"level"`
			Logger string `json:"logger"`
			Msg    string `json:"msg"`
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Errorf("not a JSON log line: %q", line)
			continue
		}
		if e.Level != "info" && e.Level != "debug" {
			t.Errorf("a %s on a normal start or stop: %s", e.Level, line)
		}
		loggers[e.Msg] = e.Logger
	}
	for _, msg := range []string{"node started", "node stopped"} {
		if loggers[msg] != "node" {
			t.Errorf("%q logged by %q, want the logger name node", msg, loggers[msg])
		}
	}
}
