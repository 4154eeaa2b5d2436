package client

import (
	"context"
	"fmt"
	"sync"
	"time"

	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// WaitOptions tunes Wait.
type WaitOptions struct {
	// Progress, if set, is updated as the instance advances.
	Progress *Progress
	// OnEvent, if set, sees every event (see FollowOptions.OnEvent).
	OnEvent func(*robonetv1.Event)
	// OnReconnect, if set, is told about every broken stream.
	OnReconnect func(err error)
	// Refresh is the most often the progress is re-read from the node
	// while events arrive. 0: 200 ms.
	Refresh time.Duration
}

// Wait follows instance id until it finishes and returns its final view.
//
// Events say that something changed; the counts shown come from the node's
// own view of the instance (GetInstance), re-read at most every Refresh
// while events arrive, so the display never drifts from the node's truth
// (for example when a spread expands and the total grows).
func Wait(ctx context.Context, c robonetv1.WorkflowServiceClient, id string, opts WaitOptions) (*robonetv1.Instance, error) {
	if opts.Refresh == 0 {
		opts.Refresh = 200 * time.Millisecond
	}
	var (
		mu    sync.Mutex
		dirty bool
	)
	refresh := func(ctx context.Context) {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		resp, err := c.GetInstance(cctx, &robonetv1.GetInstanceRequest{InstanceId: id})
		if err == nil && opts.Progress != nil {
			opts.Progress.Update(resp.GetInstance())
		}
	}

	// The refresher owns the periodic re-reads; it stops before Wait
	// returns.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	if opts.Progress != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(opts.Refresh)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-ctx.Done():
					return
				case <-t.C:
					mu.Lock()
					d := dirty
					dirty = false
					mu.Unlock()
					if d {
						refresh(ctx)
					}
				}
			}
		}()
	}

	_, err := Follow(ctx, c, id, FollowOptions{
		OnReconnect: opts.OnReconnect,
		OnEvent: func(ev *robonetv1.Event) {
			if opts.OnEvent != nil {
				opts.OnEvent(ev)
			}
			if opts.Progress == nil {
				return
			}
			if snap := ev.GetInstance(); snap != nil {
				opts.Progress.Update(snap)
				return
			}
			mu.Lock()
			dirty = true
			mu.Unlock()
		},
	})
	close(stop)
	wg.Wait()
	if err != nil {
		return nil, err
	}

	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	resp, err := c.GetInstance(cctx, &robonetv1.GetInstanceRequest{InstanceId: id})
	if err != nil {
		return nil, fmt.Errorf("reading instance %s after it finished: %w", id, err)
	}
	if opts.Progress != nil {
		opts.Progress.Update(resp.GetInstance())
		opts.Progress.Finish()
	}
	return resp.GetInstance(), nil
}
