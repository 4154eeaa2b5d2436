package wag

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestFitText(t *testing.T) {
	for _, c := range []struct {
		name, in string
		max      int
		want     string
	}{
		{"fits", "disk full", 64, "disk full"},
		{"invalid bytes", "bad \xff\xfe byte", 64, "bad \uFFFD byte"},
		{"NUL", "bad \x00 byte", 64, "bad \uFFFD byte"},
		// The note takes 24 bytes with the 3 digits of 100; 16 are left.
		{"long", strings.Repeat("x", 100), 40, strings.Repeat("x", 16) + " … (84 bytes clipped)"},
		// 20 three-byte runes: the cut backs off to where a rune starts.
		{"long runes", strings.Repeat("€", 20), 40, strings.Repeat("€", 5) + " … (45 bytes clipped)"},
		{"long and invalid", "\xff" + strings.Repeat("y", 100), 40, "\uFFFD" + strings.Repeat("y", 13) + " … (87 bytes clipped)"},
	} {
		got := FitText(c.in, c.max)
		if got != c.want {
			t.Errorf("%s: FitText = %q, want %q", c.name, got, c.want)
		}
		if !utf8.ValidString(got) || strings.Contains(got, "\x00") || len(got) > c.max {
			t.Errorf("%s: %q is %d bytes (max %d), valid UTF-8: %v", c.name, got, len(got), c.max, utf8.ValidString(got))
		}
	}
}

// FuzzFitText: whatever the text, the result is UTF-8 without NUL within
// the bound, and a text that fits is kept as it is.
func FuzzFitText(f *testing.F) {
	f.Add("disk full", 64)
	f.Add("\xff€€€€€€€€€€€€€€€€€€€€€€", 40)
	f.Fuzz(func(t *testing.T, s string, max int) {
		max = 32 + int(uint(max)%1024) // the note needs room; real bounds are KiB
		got := FitText(s, max)
		if !utf8.ValidString(got) || strings.Contains(got, "\x00") || len(got) > max {
			t.Fatalf("FitText(%q, %d) = %q: %d bytes, valid UTF-8: %v", s, max, got, len(got), utf8.ValidString(got))
		}
		if utf8.ValidString(s) && !strings.Contains(s, "\x00") && len(s) <= max && got != s {
			t.Fatalf("FitText(%q, %d) = %q: a text that fits changed", s, max, got)
		}
	})
}
