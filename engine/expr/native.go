package expr

import (
	"encoding/base64"
	"fmt"
	"math"
	"time"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"

	"github.com/robonet/robonet/engine/value"
)

// toNative converts a CEL result into a canonical value.
func toNative(v ref.Val, depth int) (any, error) {
	if depth > value.MaxDepth {
		return nil, value.ErrTooDeep
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
		return string(x), nil
	case types.Bytes:
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
		return n, nil
	}
	switch x := v.(type) {
	case traits.Lister:
		size := int(x.Size().(types.Int))
		out := make([]any, size)
		for i := 0; i < size; i++ {
			e, err := toNative(x.Get(types.Int(i)), depth+1)
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
			e, err := toNative(x.Get(k), depth+1)
			if err != nil {
				return nil, err
			}
			out[string(ks)] = e
		}
		return out, nil
	}
	return nil, fmt.Errorf("result of type %s cannot be represented in JSON", v.Type().TypeName())
}
