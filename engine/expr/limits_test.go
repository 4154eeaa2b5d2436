package expr

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/ext"

	"github.com/robonet/robonet/engine/value"
)

func evalErr(t *testing.T, env *Env, src string, s Scope) error {
	t.Helper()
	p, err := env.Compile(src)
	if err != nil {
		t.Fatalf("Compile(%q): %v", src, err)
	}
	_, err = p.Eval(s)
	return err
}

// The comprehension that stalled the engine in cel-go v0.32 (runtime cost
// tracking was quadratic in the iterations) now costs what it says, and a
// comprehension past the per-evaluation cost limit is stopped by it.
//
// The time watchdog is set far out: under -race on a loaded machine the
// million units can take longer than the default second, and it is the
// cost limit this test is about (TestEvalTimeLimit covers the watchdog).
func TestEvalCostLimit(t *testing.T) {
	env, err := NewEnv(Limits{MaxEvalTime: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if err := evalErr(t, env, "lists.range(30000).all(y, y + 1 >= 0)", testScope{}); err != nil {
		t.Fatalf("30k-element all(): %v", err)
	}
	err = evalErr(t, env, "lists.range(100000).all(y, y + 1 >= 0) && lists.range(100000).all(y, y + 2 >= 0)", testScope{})
	if !errors.Is(err, ErrEval) || !strings.Contains(err.Error(), "evaluation cost more than 1000000 units, the limit") {
		t.Fatalf("two 100k-element all() = %v, want the cost limit named", err)
	}
	err = evalErr(t, env, "lists.range(inputs.n).size()", testScope{inputs: map[string]any{"n": int64(200_000)}})
	if !errors.Is(err, ErrEval) || !strings.Contains(err.Error(), "lists.range: size 200000 exceeds maximum allowed (100000)") {
		t.Fatalf("a 200k range = %v, want the range limit named", err)
	}
}

// MaxEvalTime interrupts a comprehension that cost units let through.
func TestEvalTimeLimit(t *testing.T) {
	env, err := NewEnv(Limits{MaxCost: 1 << 62, MaxEvalCost: 1 << 62, MaxEvalTime: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	l := make([]any, 100_000)
	for i := range l {
		l[i] = int64(i)
	}
	err = evalErr(t, env, "inputs.l.all(x, inputs.l.exists(y, y == x))", testScope{inputs: map[string]any{"l": l}})
	if !errors.Is(err, ErrEval) || !strings.Contains(err.Error(), "evaluation took longer than 20ms, the limit") {
		t.Fatalf("got %v, want the time limit named", err)
	}
	// Generous: the point is that it stopped, not that it stopped exactly at 20 ms.
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("interrupted evaluation took %s", el)
	}
}

// A result built from references to one large value is refused by size,
// before anything encodes it.
func TestEvalResultSizeLimit(t *testing.T) {
	env := newEnv(t)
	s := testScope{inputs: map[string]any{
		"big":  strings.Repeat("x", 100_000),
		"bigl": []any{strings.Repeat("y", 100_000)},
	}}
	for _, src := range []string{
		"lists.range(1000).map(i, inputs.big)",
		"lists.range(1000).map(i, inputs.bigl)",
		"lists.range(1000).map(i, {'k': inputs.bigl})",
	} {
		err := evalErr(t, env, src, s)
		if !errors.Is(err, value.ErrTooLarge) || !strings.Contains(err.Error(), "larger than 4194304 bytes, the limit") {
			t.Errorf("%s = %v, want the result size limit", src, err)
		}
	}
	if err := evalErr(t, env, "lists.range(10).map(i, inputs.big)", s); err != nil {
		t.Errorf("a 1 MB result: %v", err)
	}
	tmpl := &Template{kind: tInterp, maxBytes: 150_000}
	p, err := env.Compile("inputs.big")
	if err != nil {
		t.Fatal(err)
	}
	tmpl.parts = []part{{prog: p}, {text: "-"}, {prog: p}}
	if _, err := tmpl.Eval(s); !errors.Is(err, value.ErrTooLarge) {
		t.Errorf("interpolating 200 KB under a 150 KB limit = %v, want ErrTooLarge", err)
	}
}

func TestReplaceRefusesHugeResults(t *testing.T) {
	env := newEnv(t)
	s := testScope{inputs: map[string]any{"s": strings.Repeat("a", 100_000), "t": strings.Repeat("b", 1000)}}
	err := evalErr(t, env, `inputs.s.replace("", inputs.t)`, s)
	if err == nil || !strings.Contains(err.Error(), "replace() would build a string of 100101000 bytes, the limit is 4194304") {
		t.Fatalf("got %v", err)
	}
}

type budgetScope struct {
	testScope
	left uint64
}

func (b *budgetScope) Spend(units uint64) error {
	if units > b.left {
		b.left = 0
		return fmt.Errorf("budget exhausted")
	}
	b.left -= units
	return nil
}

func TestEvalChargesTheBudget(t *testing.T) {
	env := newEnv(t)
	s := &budgetScope{left: 100_000}
	p, err := env.Compile("lists.range(10000).all(y, y >= 0)") // ~60k units
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Eval(s); err != nil {
		t.Fatalf("first evaluation: %v", err)
	}
	if s.left >= 100_000 || s.left < 30_000 {
		t.Fatalf("budget left %d after one evaluation", s.left)
	}
	if _, err := p.Eval(s); err == nil || !strings.Contains(err.Error(), "budget exhausted") {
		t.Fatalf("second evaluation = %v, want the budget's error", err)
	}
}

// The bounded replacements of indexOf, lastIndexOf, replace and distinct
// answer what the extensions' own implementations answer.
func TestBoundedBuiltinsMatchTheExtensions(t *testing.T) {
	ours := newEnv(t)
	theirs, err := cel.NewEnv(ext.Strings(), ext.Lists(), cel.Variable("s", cel.StringType), cel.Variable("t", cel.StringType),
		cel.Variable("l", cel.ListType(cel.DynType)), cel.Variable("n", cel.IntType))
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", "b", "é", "日", ""}
	word := func(n int) string {
		var b strings.Builder
		for range rng.IntN(n + 1) {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		return b.String()
	}
	scalars := []any{int64(1), 1.0, uint64(1), "1", int64(2), 2.5, "a", true, false, nil, []any{int64(1)}, []any{1.0},
		map[string]any{"a": int64(1)}, map[string]any{"a": 1.0}}
	exprs := []string{"s.indexOf(t)", "s.indexOf(t, n)", "s.lastIndexOf(t)", "s.lastIndexOf(t, n)",
		"s.replace(t, 'xy')", "s.replace(t, '', n)", "l.distinct()"}
	for i := range 3000 {
		src := exprs[i%len(exprs)]
		var l []any
		for range rng.IntN(8) {
			l = append(l, scalars[rng.IntN(len(scalars))])
		}
		vars := map[string]any{"s": word(12), "t": word(3), "n": int64(rng.IntN(16) - 2), "l": l}
		want, wantErr := evalWith(theirs, src, vars)
		got, gotErr := evalWith(ours.cel, src, vars)
		if (wantErr != nil) != (gotErr != nil) || (wantErr == nil && !value.Equal(want, got)) {
			t.Fatalf("%s with %v: ours %v, %v; the extension's %v, %v", src, vars, got, gotErr, want, wantErr)
		}
	}
}

// evalWith evaluates src with plain variables (no workflow scope), for the
// differential test.
func evalWith(env *cel.Env, src string, vars map[string]any) (any, error) {
	env, err := env.Extend(cel.Variable("s", cel.StringType), cel.Variable("t", cel.StringType),
		cel.Variable("l", cel.ListType(cel.DynType)), cel.Variable("n", cel.IntType))
	if err != nil {
		return nil, err
	}
	ast, iss := env.Compile(src)
	if iss.Err() != nil {
		return nil, iss.Err()
	}
	prg, err := env.Program(ast)
	if err != nil {
		return nil, err
	}
	out, _, err := prg.Eval(vars)
	if err != nil {
		return nil, err
	}
	c := converter{left: 1 << 30}
	return c.toNative(out, 0)
}

// distinct of a long list of scalars is linear; the extension's pairwise
// version took minutes on lists this long.
func TestDistinctIsLinearForScalars(t *testing.T) {
	// The cost model charges distinct() for pairwise comparison, so only a
	// raised cost limit lets it run on a list this long; the point here is
	// that the call itself returns at once.
	env, err := NewEnv(Limits{MaxEvalCost: 1 << 62})
	if err != nil {
		t.Fatal(err)
	}
	p, err := env.Compile("inputs.l.distinct().size()")
	if err != nil {
		t.Fatal(err)
	}
	l := make([]any, 200_000)
	for i := range l {
		l[i] = int64(i)
	}
	v, err := p.Eval(testScope{inputs: map[string]any{"l": l}})
	if err != nil || v != int64(200_000) {
		t.Fatalf("distinct().size() = %v, %v", v, err)
	}
	nested := make([]any, maxQuadraticDistinct+1)
	for i := range nested {
		nested[i] = []any{int64(i)}
	}
	if _, err := p.Eval(testScope{inputs: map[string]any{"l": nested}}); err == nil || !strings.Contains(err.Error(), "more than 2000 lists or maps") {
		t.Fatalf("distinct of 2001 lists = %v, want the limit", err)
	}
}
