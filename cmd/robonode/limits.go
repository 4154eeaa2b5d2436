package main

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/robonet/robonet/engine/expr"
	"github.com/robonet/robonet/engine/graph"
	"github.com/robonet/robonet/engine/spec"
	"github.com/robonet/robonet/node"
	"github.com/robonet/robonet/wag"
	"github.com/robonet/robonet/wag/tasklog"
)

// A limit bounds what a client can make a node do. Each is set with
// --limit NAME=VALUE (repeatable; ROBONET_LIMIT=a=1,b=2; config file
// `limit: {name: value}`), and docs/limits.md lists them all (a test keeps
// the two in step).
type limit struct {
	name string
	kind limitKind
	def  string // the default, as written in docs/limits.md
	set  func(c *node.Config, v int64)
}

type limitKind uint8

const (
	limitBytes    limitKind = iota // 4MiB, 512KiB, 1048576
	limitCount                     // 2000, 100_000
	limitDuration                  // 250ms
)

func mib(n int) string { return strconv.Itoa(n>>20) + "MiB" }

// limits lists every settable limit. The spec limits are set on the
// engine's compiler; spec-bytes also on the API, which refuses a larger
// spec before it reaches the compiler.
var limits = []limit{
	{"spec-bytes", limitBytes, mib(spec.DefaultLimits.MaxSpecBytes), func(c *node.Config, v int64) {
		c.MaxSpecBytes, c.Engine.Spec.MaxSpecBytes = int(v), int(v)
	}},
	{"spec-expanded-bytes", limitBytes, mib(spec.DefaultLimits.MaxExpandedBytes), func(c *node.Config, v int64) { c.Engine.Spec.MaxExpandedBytes = int(v) }},
	{"spec-nodes", limitCount, strconv.Itoa(spec.DefaultLimits.MaxNodes), func(c *node.Config, v int64) { c.Engine.Spec.MaxNodes = int(v) }},
	{"ir-bytes", limitBytes, mib(spec.DefaultLimits.MaxIRBytes), func(c *node.Config, v int64) { c.Engine.Spec.MaxIRBytes = int(v) }},
	{"tasks", limitCount, strconv.Itoa(spec.DefaultLimits.MaxTasks), func(c *node.Config, v int64) { c.Engine.Spec.MaxTasks = int(v) }},
	{"expressions", limitCount, strconv.Itoa(spec.DefaultLimits.MaxExpressions), func(c *node.Config, v int64) { c.Engine.Spec.MaxExpressions = int(v) }},
	{"nesting", limitCount, strconv.Itoa(spec.DefaultLimits.MaxDepth), func(c *node.Config, v int64) { c.Engine.Spec.MaxDepth = int(v) }},
	{"expr-length", limitBytes, strconv.Itoa(expr.DefaultLimits.MaxSourceLen), func(c *node.Config, v int64) { c.Engine.Spec.Expr.MaxSourceLen = int(v) }},
	{"expr-estimated-cost", limitCount, strconv.FormatUint(expr.DefaultLimits.MaxCost, 10), func(c *node.Config, v int64) { c.Engine.Spec.Expr.MaxCost = uint64(v) }},
	{"eval-cost", limitCount, strconv.FormatUint(expr.DefaultLimits.MaxEvalCost, 10), func(c *node.Config, v int64) { c.Engine.Spec.Expr.MaxEvalCost = uint64(v) }},
	{"eval-time", limitDuration, expr.DefaultLimits.MaxEvalTime.String(), func(c *node.Config, v int64) { c.Engine.Spec.Expr.MaxEvalTime = time.Duration(v) }},
	{"eval-result-bytes", limitBytes, mib(expr.DefaultLimits.MaxResultBytes), func(c *node.Config, v int64) { c.Engine.Spec.Expr.MaxResultBytes = int(v) }},
	{"step-cost", limitCount, strconv.Itoa(graph.DefaultMaxStepCost), func(c *node.Config, v int64) { c.Engine.StepCost = uint64(v) }},
	{"spread-width", limitCount, strconv.Itoa(graph.DefaultMaxSpreadWidth), func(c *node.Config, v int64) { c.Engine.SpreadLimit = int(v) }},
	{"loop-max", limitCount, strconv.Itoa(spec.DefaultLimits.MaxLoop), func(c *node.Config, v int64) { c.Engine.Spec.MaxLoop = int(v) }},
	{"child-depth", limitCount, strconv.Itoa(graph.DefaultMaxChildDepth), func(c *node.Config, v int64) { c.Engine.ChildDepth = int(v) }},
	{"children-per-instance", limitCount, strconv.Itoa(graph.DefaultMaxChildren), func(c *node.Config, v int64) {
		c.Engine.ChildrenPerInstance = int(min(v, math.MaxInt32))
	}},
	{"input-bytes", limitBytes, mib(node.DefaultMaxInputBytes), func(c *node.Config, v int64) { c.MaxInputBytes = int(v) }},
	{"signal-bytes", limitBytes, strconv.Itoa(node.DefaultMaxSignalBytes>>10) + "KiB", func(c *node.Config, v int64) { c.MaxSignalBytes = int(v) }},
	{"output-bytes", limitBytes, mib(wag.DefaultMaxOutputBytes), func(c *node.Config, v int64) { c.Wag.MaxOutputBytes = int(v) }},
	{"message-bytes", limitBytes, mib(node.DefaultMaxMessageBytes), func(c *node.Config, v int64) { c.MaxMessageBytes = int(v) }},
	{"task-log-attempt-bytes", limitBytes, mib(tasklog.DefaultAttemptBytes), func(c *node.Config, v int64) { c.TaskLogs.AttemptBytes = v }},
	{"task-log-bytes", limitBytes, mib(tasklog.DefaultTotalBytes), func(c *node.Config, v int64) { c.TaskLogs.TotalBytes = v }},
	{"task-log-retention", limitDuration, tasklog.DefaultRetention.String(), func(c *node.Config, v int64) { c.TaskLogs.Retention = time.Duration(v) }},
	{"streams-per-connection", limitCount, strconv.Itoa(node.DefaultMaxStreams), func(c *node.Config, v int64) { c.MaxStreams = int(v) }},
}

