package wag_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"github.com/robonet/robonet/engine"
	"github.com/robonet/robonet/wag"
)

// printSink prints results and closes done after the first.
type printSink struct{ done chan struct{} }

func (s printSink) TaskResult(_ context.Context, r engine.TaskResult) {
	fmt.Println(r.ExecutionID, r.OK, r.Output)
	close(s.done)
}

func (printSink) TaskProgress(context.Context, engine.TaskProgress) {}

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
	l, err := wag.New(wag.Config{
		NodeName:     "node-1",
		Capabilities: map[string]int{"text.transform": 4},
		Registry:     reg,
		Sink:         sink,
	})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	if err := l.Start(ctx); err != nil {
		panic(err)
	}
	defer l.Stop(ctx)

	err = l.Dispatch(ctx, []engine.TaskDispatch{{
		AttemptKey: engine.AttemptKey{InstanceID: uuid.New(), ExecutionID: "greet", Attempt: 1},
		Task:       "greet",
		Index:      -1,
		Capability: "text.transform",
		Action:     "shout",
		Input:      "hello",
	}})
	if err != nil {
		panic(err)
	}
	<-sink.done
	// Output: greet true HELLO!
}
