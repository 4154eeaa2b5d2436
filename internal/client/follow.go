package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// FollowOptions tunes Follow.
type FollowOptions struct {
	// OnEvent is called for every event, in order, from Follow's goroutine.
	// After a reconnection the stream resumes after the last event seen, so
	// no event is delivered twice; when the node no longer has the events
	// in between it sends a snapshot instead.
	OnEvent func(*robonetv1.Event)
	// OnReconnect, if set, is told about every broken stream before Follow
	// reconnects.
	OnReconnect func(err error)
	// GiveUpAfter bounds how long Follow keeps reconnecting without
	// receiving anything. 0: one minute.
	GiveUpAfter time.Duration
}

// Terminal reports whether s is a final instance state.
func Terminal(s robonetv1.InstanceState) bool {
	switch s {
	case robonetv1.InstanceState_INSTANCE_STATE_COMPLETE,
		robonetv1.InstanceState_INSTANCE_STATE_FAILED,
		robonetv1.InstanceState_INSTANCE_STATE_CANCELLED:
		return true
	}
	return false
}

// Follow streams the events of instance id until it reaches a terminal
// state, which it returns. A stream that breaks (the node restarts, the
// connection drops) is reopened, resuming after the last sequence number
// received, with a capped exponential backoff; errors that retrying cannot
// fix (unknown instance, bad request) end Follow at once.
func Follow(ctx context.Context, c robonetv1.WorkflowServiceClient, id string, opts FollowOptions) (robonetv1.InstanceState, error) {
	if opts.GiveUpAfter == 0 {
		opts.GiveUpAfter = time.Minute
	}
	var (
		lastSeq     uint64
		lastContact = time.Now()
		backoff     = 100 * time.Millisecond
	)
	for {
		state, err := followOnce(ctx, c, id, &lastSeq, &lastContact, opts.OnEvent)
		if err == nil {
			return state, nil
		}
		if ctx.Err() != nil {
			return state, ctx.Err()
		}
		if !retryable(err) {
			return state, err
		}
		if time.Since(lastContact) > opts.GiveUpAfter {
			return state, fmt.Errorf("gave up following instance %s after %s without contact: %w", id, opts.GiveUpAfter, err)
		}
		if opts.OnReconnect != nil {
			opts.OnReconnect(err)
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return state, ctx.Err()
		case <-t.C:
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// errStreamEnded reports a stream that ended before the instance finished.
var errStreamEnded = errors.New("event stream ended before the instance finished")

// followOnce opens one stream and reads it to its end. It returns a nil
// error only when a terminal state was seen.
func followOnce(ctx context.Context, c robonetv1.WorkflowServiceClient, id string, lastSeq *uint64, lastContact *time.Time, onEvent func(*robonetv1.Event)) (robonetv1.InstanceState, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.WatchInstance(ctx, &robonetv1.WatchInstanceRequest{InstanceId: id, AfterSeq: *lastSeq})
	if err != nil {
		return robonetv1.InstanceState_INSTANCE_STATE_UNSPECIFIED, err
	}
	state := robonetv1.InstanceState_INSTANCE_STATE_UNSPECIFIED
	for {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return state, errStreamEnded
		}
		if err != nil {
			return state, err
		}
		*lastContact = time.Now()
		ev := msg.GetEvent()
		// A snapshot may move the sequence back (the node restarted and
		// its log began again): resume after whatever the node said last.
		*lastSeq = ev.GetSeq()
		state = ev.GetState()
		if onEvent != nil {
			onEvent(ev)
		}
		// The stream ends after the terminal state event; a finished
		// instance's snapshot comes first, then its history.
		if Terminal(state) && ev.GetKind() == robonetv1.EventKind_EVENT_KIND_STATE {
			return state, nil
		}
	}
}

// retryable reports whether reopening the stream may help.
func retryable(err error) bool {
	if errors.Is(err, errStreamEnded) {
		return true
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.Aborted, codes.DeadlineExceeded, codes.ResourceExhausted, codes.Internal, codes.Unknown, codes.Canceled:
		return true
	}
	return false
}
