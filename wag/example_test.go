package wag_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"github.com/robonet/robonet/engine/port"
	"github.com/robonet/robonet/wag"
)

// printSink prints results and closes done after the first.
type printSink struct{ done chan struct{} }

func (s printSink) TaskResult(_ context.Context, r port.TaskResult) {
	fmt.Println(r.ExecutionID, r.OK, r.Output)
	close(s.done)
}

func (printSink) TaskProgress(context.Context, port.TaskProgress) {}

// A program that embeds a node registers its own actions next to the
// built-ins and serves a capability with a pool of workers.
func Example() {
	reg := wag.NewRegistry()
	err := reg.Register("shout", func(_ context.Context, call *wag.Call) (any, error) {
		s, ok := call.Input.(string)
		if !ok {
			return nil, fmt.Errorf("shout: input must be a string")
		}
		return strings.ToUpper(s) + "!", nil
	})
	if err != nil {
		panic(err)
	}
	sink := printSink{done: make(chan struct{})}
	cfg := wag.Config{
		NodeName:     "node-1",
		Capabilities: map[string]int{"text.transform": 4},
		Registry:     reg,
	}
	// The node's pools, its Waggler of text.transform (epoch 1), and the
	// engine's Router in front, for leadership term 1.
	workers, err := wag.NewWorkerHost(cfg)
	if err != nil {
		panic(err)
	}
	host, err := wag.NewWagglerHost(cfg)
	if err != nil {
		panic(err)
	}
	dir := wag.NewStaticDirectory("node-1", host)
	dir.Assign("text.transform", 1)
	router, err := wag.NewRouter(wag.RouterConfig{Term: 1, Sink: sink, Directory: dir})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	for _, start := range []func(context.Context) error{workers.Start, host.Start, router.Start} {
		if err := start(ctx); err != nil {
			panic(err)
		}
	}
	wag.FollowLocal(workers, host)
	defer func() {
		_ = router.Stop(ctx)
		_ = host.Stop(ctx)
		_ = workers.Stop(ctx)
	}()

	errs := router.Dispatch(ctx, []port.TaskDispatch{{
		AttemptKey: port.AttemptKey{InstanceID: uuid.New(), ExecutionID: "greet", Attempt: 1},
		Term:       1,
		Task:       "greet",
		Index:      -1,
		Capability: "text.transform",
		Action:     "shout",
		Input:      "hello",
	}})
	if errs != nil {
		panic(errs)
	}
	<-sink.done
	// Output: greet true HELLO!
}
