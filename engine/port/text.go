package port

import (
	"strings"
	"unicode/utf8"
)

// StorableText returns s as text every store keeps as it is and the API
// can send: UTF-8, each run of invalid bytes and each NUL byte replaced
// by U+FFFD. An attempt's error text and worker come from whatever ran it;
// Postgres refuses a NUL byte and anything but UTF-8 in text, and one
// refused row fails the whole group commit that carries it.
func StorableText(s string) string {
	if utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}
