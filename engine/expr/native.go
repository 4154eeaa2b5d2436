package expr

import (
	"encoding/base64"
	"fmt"
	"math"
	"reflect"
	"time"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"

	"github.com/robonet/robonet/engine/value"
)

// converter turns a CEL result into a canonical value, counting its size
// (as JSON, roughly) against a limit. A result may hold the same large value
// many times (a list mapped to one input), so values that came from the
// scope are sized once per identity.
type converter struct {
	left  int
	sizes map[any]int // scope value identity → size
}

// charge counts n bytes; it fails once the result has passed its limit.
func (c *converter) charge(n int, limit int) error {
	if c.left -= n; c.left < 0 {
		return fmt.Errorf("result is larger than %d bytes, the limit: %w", limit, value.ErrTooLarge)
	}
	return nil
}

// toNative converts a CEL result into a canonical value.
func (c *converter) toNative(v ref.Val, depth int) (any, error) {
	limit := c.left
	return c.convert(v, depth, limit)
}

func (c *converter) convert(v ref.Val, depth, limit int) (any, error) {
	if depth > value.MaxDepth {
		return nil, value.ErrTooDeep
	}
	if err := c.charge(8, limit); err != nil {
		return nil, err
	}
	switch x := v.(type) {
	case types.Null:
		return nil, nil
	case types.Bool:
		return bool(x), nil
	case types.Int:
		return int64(x), nil
	case types.Uint:
		if uint64(x) > math.MaxInt64 {
			return float64(x), nil
		}
		return int64(x), nil
	case types.Double:
		f := float64(x)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("result %v is not a JSON number", f)
		}
		return f, nil
	case types.String:
		if err := c.charge(len(x), limit); err != nil {
			return nil, err
		}
		return string(x), nil
	case types.Bytes:
		if err := c.charge(len(x)*4/3, limit); err != nil {
			return nil, err
		}
		return base64.StdEncoding.EncodeToString(x), nil
	case types.Duration:
		return x.String(), nil
	case types.Timestamp:
		return x.Time.UTC().Format(time.RFC3339Nano), nil
	case *types.Err:
		return nil, x
	}
	// Values that came from the scope unchanged are already canonical.
	switch n := v.Value().(type) {
	case map[string]any, []any:
		if err := c.charge(c.scopeSize(n, limit), limit); err != nil {
			return nil, err
		}
		return n, nil
	}
	switch x := v.(type) {
	case traits.Lister:
		size := int(x.Size().(types.Int))
		out := make([]any, size)
		for i := 0; i < size; i++ {
			e, err := c.convert(x.Get(types.Int(i)), depth+1, limit)
			if err != nil {
				return nil, err
			}
			out[i] = e
		}
		return out, nil
	case traits.Mapper:
		out := make(map[string]any, int(x.Size().(types.Int)))
		for it := x.Iterator(); it.HasNext() == types.True; {
			k := it.Next()
			ks, ok := k.(types.String)
			if !ok {
				return nil, fmt.Errorf("map key %v is a %s; only string keys can be represented in JSON", k, k.Type().TypeName())
			}
			if err := c.charge(len(ks), limit); err != nil {
				return nil, err
			}
			e, err := c.convert(x.Get(k), depth+1, limit)
			if err != nil {
				return nil, err
			}
			out[string(ks)] = e
		}
		return out, nil
	}
	return nil, fmt.Errorf("result of type %s cannot be represented in JSON", v.Type().TypeName())
}

// scopeSize returns the size of a list or map from the scope, measuring
// each one (by identity) once.
func (c *converter) scopeSize(v any, limit int) int {
	id := identity(v)
	if n, ok := c.sizes[id]; ok {
		return n
	}
	n := value.Size(v, limit)
	if c.sizes == nil {
		c.sizes = make(map[any]int)
	}
	c.sizes[id] = n
	return n
}

// identity names a map or a slice by where it lives: the same value reached
// twice has the same identity.
func identity(v any) any {
	switch x := v.(type) {
	case map[string]any:
		return reflect.ValueOf(x).UnsafePointer()
	case []any:
		return [2]uintptr{reflect.ValueOf(x).Pointer(), uintptr(len(x))}
	}
	return nil
}
