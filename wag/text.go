package wag

import (
	"fmt"
	"unicode/utf8"

	"github.com/robonet/robonet/engine/port"
)

// Bounds on the text an action gives its attempt. They are the bounds the
// mesh's streams enforce on what a node sends (wag/remote refuses more as
// misbehaviour), so a pool fits its actions' text to them before it
// reports: an action's text is the action's to choose, not the node's.
const (
	// MaxErrorBytes bounds the error text of one attempt.
	MaxErrorBytes = 64 << 10
	// MaxProgressTextBytes bounds an attempt's progress message.
	MaxProgressTextBytes = 4 << 10
)

// FitText returns s as storable text (port.StorableText: UTF-8, no NUL
// byte) of at most max bytes: a longer text keeps its head, cut at a
// rune, and says how much was cut. Protobuf refuses to encode a string
// that is not UTF-8 and the streams refuse longer text, so an action's
// error that is either would otherwise never reach the leader. (Also the
// clip of a worker program's log lines, wag/remote.)
func FitText(s string, max int) string {
	s = port.StorableText(s)
	if len(s) <= max {
		return s
	}
	// Room for the note, with as many digits as the whole text's length
	// has (the count cut has no more), then a cut where a rune starts.
	cut := max - len(clipNote(len(s)))
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + clipNote(len(s)-cut)
}

func clipNote(n int) string { return fmt.Sprintf(" … (%d bytes clipped)", n) }
