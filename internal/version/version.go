// Package version describes the running binary from its build
// information: the module version, the commit it was built from, and the
// Go toolchain.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Version is the module version the binary was built as (a tag, when it
// was installed as a module), or "dev" for a build from a checkout.
func Version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

// commit is set by the build when it knows better than the build
// information (make build: -ldflags "-X ...version.commit=...").
var commit string

// Commit is the VCS revision the binary was built from, shortened to 12
// characters, with "+modified" when the checkout had uncommitted changes;
// "unknown" when the build recorded none (go test, go run,
// -buildvcs=false) and was not told.
func Commit() string {
	if commit != "" {
		return commit
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev == "" {
		return "unknown"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if modified == "true" {
		rev += "+modified"
	}
	return rev
}

// String is the line --version prints: "robonode dev (commit 417fff9a1b2c,
// go1.26.8 linux/amd64)".
func String(binary string) string {
	return fmt.Sprintf("%s %s (commit %s, %s %s/%s)", binary, Version(), Commit(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
