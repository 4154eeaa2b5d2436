package lifecycle

import (
	"errors"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestLifecycle(t *testing.T) {
	var s State
	if s.Running() || s.Stopped() || s.String() != "new" {
		t.Fatalf("zero state %v", s)
	}
	if err := s.Start("thing"); err != nil || !s.Running() {
		t.Fatalf("Start: %v, %v", err, s)
	}
	if err := s.Start("thing"); !errors.Is(err, ErrStarted) || err.Error() != "thing: already started" {
		t.Fatalf("second Start: %v", err)
	}
	if was := s.Stop(); was != Running || !s.Stopped() {
		t.Fatalf("first Stop left %v", was)
	}
	if was := s.Stop(); was != Stopped {
		t.Fatalf("second Stop left %v", was)
	}
	if err := s.Start("thing"); !errors.Is(err, ErrStopped) {
		t.Fatalf("Start after Stop: %v", err)
	}
	var never State
	if was := never.Stop(); was != New || !never.Stopped() {
		t.Fatalf("Stop without Start left %v", was)
	}
}
