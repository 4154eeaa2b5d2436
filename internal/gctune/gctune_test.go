package gctune

import (
	"errors"
	"io/fs"
	"math"
	"runtime/debug"
	"testing"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func known(n uint64) func() (uint64, bool) { return func() (uint64, bool) { return n, true } }

func TestChoose(t *testing.T) {
	const gib = 1 << 30
	for _, c := range []struct {
		name        string
		env         map[string]string
		available   func() (uint64, bool)
		percentFrom string
		limit       int64
		limitFrom   string
	}{
		{"defaults", nil, known(8 * gib), "default", 6 * gib, "3/4 of 8192 MiB available"},
		{"the operator's GOGC", map[string]string{"GOGC": "50"}, known(8 * gib), "GOGC", 6 * gib, "3/4 of 8192 MiB available"},
		{"the operator's GOMEMLIMIT", map[string]string{"GOMEMLIMIT": "1GiB"}, known(8 * gib), "default", math.MaxInt64, "GOMEMLIMIT"},
		{"memory unknown", nil, func() (uint64, bool) { return 0, false }, "default", math.MaxInt64, "none: available memory unknown"},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := choose(env(c.env), c.available)
			if a.PercentFrom != c.percentFrom || a.Limit != c.limit || a.LimitFrom != c.limitFrom {
				t.Fatalf("got %+v, want percent from %q, limit %d from %q", a, c.percentFrom, c.limit, c.limitFrom)
			}
			if c.percentFrom == "default" && a.Percent != DefaultPercent {
				t.Fatalf("percent %d, want %d", a.Percent, DefaultPercent)
			}
		})
	}
}

func TestMemoryFrom(t *testing.T) {
	const meminfo = "MemTotal:       24576000 kB\nMemFree:         1000000 kB\n"
	machine := uint64(24576000) << 10
	files := func(m map[string]string) func(string) ([]byte, error) {
		return func(name string) ([]byte, error) {
			if s, ok := m[name]; ok {
				return []byte(s), nil
			}
			return nil, fs.ErrNotExist
		}
	}
	for _, c := range []struct {
		name  string
		files map[string]string
		want  uint64
		ok    bool
	}{
		{"no cgroup limit (v2)", map[string]string{"/proc/meminfo": meminfo, "/sys/fs/cgroup/memory.max": "max\n"}, machine, true},
		{"a cgroup v2 limit", map[string]string{"/proc/meminfo": meminfo, "/sys/fs/cgroup/memory.max": "2147483648\n"}, 2 << 30, true},
		{"a cgroup v1 limit", map[string]string{"/proc/meminfo": meminfo, "/sys/fs/cgroup/memory/memory.limit_in_bytes": "1073741824\n"}, 1 << 30, true},
		{"no cgroup limit (v1)", map[string]string{"/proc/meminfo": meminfo, "/sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n"}, machine, true},
		{"only the machine", map[string]string{"/proc/meminfo": meminfo}, machine, true},
		{"nothing readable", nil, 0, false},
		{"meminfo without MemTotal", map[string]string{"/proc/meminfo": "MemFree: 12 kB\n"}, 0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got, ok := memoryFrom(files(c.files)); got != c.want || ok != c.ok {
				t.Fatalf("got %d, %v; want %d, %v", got, ok, c.want, c.ok)
			}
		})
	}
	if _, ok := memoryFrom(func(string) ([]byte, error) { return nil, errors.New("denied") }); ok {
		t.Fatal("unreadable files gave a memory size")
	}
}

// Apply sets the defaults in the runtime and leaves what the operator set.
func TestApply(t *testing.T) {
	oldPercent, oldLimit := debug.SetGCPercent(100), debug.SetMemoryLimit(math.MaxInt64)
	t.Cleanup(func() {
		debug.SetGCPercent(oldPercent)
		debug.SetMemoryLimit(oldLimit)
	})

	a := Apply(env(nil))
	if got := debug.SetGCPercent(100); got != DefaultPercent || a.Percent != DefaultPercent {
		t.Fatalf("GC percent %d (reported %d), want %d", got, a.Percent, DefaultPercent)
	}
	if got := debug.SetMemoryLimit(-1); got != a.Limit {
		t.Fatalf("memory limit %d, reported %d", got, a.Limit)
	}

	debug.SetGCPercent(70) // as GOGC=70 would have at start-up
	debug.SetMemoryLimit(1 << 30)
	a = Apply(env(map[string]string{"GOGC": "70", "GOMEMLIMIT": "1GiB"}))
	if got := debug.SetGCPercent(70); got != 70 || a.Percent != 70 {
		t.Fatalf("GC percent %d (reported %d): the operator's GOGC was overridden", got, a.Percent)
	}
	if got := debug.SetMemoryLimit(-1); got != 1<<30 || a.Limit != 1<<30 {
		t.Fatalf("memory limit %d (reported %d): the operator's GOMEMLIMIT was overridden", got, a.Limit)
	}
	if s := a.String(); s != "GOGC 70 (GOGC), memory limit 1024 MiB (GOMEMLIMIT)" {
		t.Fatalf("String() = %q", s)
	}
}
