package robonet_test

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const module = "github.com/robonet/robonet"

type pkg struct {
	ImportPath string
	Doc        string
	Dir        string
	GoFiles    []string
	Imports    []string
	Deps       []string
	Standard   bool
}

// listPackages runs `go list` over the module: the architecture is checked
// against what the compiler sees, not against what the docs claim.
func listPackages(t *testing.T) []pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-json=ImportPath,Doc,Dir,GoFiles,Imports,Deps", "./...")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []pkg
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("decoding go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 5 {
		t.Fatalf("go list found only %d packages", len(pkgs))
	}
	return pkgs
}

// isTestHelper reports whether a package exists to support tests (storetest,
// pgtest): such packages may import testing, and production code may not
// import them.
func isTestHelper(path string) bool {
	return strings.HasSuffix(path[strings.LastIndex(path, "/")+1:], "test")
}

func under(path, dir string) bool {
	p := module + "/" + dir
	return path == p || strings.HasPrefix(path, p+"/")
}

// TestArchitecture enforces the package rules of docs/architecture.md.
func TestArchitecture(t *testing.T) {
	for _, p := range listPackages(t) {
		if p.Doc == "" {
			t.Errorf("%s has no package doc comment", p.ImportPath)
		}
		helper := isTestHelper(p.ImportPath)
		for _, imp := range p.Imports {
			if under(imp, "chaos") && !under(p.ImportPath, "chaos") && !under(p.ImportPath, "cmd") {
				t.Errorf("%s imports %s: the chaos harness and scenarios are run by commands (and tests), never by the mesh's own code", p.ImportPath, imp)
			}
			if imp == "testing" && !helper {
				t.Errorf("%s: production code imports testing (only test helper packages named ...test may)", p.ImportPath)
			}
			if strings.HasPrefix(imp, module+"/") && isTestHelper(imp) && !helper {
				t.Errorf("%s imports the test helper %s", p.ImportPath, imp)
			}
		}
		switch {
		case p.ImportPath == module+"/engine/port":
			for _, d := range p.Deps {
				if strings.HasPrefix(d, module+"/") {
					t.Errorf("%s depends on %s: the engine's ports import nothing of the module", p.ImportPath, d)
				}
			}
		case under(p.ImportPath, "engine/store"), under(p.ImportPath, "wag"):
			// The store adapters and the Waggler layer meet the engine at
			// its ports (engine/port), never its runloop.
			for _, imp := range p.Imports {
				if imp == module+"/engine" {
					t.Errorf("%s imports %s: it needs the engine's ports (engine/port), not its runloop", p.ImportPath, imp)
				}
			}
			if under(p.ImportPath, "engine") {
				checkEngine(t, p)
			} else {
				checkMeetsMeshInNode(t, p)
			}
		case under(p.ImportPath, "engine"):
			checkEngine(t, p)
		case under(p.ImportPath, "mesh"):
			checkMeetsMeshInNode(t, p)
		case under(p.ImportPath, "cmd"):
			checkCommand(t, p)
		case p.ImportPath == module+"/node":
			checkNoClockReads(t, p)
		case under(p.ImportPath, "trust/center"):
			// The trust centre is a service the node wires, not part of
			// it: it knows trust and the Sentinel, and neither the mesh
			// nor the streams nor the engine.
			for _, d := range p.Deps {
				for _, banned := range []string{"mesh", "node", "wag", "engine", "cmd"} {
					if under(d, banned) {
						t.Errorf("%s depends on %s: the trust centre knows neither the mesh nor its callers", p.ImportPath, d)
					}
				}
				if d == "google.golang.org/grpc" {
					t.Errorf("%s depends on gRPC: the trust centre speaks no protocol", p.ImportPath)
				}
			}
		case under(p.ImportPath, "proto"):
			for _, d := range p.Deps {
				if strings.HasPrefix(d, module+"/") && !under(d, "proto") {
					t.Errorf("%s depends on %s: proto imports nothing internal", p.ImportPath, d)
				}
			}
		}
	}
}

