package value

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// Decode parses one JSON value into canonical form (the same value
// encoding/json with UseNumber followed by Normalize gives): whole numbers
// written without a fraction or exponent that fit become int64, other
// numbers float64; invalid UTF-8 and lone surrogates in strings become
// U+FFFD; a repeated object key keeps its last value. Only white space may
// follow the value. Values nested deeper than MaxDepth are refused with
// ErrTooDeep.
//
// It is a single pass that builds the canonical value directly (no
// reflection, no intermediate json.Number tree): every task's inputs and
// outputs crossing the mesh pass through it.
func Decode(data []byte) (any, error) {
	d := decoder{data: data}
	d.space()
	if d.i == len(d.data) {
		return nil, errors.New("invalid JSON: unexpected end of input (no value)")
	}
	v, err := d.value(0)
	if err != nil {
		return nil, err
	}
	d.space()
	if d.i < len(d.data) {
		return nil, d.syntax("unexpected data after the value")
	}
	return v, nil
}

// decoder reads data from i on.
type decoder struct {
	data []byte
	i    int
	buf  []byte // scratch for strings with escapes or invalid UTF-8
}

// syntax is an error naming where in the text it was found.
func (d *decoder) syntax(what string) error {
	return fmt.Errorf("invalid JSON: %s at offset %d", what, d.i)
}

// unexpected is the error for the byte at d.i (or the end of the input).
func (d *decoder) unexpected(context string) error {
	if d.i >= len(d.data) {
		return d.syntax("unexpected end of input " + context)
	}
	return d.syntax(fmt.Sprintf("invalid character %s %s", strconv.QuoteRune(rune(d.data[d.i])), context))
}

