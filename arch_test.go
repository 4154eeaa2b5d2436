package robonet_test

import (
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/robonet/robonet"

type pkg struct {
	ImportPath string
	Doc        string
	Imports    []string
	Deps       []string
	Standard   bool
}

// listPackages runs `go list` over the module: the architecture is checked
// against what the compiler sees, not against what the docs claim.
func listPackages(t *testing.T) []pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-json=ImportPath,Doc,Imports,Deps", "./...")
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
			if imp == "testing" && !helper {
				t.Errorf("%s: production code imports testing (only test helper packages named ...test may)", p.ImportPath)
			}
			if strings.HasPrefix(imp, module+"/") && isTestHelper(imp) && !helper {
				t.Errorf("%s imports the test helper %s", p.ImportPath, imp)
			}
		}
		switch {
		case under(p.ImportPath, "engine"):
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
		case under(p.ImportPath, "mesh"), under(p.ImportPath, "wag"):
			// The roles meet in node only: wag declares the port
			// (wag.RoleSource), node adapts the mesh to it.
			other := "wag"
			if under(p.ImportPath, "wag") {
				other = "mesh"
			}
			for _, d := range p.Deps {
				if under(d, other) {
					t.Errorf("%s depends on %s: mesh and wag meet only in node", p.ImportPath, d)
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
