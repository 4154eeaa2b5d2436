package spec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// parse turns the source into the root node of its single YAML document. It
// reports (and returns nil for) oversized, non-UTF-8, empty, malformed and
// multi-document input.
func (c *compiler) parse() *yaml.Node {
	if len(c.src) > c.limits.MaxSpecBytes {
		c.errorAt(0, 0, where{}, "split the workflow, or move large constants into inputs",
			"spec is %d bytes, the limit is %d", len(c.src), c.limits.MaxSpecBytes)
		return nil
	}
	if !utf8.Valid(c.src) {
		line, col := c.offsetPosition(firstInvalidUTF8(c.src))
		c.errorAt(line, col, where{}, "save the file as UTF-8", "spec is not valid UTF-8")
		return nil
	}
	dec := yaml.NewDecoder(bytes.NewReader(c.src))
	var doc yaml.Node
	if err := safeDecode(dec, &doc); err != nil {
		if errors.Is(err, io.EOF) {
			c.errorAt(0, 0, where{}, "a spec needs at least name, version and tasks", "spec is empty")
			return nil
		}
		c.yamlError(err)
		return nil
	}
	var next yaml.Node
	switch err := safeDecode(dec, &next); {
	case err == nil:
		c.errorf(&next, where{}, "put each workflow in its own file",
			"spec holds more than one YAML document (separated by ---)")
		return nil
	case !errors.Is(err, io.EOF):
		c.yamlError(err)
		return nil
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		c.errorAt(0, 0, where{}, "a spec needs at least name, version and tasks", "spec is empty")
		return nil
	}
	return doc.Content[0]
}

// safeDecode decodes the next document, turning a panic inside the YAML
// library into an error: a spec must never crash the process that compiles it.
func safeDecode(dec *yaml.Decoder, n *yaml.Node) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("yaml: the YAML parser failed on this input: %v", r)
		}
	}()
	return dec.Decode(n)
}

// yamlLineRE splits a YAML library error into its line and message.
var yamlLineRE = regexp.MustCompile(`^(?:yaml: )?(?:line (\d+): )?(.*)$`)

// parserMessages are errors of the YAML parser (as opposed to its scanner).
// The library reports their line 0-based, and often the line where the
// enclosing block starts; we add one to make it 1-based.
var parserMessages = []string{
	"did not find expected ',' or ']'",
	"did not find expected ',' or '}'",
	"did not find expected '-' indicator",
	"did not find expected <document start>",
	"did not find expected <stream-start>",
	"did not find expected key",
	"did not find expected node content",
	"found duplicate %TAG directive",
	"found duplicate %YAML directive",
	"found incompatible YAML document",
}

// yamlError reports a syntax error from the YAML library in our own words.
// JSON specs get the precise position from encoding/json instead.
func (c *compiler) yamlError(err error) {
	if c.looksLikeJSON() && c.jsonError() {
		return
	}
	m := yamlLineRE.FindStringSubmatch(err.Error())
	msg := m[2]
	line, _ := strconv.Atoi(m[1])
	if contains(parserMessages, msg) {
		line = c.parserErrorLine(msg, line)
	} else if line == 0 {
		line = 1 // the library leaves out the line when it is the first
	}
	col := 0
	if name, ok := strings.CutPrefix(msg, "unknown anchor '"); ok {
		// The library does not say where the alias is; find it ourselves.
		name = strings.TrimSuffix(name, "' referenced")
		if off := bytes.Index(c.src, []byte("*"+name)); off >= 0 {
			line, col = c.offsetPosition(off)
		}
	}
	if msg == "control characters are not allowed" {
		if off := bytes.IndexFunc(c.src, isControl); off >= 0 {
			line, col = c.offsetPosition(off)
		}
	}
	msg = strings.ReplaceAll(msg, " in this context", " here")
	c.errorAt(line, col, where{}, yamlHint(msg, c.lineText(line)), "invalid YAML: %s", msg)
}

// parserErrorLine finds the line of a YAML parser error. The library reports
// the line where the enclosing block starts (0-based), which can be far from
// the mistake, so we look for the shortest prefix of the source, in whole
// lines, that fails with the same message: its last line is where the parser
// gave up. reported is the library's line, used when the search finds nothing.
func (c *compiler) parserErrorLine(msg string, reported int) int {
	lines := bytes.SplitAfter(c.src, []byte("\n"))
	fails := func(k int) bool {
		var n yaml.Node
		err := safeDecode(yaml.NewDecoder(bytes.NewReader(bytes.Join(lines[:k], nil))), &n)
		return err != nil && strings.HasSuffix(err.Error(), msg)
	}
	// Binary search for the smallest failing prefix; parser errors stay
	// once the offending line is included.
	lo, hi := 1, len(lines)
	if !fails(hi) {
		return reported + 1
	}
	for lo < hi {
		mid := (lo + hi) / 2
		if fails(mid) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

// yamlHint suggests a fix for common YAML mistakes.
func yamlHint(msg, line string) string {
	switch {
	case strings.Contains(line, "\t") && (strings.Contains(msg, "tab") || strings.Contains(msg, "cannot start any token")):
		return "indent with spaces; YAML does not allow tabs for indentation"
	case strings.HasPrefix(msg, "mapping values are not allowed"):
		return `quote values that contain ": ", or check the indentation`
	case strings.HasPrefix(msg, "found character that cannot start any token"):
		return "quote values that start with @, ` or %"
	case msg == "found unexpected end of stream":
		return "a quote or bracket is not closed"
	case strings.HasPrefix(msg, "did not find expected"):
		return "check the indentation and the brackets around this line"
	}
	return ""
}

func isControl(r rune) bool {
	return r < 0x20 && r != '\n' && r != '\r' && r != '\t'
}

// looksLikeJSON reports whether the source starts (after blanks) with '{'.
func (c *compiler) looksLikeJSON() bool {
	trimmed := bytes.TrimLeft(c.src, " \t\r\n\ufeff")
	return len(trimmed) > 0 && trimmed[0] == '{'
}

// jsonError reports the syntax error encoding/json finds in the source, with
// its exact position. It returns false when encoding/json finds none.
func (c *compiler) jsonError() bool {
	var v any
	err := json.Unmarshal(c.src, &v)
	var syn *json.SyntaxError
	if !errors.As(err, &syn) {
		return false
	}
	off := int(syn.Offset) - 1 // Offset counts the bytes read, including the bad one
	if off < 0 {
		off = 0
	}
	line, col := c.offsetPosition(off)
	hint := ""
	if strings.Contains(syn.Error(), "after object key:value pair") || strings.Contains(syn.Error(), "after array element") {
		hint = "a comma is probably missing"
	}
	c.errorAt(line, col, where{}, hint, "invalid JSON: %s", syn.Error())
	return true
}

// offsetPosition converts a byte offset in the source into a 1-based line and
// a 1-based column counted in runes.
func (c *compiler) offsetPosition(off int) (line, col int) {
	off = min(max(off, 0), len(c.src))
	before := c.src[:off]
	line = bytes.Count(before, []byte("\n")) + 1
	lineStart := bytes.LastIndexByte(before, '\n') + 1
	col = utf8.RuneCount(before[lineStart:]) + 1
	return line, col
}

// firstInvalidUTF8 returns the byte offset of the first invalid UTF-8 sequence.
func firstInvalidUTF8(b []byte) int {
	for off := 0; off < len(b); {
		r, size := utf8.DecodeRune(b[off:])
		if r == utf8.RuneError && size <= 1 {
			return off
		}
		off += size
	}
	return len(b)
}
