// Package gctune gives a robonode process garbage-collector settings that
// suit a node, unless the operator chose their own with Go's GOGC and
// GOMEMLIMIT.
//
// A node's live heap is small (tens of MiB) and it allocates quickly
// (messages, results, store rows), so with Go's default GOGC of 100 the
// collector runs many times a second: in the chains benchmark it took 14 %
// of a Waggler node's CPU, and with 400 instead the same work took 11–20 %
// less CPU across a mesh and 8–13 % less on one node, for a peak memory
// 1.3–1.7 times as large (docs/benchmarks.md at f91b9cc, "sixth pass"). A node
// therefore runs with DefaultPercent, which lets the heap grow to five
// times what is live before a collection. So that a node whose live heap
// is large does not grow five-fold into swap or its container's limit, a
// soft memory limit of three quarters of the memory available to the
// process (its cgroup's limit, else the machine's; MemoryShareNum and
// MemoryShareDen) makes the collector work harder as the heap nears it.
package gctune

import (
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// DefaultPercent is the GOGC a node runs with unless GOGC is set.
const DefaultPercent = 400

// The default soft memory limit, unless GOMEMLIMIT is set, is
// MemoryShareNum/MemoryShareDen of the available memory.
const (
	MemoryShareNum = 3
	MemoryShareDen = 4
)

// Applied is what a process runs with, and where each value came from.
type Applied struct {
	Percent     int    // the GC percent; -1: off (GOGC=off)
	PercentFrom string // "GOGC" or "default"
	Limit       int64  // the soft memory limit in bytes; math.MaxInt64: none
	LimitFrom   string // "GOMEMLIMIT", "3/4 of N MiB available", or "none: available memory unknown"
}

// String says what the process runs with, for its log.
func (a Applied) String() string {
	limit := "none"
	if a.Limit != math.MaxInt64 {
		limit = fmt.Sprintf("%d MiB", a.Limit>>20)
	}
	percent := strconv.Itoa(a.Percent)
	if a.Percent < 0 {
		percent = "off"
	}
	return fmt.Sprintf("GOGC %s (%s), memory limit %s (%s)", percent, a.PercentFrom, limit, a.LimitFrom)
}

// Apply sets the node's defaults for what getenv leaves unset and returns
// what the process runs with.
func Apply(getenv func(string) string) Applied {
	a := choose(getenv, availableMemory)
	if a.PercentFrom == "default" {
		debug.SetGCPercent(a.Percent)
	} else {
		// Setting returns the value GOGC gave; put it back at once.
		a.Percent = debug.SetGCPercent(-1)
		debug.SetGCPercent(a.Percent)
	}
	if a.LimitFrom == "GOMEMLIMIT" {
		a.Limit = debug.SetMemoryLimit(-1) // a negative value only reads it
	} else {
		debug.SetMemoryLimit(a.Limit)
	}
	return a
}

// choose decides the settings from the environment and the memory
// available (bytes; false: unknown), without applying them.
func choose(getenv func(string) string, available func() (uint64, bool)) Applied {
	a := Applied{Percent: DefaultPercent, PercentFrom: "default", Limit: math.MaxInt64}
	if getenv("GOGC") != "" {
		a.PercentFrom = "GOGC"
	}
	if getenv("GOMEMLIMIT") != "" {
		a.LimitFrom = "GOMEMLIMIT"
		return a
	}
	total, ok := available()
	if !ok || total == 0 {
		a.LimitFrom = "none: available memory unknown"
		return a
	}
	a.Limit = int64(min(total/MemoryShareDen*MemoryShareNum, math.MaxInt64))
	a.LimitFrom = fmt.Sprintf("%d/%d of %d MiB available", MemoryShareNum, MemoryShareDen, total>>20)
	return a
}

// availableMemory is the memory limit of the process's cgroup (v2, then
// v1), else the machine's memory.
func availableMemory() (uint64, bool) {
	return memoryFrom(os.ReadFile)
}

// memoryFrom is availableMemory reading files with read.
func memoryFrom(read func(string) ([]byte, error)) (uint64, bool) {
	// A cgroup without a limit says "max" (v2) or a number near 2^63
	// (v1): the machine's memory bounds it then.
	machine, machineOK := memTotal(read)
	for _, f := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		b, err := read(f)
		if err != nil {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
		if err != nil || n == 0 {
			continue
		}
		if machineOK && n > machine {
			return machine, true
		}
		return n, true
	}
	return machine, machineOK
}

// memTotal is MemTotal of /proc/meminfo, in bytes.
func memTotal(read func(string) ([]byte, error)) (uint64, bool) {
	b, err := read("/proc/meminfo")
	if err != nil {
		return 0, false
	}
	for line := range strings.Lines(string(b)) {
		rest, ok := strings.CutPrefix(line, "MemTotal:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, false
		}
		kb, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			return 0, false
		}
		return kb << 10, true
	}
	return 0, false
}
