package engine_test

import (
	"testing"

	"github.com/robonet/robonet/engine/port"
)

func TestStorableText(t *testing.T) {
	for in, want := range map[string]string{
		"":                       "",
		"exit status 1\n\ttrace": "exit status 1\n\ttrace", // other control characters are kept
		"a\x00b":                 "a\uFFFDb",
		"a\xff\xfeb":             "a\uFFFDb", // one run, one replacement
		"€\x00\xe2\x82":          "€\uFFFD\uFFFD",
	} {
		if got := port.StorableText(in); got != want {
			t.Errorf("StorableText(%q) = %q, want %q", in, got, want)
		}
	}
}