func (d *decoder) space() {
	for d.i < len(d.data) {
		switch d.data[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// literal consumes word (true, false, null) or fails.
func (d *decoder) literal(word string, v any) (any, error) {
	if len(d.data)-d.i < len(word) || string(d.data[d.i:d.i+len(word)]) != word {
		// Point at the first byte that differs.
		for k := 0; k < len(word) && d.i < len(d.data) && d.data[d.i] == word[k]; k++ {
			d.i++
		}
		return nil, d.unexpected("in literal " + word)
	}
	d.i += len(word)
	return v, nil
}

// value parses the value at d.i (white space already skipped), depth levels
// below the root.
func (d *decoder) value(depth int) (any, error) {
	if depth > MaxDepth {
		return nil, ErrTooDeep
	}
	if d.i >= len(d.data) {
		return nil, d.unexpected("looking for a value")
	}
	switch c := d.data[d.i]; {
	case c == '{':
		return d.object(depth)
	case c == '[':
		return d.array(depth)
	case c == '"':
		s, err := d.str()
		if err != nil {
			return nil, err
		}
		return s, nil
	case c == 't':
		return d.literal("true", true)
	case c == 'f':
		return d.literal("false", false)
	case c == 'n':
		return d.literal("null", nil)
	case c == '-' || (c >= '0' && c <= '9'):
		return d.number()
	}
	return nil, d.unexpected("looking for a value")
}

func (d *decoder) array(depth int) (any, error) {
	d.i++ // [
	out := []any{}
	d.space()
	if d.i < len(d.data) && d.data[d.i] == ']' {
		d.i++
		return out, nil
	}
	for {
		d.space()
		v, err := d.value(depth + 1)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
		done, err := d.separator(']', "an array element")
		if err != nil {
			return nil, err
		}
		if done {
			return out, nil
		}
	}
}

func (d *decoder) object(depth int) (any, error) {
	d.i++ // {
	out := map[string]any{}
	d.space()
	if d.i < len(d.data) && d.data[d.i] == '}' {
		d.i++
		return out, nil
	}
	for {
		d.space()
		if d.i >= len(d.data) || d.data[d.i] != '"' {
			return nil, d.unexpected("looking for an object key")
		}
		k, err := d.str()
		if err != nil {
			return nil, err
		}
		d.space()
		if d.i >= len(d.data) || d.data[d.i] != ':' {
			return nil, d.unexpected("after an object key (want ':')")
		}
		d.i++
		d.space()
		v, err := d.value(depth + 1)
		if err != nil {
			return nil, err
		}
		out[k] = v
		done, err := d.separator('}', "an object value")
		if err != nil {
			return nil, err
		}
		if done {
			return out, nil
		}
	}
}

// separator consumes the ',' or the closing end that follows an element
// of a list or map; done reports the end.
func (d *decoder) separator(end byte, after string) (done bool, err error) {
	d.space()
	if d.i < len(d.data) {
		switch d.data[d.i] {
		case ',':
			d.i++
			return false, nil
		case end:
			d.i++
			return true, nil
		}
	}
	return false, d.unexpected(fmt.Sprintf("after %s (want ',' or '%c')", after, end))
}

// number parses a JSON number: int64 when written without a fraction or
// exponent and in range, float64 otherwise; out-of-range floats are refused.
func (d *decoder) number() (any, error) {
	start := d.i
	if d.data[d.i] == '-' {
		d.i++
	}
	digits := func() int {
		n := 0
		for d.i < len(d.data) && d.data[d.i] >= '0' && d.data[d.i] <= '9' {
			d.i++
			n++
		}
		return n
	}
	switch {
	case d.i < len(d.data) && d.data[d.i] == '0':
		d.i++
	case digits() == 0:
		return nil, d.unexpected("in a number (want a digit)")
	}
	whole := true
	if d.i < len(d.data) && d.data[d.i] == '.' {
		d.i++
		whole = false
		if digits() == 0 {
			return nil, d.unexpected("after a decimal point (want a digit)")
		}
	}
	if d.i < len(d.data) && (d.data[d.i] == 'e' || d.data[d.i] == 'E') {
		d.i++
		whole = false
		if d.i < len(d.data) && (d.data[d.i] == '+' || d.data[d.i] == '-') {
			d.i++
		}
		if digits() == 0 {
			return nil, d.unexpected("in an exponent (want a digit)")
		}
	}
	text := d.data[start:d.i]
	if whole {
		if n, ok := parseInt(text); ok {
			return n, nil
		}
	}
	return numberFromString(string(text))
}

// parseInt parses an optionally signed run of decimal digits into int64,
// reporting false when it does not fit.
func parseInt(text []byte) (int64, bool) {
	neg := text[0] == '-'
	if neg {
		text = text[1:]
	}
	if len(text) > 19 {
		return 0, false
	}
	var u uint64
	for _, c := range text {
		u = u*10 + uint64(c-'0') // 19 digits cannot overflow a uint64
	}
	switch {
	case !neg && u <= math.MaxInt64:
		return int64(u), true
	case neg && u <= 1<<63:
		return -int64(u), true // -(1<<63) wraps to MinInt64, as wanted
	}
	return 0, false
}

// str parses a JSON string at d.i (the opening quote).
func (d *decoder) str() (string, error) {
	d.i++ // "
	start := d.i
	// The common case: ASCII without escapes — one allocation.
	for d.i < len(d.data) {
		c := d.data[d.i]
		switch {
		case c == '"':
			s := string(d.data[start:d.i])
			d.i++
			return s, nil
		case c == '\\' || c >= utf8.RuneSelf:
			return d.strSlow(start)
		case c < 0x20:
			return "", d.unexpected("in a string (control characters must be escaped)")
		}
		d.i++
	}
	return "", d.unexpected("in a string")
}

// strSlow finishes a string that holds escapes or non-ASCII bytes, from
// start (just after the opening quote); d.i is at the first such byte.
func (d *decoder) strSlow(start int) (string, error) {
	b := append(d.buf[:0], d.data[start:d.i]...)
	for d.i < len(d.data) {
		c := d.data[d.i]
		switch {
		case c == '"':
			d.i++
			d.buf = b
			return string(b), nil
		case c < 0x20:
			return "", d.unexpected("in a string (control characters must be escaped)")
		case c >= utf8.RuneSelf:
			r, size := utf8.DecodeRune(d.data[d.i:])
			if r == utf8.RuneError && size == 1 {
				b = utf8.AppendRune(b, utf8.RuneError) // as encoding/json does
			} else {
				b = append(b, d.data[d.i:d.i+size]...)
			}
			d.i += size
		case c != '\\':
			b = append(b, c)
			d.i++
		default:
			d.i++
			if d.i >= len(d.data) {
				return "", d.unexpected("in a string escape")
			}
			e := d.data[d.i]
			d.i++
			switch e {
			case '"', '\\', '/':
				b = append(b, e)
			case 'b':
				b = append(b, '\b')
			case 'f':
				b = append(b, '\f')
			case 'n':
				b = append(b, '\n')
			case 'r':
				b = append(b, '\r')
			case 't':
				b = append(b, '\t')
			case 'u':
				r, ok := d.hex4()
				if !ok {
					return "", d.unexpected("in a \\u escape (want four hex digits)")
				}
				if utf16.IsSurrogate(r) {
					// A pair makes one rune; a lone half is U+FFFD, and what
					// follows it is read as itself.
					if d.i+1 < len(d.data) && d.data[d.i] == '\\' && d.data[d.i+1] == 'u' {
						save := d.i
						d.i += 2
						if r2, ok := d.hex4(); ok {
							if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
								b = utf8.AppendRune(b, dec)
								continue
							}
						}
						d.i = save
					}
					r = utf8.RuneError
				}
				b = utf8.AppendRune(b, r)
			default:
				d.i--
				return "", d.unexpected("in a string escape")
			}
		}
	}
	return "", d.unexpected("in a string")
}

// hex4 reads four hex digits at d.i.
func (d *decoder) hex4() (rune, bool) {
	if len(d.data)-d.i < 4 {
		return 0, false
	}
	var r rune
	for _, c := range d.data[d.i : d.i+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	d.i += 4
	return r, true
}
