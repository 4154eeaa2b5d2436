package sqlite

import (
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"

	"github.com/robonet/robonet/engine/port"
	"github.com/robonet/robonet/engine/store/storetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// openTest opens a store on a new file in the test's temporary directory.
func openTest(t testing.TB) *Store {
	t.Helper()
	s, err := Open(t.Context(), Config{Path: filepath.Join(t.TempDir(), "robonet.db"), Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) port.Store { return openTest(t) })
}

func TestCrashSafety(t *testing.T) {
	storetest.RunCrashSafety(t, func(t *testing.T) port.Store { return openTest(t) })
}