// parseLimits reads NAME=VALUE entries into the setters to apply to the
// node's config; a later entry for the same name wins.
func parseLimits(entries []string) ([]func(*node.Config), error) {
	var (
		out  []func(*node.Config)
		errs []error
	)
	for _, e := range entries {
		name, val, ok := strings.Cut(strings.TrimSpace(e), "=")
		i := slices.IndexFunc(limits, func(l limit) bool { return l.name == name })
		if !ok || i < 0 {
			errs = append(errs, fmt.Errorf("limit %q: want NAME=VALUE with NAME one of %s", e, limitNames()))
			continue
		}
		l := limits[i]
		v, err := l.parse(val)
		if err != nil {
			errs = append(errs, fmt.Errorf("limit %s: %w", name, err))
			continue
		}
		out = append(out, func(c *node.Config) { l.set(c, v) })
	}
	return out, errors.Join(errs...)
}

func (l limit) parse(v string) (int64, error) {
	v = strings.TrimSpace(v)
	var n int64
	switch l.kind {
	case limitDuration:
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return 0, fmt.Errorf("%q: want a positive duration such as %s", v, l.def)
		}
		return int64(d), nil
	case limitBytes:
		mult := int64(1)
		for _, u := range []struct {
			suffix string
			mult   int64
		}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"B", 1}} {
			if num, ok := strings.CutSuffix(v, u.suffix); ok {
				v, mult = strings.TrimSpace(num), u.mult
				break
			}
		}
		x, err := strconv.ParseInt(strings.ReplaceAll(v, "_", ""), 10, 64)
		if err != nil || x <= 0 || x > (1<<40)/mult {
			return 0, fmt.Errorf("%q: want a positive size such as %s, 512KiB or 1048576", v, l.def)
		}
		n = x * mult
	default:
		x, err := strconv.ParseInt(strings.ReplaceAll(v, "_", ""), 10, 64)
		if err != nil || x <= 0 {
			return 0, fmt.Errorf("%q: want a positive number such as %s", v, l.def)
		}
		n = x
	}
	if n > 1<<40 {
		return 0, fmt.Errorf("%q is too large", v)
	}
	return n, nil
}

func limitNames() string {
	names := make([]string, len(limits))
	for i, l := range limits {
		names[i] = l.name
	}
	return strings.Join(names, ", ")
}
