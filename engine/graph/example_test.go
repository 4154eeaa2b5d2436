package graph_test

import (
	"fmt"
	"time"

	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"

	"github.com/robonet/robonet/engine/graph"
)

// A runloop in miniature: start an instance, answer every Dispatch, and read
// the outputs once the instance is finished.
func Example() {
	expr := func(src string) *robonetv1.Template {
		return &robonetv1.Template{Kind: &robonetv1.Template_Expr{Expr: &robonetv1.Expr{Source: src}}}
	}
	wf := &robonetv1.Workflow{
		Name: "double", Version: 1,
		Tasks: []*robonetv1.Task{
			{Name: "double", Needs: []string{"list"}, Spread: &robonetv1.Expr{Source: "tasks.list.output"}, With: expr("item * 2")},
			{Name: "list", With: &robonetv1.Template{Kind: &robonetv1.Template_LiteralJson{LiteralJson: []byte(`[1,2,3]`)}}},
		},
		Outputs: []*robonetv1.Output{{Name: "doubled", Value: expr("tasks.double.output")}},
	}
	plan, err := graph.NewPlan(wf, nil, graph.Options{})
	if err != nil {
		panic(err)
	}
	g := plan.NewGraph("inst-1")
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	effects, err := g.Start(nil, now)
	if err != nil {
		panic(err)
	}
	// The worker of this example returns its input. Effects alias a buffer
	// of the graph, so copy them before calling it again.
	queue := append([]graph.Effect(nil), effects...)
	for len(queue) > 0 {
		e := queue[0]
		queue = queue[1:]
		switch e.Kind {
		case graph.Dispatch:
			fmt.Println("run", graph.ExecutionID("inst-1", plan, e.Task, e.Attempt), e.Input)
			queue = append(queue, g.Complete(e.Task, e.Attempt, graph.Result{Output: e.Input}, now)...)
		case graph.Finished:
			fmt.Println(e.State, g.Outputs())
		}
	}
	// Output:
	// run inst-1/list#1 [1 2 3]
	// run inst-1/double[0]#1 2
	// run inst-1/double[1]#1 4
	// run inst-1/double[2]#1 6
	// COMPLETE map[doubled:[2 4 6]]
}
