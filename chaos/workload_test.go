package chaos

import (
	"testing"

	"github.com/robonet/robonet/engine/spec"
)

// Every kind's spec compiles, and what the checker expects of it names
// executions its graph has.
func TestKindsCompile(t *testing.T) {
	for _, k := range Kinds() {
		wf, err := spec.Compile(k.Name+".yaml", []byte(k.Spec), spec.Options{})
		if err != nil {
			t.Fatalf("%s: %v", k.Name, err)
		}
		if wf.GetName() != k.Name {
			t.Fatalf("%s: the spec names %q", k.Name, wf.GetName())
		}
		tasks := map[string]bool{}
		for _, task := range wf.GetTasks() {
			tasks[task.GetName()] = true
		}
		for _, e := range k.Succeeds(7) {
			if !tasks[taskOf(e)] {
				t.Fatalf("%s: expected execution %s has no task %s", k.Name, e, taskOf(e))
			}
		}
		for e := range k.Fails {
			if !tasks[e] {
				t.Fatalf("%s: expected failing execution %s has no task", k.Name, e)
			}
		}
		if len(k.Outputs(7)) == 0 {
			t.Fatalf("%s: no expected outputs", k.Name)
		}
	}
}
