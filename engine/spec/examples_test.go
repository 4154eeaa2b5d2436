package spec_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/robonet/robonet/engine/expr"
	"github.com/robonet/robonet/engine/spec"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// examplesDir holds the example specs users read as documentation.
const examplesDir = "../../examples"

func exampleFiles(t testing.TB) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(examplesDir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples found in %s: %v", examplesDir, err)
	}
	return files
}

// compilesForExecution proves the IR is executable: every template compiles
// with package expr, and so does every spread and when expression.
func compilesForExecution(t *testing.T, wf *robonetv1.Workflow) {
	t.Helper()
	env, err := expr.NewEnv(expr.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tk := range wf.GetTasks() {
		if _, err := env.CompileTemplate(tk.GetWith()); err != nil {
			t.Errorf("task %s: with: %v", tk.GetName(), err)
		}
		for field, e := range map[string]*robonetv1.Expr{"spread": tk.GetSpread(), "when": tk.GetWhen()} {
			if e == nil {
				continue
			}
			if _, err := env.Compile(e.GetSource()); err != nil {
				t.Errorf("task %s: %s: %v", tk.GetName(), field, err)
			}
		}
	}
	for _, o := range wf.GetOutputs() {
		if _, err := env.CompileTemplate(o.GetValue()); err != nil {
			t.Errorf("output %s: %v", o.GetName(), err)
		}
	}
}

func TestExamplesCompile(t *testing.T) {
	for _, file := range exampleFiles(t) {
		t.Run(filepath.Base(file), func(t *testing.T) {
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			wf, err := spec.Compile(filepath.Base(file), src, spec.Options{})
			if err != nil {
				t.Fatalf("Compile:\n%v", err)
			}
			if want := strings.TrimSuffix(filepath.Base(file), ".yaml"); wf.GetName() != want {
				t.Errorf("workflow name %q, want it to match the file name %q", wf.GetName(), want)
			}
			compilesForExecution(t, wf)
		})
	}
}

// TestDesignExampleVerbatim keeps examples/scan-and-summarize.yaml identical
// to the example in DESIGN.md §4 (when the design document is available).
func TestDesignExampleVerbatim(t *testing.T) {
	example, err := os.ReadFile(filepath.Join(examplesDir, "scan-and-summarize.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	design, err := os.ReadFile("../../../shared/DESIGN.md")
	if err != nil {
		t.Skipf("DESIGN.md not available: %v", err)
	}
	section := string(design)
	if i := strings.Index(section, "## 4."); i >= 0 {
		section = section[i:]
	}
	start := strings.Index(section, "```yaml\n")
	if start < 0 {
		t.Fatal("no yaml block in DESIGN.md section 4")
	}
	block := section[start+len("```yaml\n"):]
	block = block[:strings.Index(block, "```")]
	if block != string(example) {
		t.Errorf("examples/scan-and-summarize.yaml differs from DESIGN.md section 4:\n%s", block)
	}
	if _, err := spec.Compile("scan-and-summarize.yaml", []byte(block), spec.Options{}); err != nil {
		t.Errorf("the DESIGN.md example does not compile:\n%v", err)
	}
}
