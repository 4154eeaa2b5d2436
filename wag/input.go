package wag

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/robonet/robonet/engine/value"
	"github.com/robonet/robonet/internal/clock"
)

// inputError is a bad input to a built-in action: it names the field and
// says how to fix it.
func inputError(action, field, format string, args ...any) error {
	return fmt.Errorf("%s: input.%s %s", action, field, fmt.Sprintf(format, args...))
}

// inputObject checks that an action's input is an object with only known
// fields.
func inputObject(action string, in any, example string, known ...string) (map[string]any, error) {
	if in == nil {
		return nil, fmt.Errorf("%s: the task has no `with`; give it e.g. with: %s", action, example)
	}
	m, ok := in.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s: `with` must be an object, got %s; e.g. with: %s", action, value.TypeName(in), example)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !slices.Contains(known, k) {
			return nil, fmt.Errorf("%s: unknown field %q in `with` (known: %s)", action, k, strings.Join(known, ", "))
		}
	}
	return m, nil
}

// optString reads an optional string field.
func optString(action string, m map[string]any, field string) (string, error) {
	v, ok := m[field]
	if !ok || v == nil {
		return "", nil
	}
	s, ok := v.(string)
	if !ok {
		return "", inputError(action, field, "must be a string, got %s", value.TypeName(v))
	}
	return s, nil
}

// optDuration reads an optional positive duration field such as "30s".
func optDuration(action string, m map[string]any, field string) (time.Duration, error) {
	v, ok := m[field]
	if !ok || v == nil {
		return 0, nil
	}
	s, ok := v.(string)
	if !ok {
		return 0, inputError(action, field, "must be a duration string such as \"30s\" or \"1m30s\", got %s", value.TypeName(v))
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, inputError(action, field, "%q is not a positive duration; write e.g. \"30s\" or \"1m30s\"", s)
	}
	return d, nil
}

// scalarString renders a scalar for an environment variable or a header.
func scalarString(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case bool:
		return strconv.FormatBool(x), true
	case int64:
		return strconv.FormatInt(x, 10), true
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64), true
	}
	return "", false
}

// stringMap reads an optional object of scalars (env, headers), sorted by key.
func stringMap(action string, m map[string]any, field string) ([][2]string, error) {
	v, ok := m[field]
	if !ok || v == nil {
		return nil, nil
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, inputError(action, field, "must be an object of names to strings, got %s; e.g. %s: {NAME: value}", value.TypeName(v), field)
	}
	out := make([][2]string, 0, len(obj))
	for k, e := range obj {
		s, ok := scalarString(e)
		if !ok {
			return nil, inputError(action, field+"."+k, "must be a string, number or bool, got %s", value.TypeName(e))
		}
		out = append(out, [2]string{k, s})
	}
	slices.SortFunc(out, func(a, b [2]string) int { return strings.Compare(a[0], b[0]) })
	return out, nil
}

// payload turns a stdin or body field into bytes: strings as they are, any
// other value as JSON. isJSON reports the latter.
func payload(action string, m map[string]any, field string) (data []byte, isJSON bool, err error) {
	v, ok := m[field]
	if !ok || v == nil {
		return nil, false, nil
	}
	if s, ok := v.(string); ok {
		return []byte(s), false, nil
	}
	data, err = value.Encode(v)
	if err != nil {
		return nil, false, inputError(action, field, "cannot be encoded as JSON: %v", err)
	}
	return data, true, nil
}

// errTimedOut is the cancel cause of an action's own timeout.
var errTimedOut = errors.New("timed out")

// withTimeout is context.WithTimeout on the injected clock; the cause of
// the cancellation is a "timed out after d" error.
func withTimeout(ctx context.Context, clk clock.Clock, d time.Duration, what string) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	if d <= 0 {
		return ctx, func() { cancel(context.Canceled) }
	}
	t := clk.AfterFunc(d, func() { cancel(fmt.Errorf("%s %w after %v", what, errTimedOut, d)) })
	return ctx, func() {
		t.Stop()
		cancel(context.Canceled)
	}
}

// ctxErr is the reason ctx is done: its cause when there is one.
func ctxErr(ctx context.Context) error {
	if err := context.Cause(ctx); err != nil {
		return err
	}
	return ctx.Err()
}
