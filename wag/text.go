package wag

import (
	"fmt"
	"strings"
	"unicode/utf8"
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

// fitText returns s as UTF-8 (each invalid byte becomes U+FFFD, as
// strings.ToValidUTF8 does for a run of them) of at most max bytes: a
// longer text keeps its head, cut at a rune, and says how much was cut.
// Stores and the API carry text only as UTF-8 (Postgres refuses anything
// else; protobuf refuses to encode it), so an action's error that is not
// would otherwise never reach the leader.
func fitText(s string, max int) string {
	if len(s) <= max && utf8.ValidString(s) {
		return s
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
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
