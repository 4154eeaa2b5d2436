package spec

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Error is one problem found in a spec. It says where the problem is (file,
// line, column, task and field), what is wrong (Msg) and, when we know, how
// to fix it (Hint).
type Error struct {
	// File is the file name given to Compile.
	File string
	// Line and Column are 1-based; 0 means unknown. Columns count characters
	// (runes), not bytes.
	Line, Column int
	// Task is the name of the task the problem is in; empty outside tasks.
	Task string
	// Field is the path of the offending field inside the task (or inside the
	// spec for problems outside tasks), e.g. "with.url", "needs[1]",
	// "retry.backoff.initial", "inputs.targets.type", "outputs.report".
	Field string
	// Msg says what is wrong.
	Msg string
	// Hint says how to fix it; may be empty.
	Hint string
}

// Error formats the problem on one line, omitting the parts that are empty:
//
//	file:line:col: task "probe": needs[0]: unknown task "discovr"; did you mean "discover"?
//
// The hint, when there is one, follows the message after "; ".
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.position())
	if e.Task != "" {
		b.WriteString("task " + strconv.Quote(e.Task) + ": ")
	}
	if e.Field != "" {
		b.WriteString(e.Field + ": ")
	}
	b.WriteString(e.Msg)
	if e.Hint != "" {
		b.WriteString("; " + e.Hint)
	}
	return b.String()
}

// position renders "file:line:col: " with the unknown parts left out.
func (e *Error) position() string {
	var parts []string
	if e.File != "" {
		parts = append(parts, e.File)
	}
	if e.Line > 0 {
		parts = append(parts, strconv.Itoa(e.Line))
		if e.Column > 0 {
			parts = append(parts, strconv.Itoa(e.Column))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return strings.Join(parts, ":") + ": "
}

// ErrorList is every problem found in a spec, sorted by position. Compile
// returns it as its error; use errors.As to get at the individual errors.
type ErrorList []*Error

// Error returns one line per problem.
func (l ErrorList) Error() string {
	lines := make([]string, len(l))
	for i, e := range l {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// sortByPosition orders errors by line, then column. Errors without a
// position (whole-file problems) come first; errors on the same spot keep the
// order they were found in.
func (l ErrorList) sortByPosition() {
	slices.SortStableFunc(l, func(a, b *Error) int {
		if c := cmp.Compare(a.Line, b.Line); c != 0 {
			return c
		}
		return cmp.Compare(a.Column, b.Column)
	})
}

// suggest returns the candidate the user most likely meant by word, or "" when
// none is close. A candidate is close when it is at most two edits away, or
// when one of the two is a prefix of the other ("integer" and "int").
// synonyms maps common words from other languages to ours ("array" to
// "list"); it may be nil.
func suggest(word string, candidates []string, synonyms map[string]string) string {
	lower := strings.ToLower(word)
	if s, ok := synonyms[lower]; ok {
		return s
	}
	best, bestDist := "", 3
	for _, c := range candidates {
		if c == word {
			continue
		}
		d := levenshtein(lower, strings.ToLower(c))
		if d < bestDist || (d == bestDist && best != "" && c < best) {
			best, bestDist = c, d
		}
	}
	if best != "" && bestDist < len([]rune(word)) {
		return best
	}
	for _, c := range sortedCopy(candidates) {
		if isPrefixPair(lower, strings.ToLower(c)) {
			return c
		}
	}
	return ""
}

// isPrefixPair reports whether one word starts with the other, the shorter
// being at least three characters long.
func isPrefixPair(a, b string) bool {
	if len(a) > len(b) {
		a, b = b, a
	}
	return len(a) >= 3 && strings.HasPrefix(b, a)
}

// levenshtein counts the single-character insertions, deletions and
// substitutions that turn a into b.
func levenshtein(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

// didYouMean builds the hint for an unknown name: a suggestion when one is
// close, otherwise the list of valid names (when it is short enough to read).
func didYouMean(word string, candidates []string, synonyms map[string]string, what string) string {
	if s := suggest(word, candidates, synonyms); s != "" {
		return fmt.Sprintf("did you mean %q?", s)
	}
	if len(candidates) == 0 {
		return ""
	}
	if len(candidates) > 12 {
		return ""
	}
	return fmt.Sprintf("valid %s: %s", what, strings.Join(sortedCopy(candidates), ", "))
}

func sortedCopy(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}
