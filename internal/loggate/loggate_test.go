package loggate

import (
	"sync"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Writes pass while the gate is open; Close waits for one in progress and
// none passes after it.
func TestGate(t *testing.T) {
	var g Gate
	n := 0
	if !g.Pass(func() { n++ }) || n != 1 {
		t.Fatal("an open gate did not pass the write")
	}
	inside, release := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		g.Pass(func() { close(inside); <-release; n++ })
	}()
	<-inside
	closed := make(chan struct{})
	go func() { g.Close(); close(closed) }()
	select {
	case <-closed:
		t.Fatal("Close returned during a write")
	default:
	}
	close(release)
	<-closed
	wg.Wait()
	if g.Pass(func() { n++ }) || n != 2 {
		t.Fatalf("a closed gate passed a write (n = %d)", n)
	}
}
