package lifecycle

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

func TestBaseStopRunsOnceAndEveryStopWaits(t *testing.T) {
	var b Base
	if err := b.Start("thing"); err != nil {
		t.Fatal(err)
	}
	if err := b.Start("thing"); !errors.Is(err, ErrStarted) {
		t.Fatalf("second Start: %v", err)
	}
	release := make(chan struct{})
	loopDone := make(chan struct{})
	if !b.Go(func() { <-release; close(loopDone) }) {
		t.Fatal("Go refused while running")
	}

	boom := errors.New("boom")
	entered := make(chan struct{})
	calls := 0
	stop := func(was State) error {
		calls++
		if was != Running {
			t.Errorf("stop saw %v, want running", was)
		}
		close(entered)
		return boom
	}
	firstDone := make(chan error, 1)
	go func() { firstDone <- b.Stop(context.Background(), stop) }()
	<-entered

	// Later calls, while the first's group still runs, wait for it.
	const later = 4
	results := make(chan error, later)
	var wg sync.WaitGroup
	for range later {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results <- b.Stop(context.Background(), func(State) error {
				t.Error("a later Stop ran its stop function")
				return nil
			})
		}()
	}
	select {
	case err := <-results:
		t.Fatalf("a later Stop returned %v before the group ended", err)
	case err := <-firstDone:
		t.Fatalf("the first Stop returned %v before the group ended", err)
	case <-time.After(50 * time.Millisecond):
	}
	if b.Go(func() { t.Error("Go ran a goroutine after Stop began") }) {
		t.Fatal("Go accepted a goroutine after Stop began")
	}

	close(release)
	<-loopDone
	if err := <-firstDone; !errors.Is(err, boom) {
		t.Fatalf("first Stop: %v", err)
	}
	wg.Wait()
	close(results)
	for err := range results {
		if !errors.Is(err, boom) {
			t.Fatalf("later Stop: %v, want the first's error", err)
		}
	}
	if calls != 1 {
		t.Fatalf("stop ran %d times", calls)
	}
	if err := b.Start("thing"); !errors.Is(err, ErrStopped) {
		t.Fatalf("Start after Stop: %v", err)
	}
	select {
	case <-b.Done():
	default:
		t.Fatal("Done not closed after Stop")
	}
}

func TestBaseStopWithoutStart(t *testing.T) {
	var b Base
	saw := Stopped
	if err := b.Stop(context.Background(), func(was State) error { saw = was; return nil }); err != nil {
		t.Fatal(err)
	}
	if saw != New || !b.State().Stopped() {
		t.Fatalf("stop saw %v, state %v", saw, b.State())
	}
}

func TestBaseStopBoundedByContext(t *testing.T) {
	var b Base
	if err := b.Start("thing"); err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	b.Go(func() { <-release })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := b.Stop(ctx, func(State) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Fatalf("first Stop with an ended ctx while the group runs: %v", err)
	}
	if err := b.Stop(ctx, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("later Stop with an ended ctx: %v", err)
	}
	close(release)
	if err := b.Stop(context.Background(), nil); err != nil {
		t.Fatalf("later Stop once the group ended: %v", err)
	}
}

// A stop function may start goroutines to finish its work; Stop waits for
// them too, and once stop has returned Go starts nothing.
func TestBaseStopWaitsForGoroutinesItsStopStarted(t *testing.T) {
	var b Base
	if err := b.Start("thing"); err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	finished := make(chan struct{})
	stopped := make(chan error, 1)
	go func() {
		stopped <- b.Stop(context.Background(), func(State) error {
			if !b.Go(func() { <-release; close(finished) }) {
				t.Error("Go refused a goroutine the stop function started")
			}
			return nil
		})
	}()
	select {
	case err := <-stopped:
		t.Fatalf("Stop returned %v while a goroutine its stop started still ran", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	select {
	case <-finished:
	default:
		t.Fatal("Stop returned before the goroutine its stop started ended")
	}
	if b.Go(func() {}) {
		t.Fatal("Go started a goroutine after Stop")
	}
}
