package spec

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// Waits and triggers. A task with `wait:` runs nothing: each attempt waits
// for a signal sent to the instance (its payload is the output), for a
// duration, or until a time. A workflow with `trigger:` is started once per
// event published under one of its names, the event's payload as its
// `event` input.

var (
	waitKeys    = []string{"signal", "timeout", "for", "until"}
	triggerKeys = []string{"events"}
	// eventNameRE is the syntax of signal and event names: the API that
	// sends and publishes them checks the same.
	eventNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,127}$`)
)

// maxTriggerEvents bounds the event names of one trigger.
const maxTriggerEvents = 16

const (
	waitHint = "write wait: {signal: approve, timeout: 48h} to wait for a signal, wait: {for: 10m} to wait a while, " +
		"or wait: {until: ${{ inputs.at }}} to wait until a time (RFC 3339)"
	eventNameHint = "a %s name is 1 to 128 characters: lowercase letters, digits, '.', '_' and '-', starting with a letter or digit, e.g. %s"
	untilHint     = "write a time in RFC 3339, e.g. until: 2026-03-01T09:00:00Z, or an expression that yields one, e.g. until: ${{ inputs.at }}"
	triggerHint   = "write trigger: {events: [order.created]} to start an instance for every event published under that name"
)

// waitSpec is a task's `wait:` as written. until is checked later, in the
// task's scope (buildWait).
type waitSpec struct {
	keyN    *yaml.Node // the wait key
	signal  string     // "" unless a signal wait
	timeout time.Duration
	dur     time.Duration // for:
	until   *yaml.Node
}

// wait reads `wait:`; nil when it is invalid (the problems are reported).
func (c *compiler) wait(f entry, w where) *waitSpec {
	n := c.resolve(f.value)
	if n == nil {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		c.errorf(n, w, waitHint, "wait must be a mapping, not %s", describe(n))
		return nil
	}
	entries, ok := c.mapping(n, w, "wait")
	if !ok {
		return nil
	}
	ws := &waitSpec{keyN: f.keyN}
	valid := true
	fields := c.checkKeys(entries, waitKeys, w, "wait")
	for _, e := range fields {
		if e.value == nil { // a misspelt key, reported already
			valid = false
		}
	}
	var kinds []entry
	for _, e := range entries { // in source order: the second one is the error
		if e.key == "signal" || e.key == "for" || e.key == "until" {
			kinds = append(kinds, e)
		}
	}
	switch {
	case len(kinds) == 0 && valid:
		c.errorf(f.keyN, w, waitHint, "wait needs signal, for or until")
		return nil
	case len(kinds) > 1:
		c.errorf(kinds[1].keyN, w.child(kinds[1].key), waitHint,
			"wait has both %s and %s; a wait has one of signal, for and until", kinds[0].key, kinds[1].key)
		return nil
	}
	if s, ok := fields["signal"]; ok && s.value != nil {
		name, ok := c.str(s.value, w.child("signal"))
		switch {
		case !ok:
			valid = false
		case !eventNameRE.MatchString(name):
			c.errorf(c.resolve(s.value), w.child("signal"), fmt.Sprintf(eventNameHint, "signal", "approve or order.paid"),
				"invalid signal name %q", name)
			valid = false
		default:
			ws.signal = name
		}
	}
	if t, ok := fields["timeout"]; ok && t.value != nil {
		if _, hasSignal := fields["signal"]; !hasSignal {
			c.errorf(t.keyN, w.child("timeout"), "remove timeout: a wait for a duration or until a time ends by itself",
				"wait.timeout goes with signal only")
			return nil
		}
		d := c.duration(t.value, w.child("timeout"))
		if d == nil {
			valid = false
		} else {
			ws.timeout = *d
		}
	}
	if d, ok := fields["for"]; ok && d.value != nil {
		dur := c.duration(d.value, w.child("for"))
		if dur == nil {
			valid = false
		} else {
			ws.dur = *dur
		}
	}
	if u, ok := fields["until"]; ok {
		ws.until = u.value
	}
	if !valid {
		return nil
	}
	return ws
}

// checkWait refuses what a wait task cannot have: it runs nothing, so it
// has no action, child workflow, input, verification, fan-out, loop,
// placement or acceptance check, and its timeout is the wait's own.
func (c *compiler) checkWait(t *taskSpec, fields map[string]entry) {
	timeoutHint := "put timeout inside wait: {signal: X, timeout: 48h}"
	if t.wait != nil && t.wait.signal == "" {
		timeoutHint = "remove timeout: a wait for a duration or until a time ends by itself"
	}
	for _, other := range []struct {
		key, hint string
	}{
		{"capability", "remove capability: a wait task runs nothing, so no worker serves it"},
		{"action", "remove action: a wait task runs nothing"},
		{"workflow", "put the wait and the child workflow in two tasks, the second needing the first"},
		{"with", "remove with: a wait task has no input (a signal's payload is its output)"},
		{"verify", "remove verify: a wait task runs nothing to compare"},
		{"spread", "put the wait in a task of its own, before or after the spread"},
		{"loop", "put the wait in a task of its own, before or after the loop"},
		{"on", "remove on: a wait task runs on no node"},
		{"accept", "check the output in the task that needs this one"},
		{"timeout", timeoutHint},
	} {
		if f, ok := fields[other.key]; ok {
			why := "a wait task runs nothing"
			if other.key == "timeout" {
				why = "a wait task has no timeout of its own"
			}
			c.errorf(f.keyN, t.w.child(other.key), other.hint, "a task cannot have both wait and %s: %s", other.key, why)
			t.ok = false
		}
	}
}

// buildWait produces the IR of a task's wait; until is checked in the
// scope of the task's with (inputs and upstream tasks).
func (c *compiler) buildWait(t *taskSpec, sc *scope) *robonetv1.Wait {
	ws := t.wait
	ir := &robonetv1.Wait{Signal: ws.signal}
	if ws.timeout > 0 {
		ir.Timeout = durationpb.New(ws.timeout)
	}
	if ws.dur > 0 {
		ir.Duration = durationpb.New(ws.dur)
	}
	if ws.until == nil {
		return ir
	}
	n := c.resolve(ws.until)
	if n == nil {
		return nil
	}
	w := t.w.child("wait.until")
	if n.Kind != yaml.ScalarNode || (n.Tag != "!!str" && n.Tag != "!!timestamp") {
		c.errorf(n, w, untilHint, "wait.until must be a time or an expression, not %s", describe(n))
		return nil
	}
	if !strings.Contains(n.Value, "${{") {
		at, err := time.Parse(time.RFC3339, n.Value)
		if err != nil {
			c.errorf(n, w, untilHint, "invalid time %q: not an RFC 3339 time", truncate(n.Value, 64))
			return nil
		}
		ir.UntilText = at.UTC().Format(time.RFC3339Nano)
		return ir
	}
	sub := *sc
	sub.field = "wait.until"
	checked, _, ok := c.wholeExpr(n, &sub, "wait.until", "string", "${{ inputs.at }}")
	if !ok {
		return nil
	}
	ir.Until, ir.UntilText = &robonetv1.Expr{Source: checked.Canonical}, strings.TrimSpace(n.Value)
	return ir
}

// trigger reads the top-level `trigger: {events: [...]}` and checks that the
// workflow can be started by an event: it declares the input event, and no
// other input is required.
func (c *compiler) trigger(e entry, inputs []*robonetv1.Input) *robonetv1.Trigger {
	w := where{field: "trigger"}
	n := c.resolve(e.value)
	if n == nil {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		c.errorf(n, w, triggerHint, "trigger must be a mapping, not %s", describe(n))
		return nil
	}
	entries, ok := c.mapping(n, w, "trigger")
	if !ok {
		return nil
	}
	fields := c.checkKeys(entries, triggerKeys, w, "trigger")
	ev, ok := fields["events"]
	if !ok {
		c.errorf(e.keyN, w.child("events"), triggerHint, "missing required field \"events\"")
		return nil
	}
	if ev.value == nil { // a misspelt key, reported already
		return nil
	}
	ew := w.child("events")
	list := c.resolve(ev.value)
	if list == nil {
		return nil
	}
	if list.Kind != yaml.SequenceNode {
		c.errorf(list, ew, triggerHint, "trigger.events must be a list of event names, not %s", describe(list))
		return nil
	}
	switch {
	case len(list.Content) == 0:
		c.errorf(list, ew, triggerHint, "trigger.events is empty")
		return nil
	case len(list.Content) > maxTriggerEvents:
		c.errorf(list, ew, "split the workflow, or publish fewer kinds of events",
			"trigger.events has %d events, the limit is %d", len(list.Content), maxTriggerEvents)
		return nil
	}
	ir := &robonetv1.Trigger{}
	valid := true
	for i, item := range list.Content {
		iw := ew.index(i)
		name, ok := c.str(item, iw)
		if !ok {
			valid = false
			continue
		}
		if !eventNameRE.MatchString(name) {
			c.errorf(c.resolve(item), iw, fmt.Sprintf(eventNameHint, "an event", "order.created"), "invalid event name %q", name)
			valid = false
			continue
		}
		ir.Events = append(ir.Events, name)
	}
	i := slices.IndexFunc(inputs, func(in *robonetv1.Input) bool { return in.Name == "event" })
	if i < 0 {
		c.errorf(e.keyN, w, "declare it: inputs: {event: {type: any}}",
			"a workflow with a trigger must declare an input named event: an instance started by an event gets its payload as inputs.event")
		valid = false
	}
	for _, in := range inputs {
		if in.Name != "event" && in.Required {
			c.errorf(e.keyN, w, fmt.Sprintf("give input %q a default, or make it optional (required: false)", in.Name),
				"input %q is required, but an instance started by an event gets only the event input", in.Name)
			valid = false
		}
	}
	if !valid {
		return nil
	}
	slices.Sort(ir.Events)
	ir.Events = slices.Compact(ir.Events)
	return ir
}