// checkEngine keeps the engine from knowing the mesh or its callers, and
// from speaking gRPC.
func checkEngine(t *testing.T, p pkg) {
	t.Helper()
	for _, d := range p.Deps {
		for _, banned := range []string{"mesh", "node", "wag", "cmd"} {
			if under(d, banned) {
				t.Errorf("%s depends on %s: the engine must not know the mesh or its callers", p.ImportPath, d)
			}
		}
	}
	for _, imp := range p.Imports {
		if imp == "google.golang.org/grpc" || strings.HasPrefix(imp, "google.golang.org/grpc/") {
			t.Errorf("%s imports %s: the engine must not speak gRPC", p.ImportPath, imp)
		}
	}
}

// checkMeetsMeshInNode keeps mesh and wag apart: the roles meet in node
// only (wag declares the port, wag.RoleSource; node adapts the mesh to it).
func checkMeetsMeshInNode(t *testing.T, p pkg) {
	t.Helper()
	other := "wag"
	if under(p.ImportPath, "wag") {
		other = "mesh"
	}
	for _, d := range p.Deps {
		if under(d, other) {
			t.Errorf("%s depends on %s: mesh and wag meet only in node", p.ImportPath, d)
		}
	}
}

// checkNoClockReads keeps the composition root on the node's clock
// (Config.Clock, shared with every service it wires): a read of the
// system's clock in node would escape the fake clock of a test. Timers are
// waits, not reads, and are not checked.
func checkNoClockReads(t *testing.T, p pkg) {
	t.Helper()
	fset := token.NewFileSet()
	for _, name := range p.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatalf("parsing %s: %v", name, err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if id, ok := sel.X.(*ast.Ident); ok && id.Name == "time" && (sel.Sel.Name == "Now" || sel.Sel.Name == "Since" || sel.Sel.Name == "Until") {
					t.Errorf("%s: time.%s: node reads its Config.Clock, not the system's", fset.Position(sel.Pos()), sel.Sel.Name)
				}
			}
			return true
		})
	}
}

// TestPureCores keeps the decision cores free of I/O: they take time and
// randomness as arguments and never touch sockets, files or processes.
func TestPureCores(t *testing.T) {
	pure := []string{"engine/graph", "engine/expr", "engine/value", "engine/spec", "trust", "sentinel", "internal/access"}
	banned := []string{"net", "net/http", "os", "os/exec", "math/rand", "math/rand/v2", "crypto/rand", "syscall"}
	for _, p := range listPackages(t) {
		for _, dir := range pure {
			if p.ImportPath != module+"/"+dir {
				continue
			}
			for _, imp := range p.Imports {
				for _, b := range banned {
					if imp == b {
						t.Errorf("%s imports %s: this core must stay pure", p.ImportPath, imp)
					}
				}
			}
		}
	}
}

// checkCommand keeps scenarios out of the packages under cmd, which only
// parse flags, start, wait for a signal and stop (STYLE.md). A scripted
// chaos scenario — a mesh started in-process with its failure detection
// tuned, nodes killed on cue, the story told — lives next to the chaos
// harness (chaos/demo), and a command runs it. Two signs of one are
// checked: an import of memberlist or Raft (a node's settings reach them
// through node.Config; only a scenario tunes them directly), and a call of
// Halt (node.Node.Halt stops a node as if its process died: fault
// injection). Calls are found by name in the syntax, without type
// checking: no command has another Halt to call.
func checkCommand(t *testing.T, p pkg) {
	t.Helper()
	for _, imp := range p.Imports {
		if imp == "github.com/hashicorp/memberlist" || imp == "github.com/hashicorp/raft" {
			t.Errorf("%s imports %s: a command tunes no gossip or Raft (a scenario belongs in chaos/demo)", p.ImportPath, imp)
		}
	}
	fset := token.NewFileSet()
	for _, name := range p.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatalf("parsing %s: %v", name, err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if call, ok := n.(*ast.CallExpr); ok {
				if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Halt" {
					t.Errorf("%s: %s calls Halt: a command kills no node (a scenario belongs in chaos/demo)", p.ImportPath, fset.Position(call.Pos()))
				}
			}
			return true
		})
	}
}
