package chaos

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/robonet/robonet/internal/connect"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// Client calls the mesh's API through any of the servers' published
// ports, moving on to the next when one does not answer: the harness must
// reach the mesh while it kills, pauses and cuts off servers.
type Client struct {
	conns []*grpc.ClientConn
	addrs []string

	mu   sync.Mutex
	next int // the endpoint that answered last
}

// callTimeout bounds each call to one endpoint.
const callTimeout = 5 * time.Second

// NewClient dials every address (nothing is contacted until a call).
func NewClient(addrs []string, creds connect.Credentials) (*Client, error) {
	c := &Client{addrs: addrs}
	for _, a := range addrs {
		conn, err := connect.Dial(a, creds)
		if err != nil {
			c.Close()
			return nil, err
		}
		c.conns = append(c.conns, conn)
	}
	return c, nil
}

// Close closes every connection.
func (c *Client) Close() {
	for _, conn := range c.conns {
		_ = conn.Close()
	}
}

// retryable reports whether another endpoint (or a later try) may succeed.
func retryable(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Aborted, codes.Internal, codes.Unknown, codes.ResourceExhausted:
		return true
	}
	return errors.Is(err, context.DeadlineExceeded)
}

// Call runs fn against one endpoint after another, starting with the one
// that answered last, until one answers without a retryable error or every
// endpoint has been tried once.
func (c *Client) Call(ctx context.Context, fn func(ctx context.Context, conn *grpc.ClientConn) error) error {
	c.mu.Lock()
	start := c.next
	c.mu.Unlock()
	var last error
	for i := range c.conns {
		k := (start + i) % len(c.conns)
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		err := fn(cctx, c.conns[k])
		cancel()
		if err == nil || !retryable(err) {
			c.mu.Lock()
			c.next = k
			c.mu.Unlock()
			return err
		}
		last = fmt.Errorf("%s: %w", c.addrs[k], err)
		if ctx.Err() != nil {
			break
		}
	}
	return last
}

// On runs fn against the endpoint of index i (the order of NewClient's
// addresses) alone.
func (c *Client) On(ctx context.Context, i int, fn func(ctx context.Context, conn *grpc.ClientConn) error) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	return fn(ctx, c.conns[i])
}

// Redial makes the connection to endpoint i try again now instead of
// after its backoff: a harness measuring when a node is reachable again
// must not measure gRPC's reconnect backoff instead (it grows to seconds
// while the node is cut off).
func (c *Client) Redial(i int) { c.conns[i].ResetConnectBackoff() }

// Retry runs Call until it succeeds, fails for good, or ctx ends.
func (c *Client) Retry(ctx context.Context, fn func(ctx context.Context, conn *grpc.ClientConn) error) error {
	for {
		err := c.Call(ctx, fn)
		if err == nil || !retryable(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last error: %w)", ctx.Err(), err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// Leader returns the engine leader's name ("" while there is none).
func (c *Client) Leader(ctx context.Context) (string, error) {
	var name string
	err := c.Call(ctx, func(ctx context.Context, conn *grpc.ClientConn) error {
		r, err := robonetv1.NewMeshServiceClient(conn).GetLeader(ctx, &robonetv1.GetLeaderRequest{})
		name = r.GetName()
		return err
	})
	return name, err
}

// Wagglers returns capability → the node holding its Waggler role.
func (c *Client) Wagglers(ctx context.Context) (map[string]string, error) {
	out := map[string]string{}
	err := c.Call(ctx, func(ctx context.Context, conn *grpc.ClientConn) error {
		r, err := robonetv1.NewMeshServiceClient(conn).ListWagglers(ctx, &robonetv1.ListWagglersRequest{RolesOnly: true})
		for _, w := range r.GetWagglers() {
			out[w.GetCapability()] = w.GetNode()
		}
		return err
	})
	return out, err
}

// PartitionOwners returns each server owning partitions and how many.
func (c *Client) PartitionOwners(ctx context.Context) (map[string]int, error) {
	out := map[string]int{}
	err := c.Call(ctx, func(ctx context.Context, conn *grpc.ClientConn) error {
		r, err := robonetv1.NewMeshServiceClient(conn).ListPartitions(ctx, &robonetv1.ListPartitionsRequest{})
		for _, p := range r.GetPartitions() {
			if p.GetOwner() != "" {
				out[p.GetOwner()]++
			}
		}
		return err
	})
	return out, err
}

// Alive returns the names of the members gossip says are alive.
func (c *Client) Alive(ctx context.Context) ([]string, error) {
	var out []string
	err := c.Call(ctx, func(ctx context.Context, conn *grpc.ClientConn) error {
		r, err := robonetv1.NewMeshServiceClient(conn).ListMembers(ctx, &robonetv1.ListMembersRequest{})
		for _, m := range r.GetMembers() {
			if m.GetStatus() == "alive" {
				out = append(out, m.GetName())
			}
		}
		return err
	})
	return out, err
}
