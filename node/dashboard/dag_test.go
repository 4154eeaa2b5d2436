package dashboard

import (
	"strings"
	"testing"
)

func TestLayoutDiamond(t *testing.T) {
	d := layoutDAG([]dagNode{
		{Name: "a", Status: "completed"},
		{Name: "b", Needs: []string{"a"}, Status: "running"},
		{Name: "c", Needs: []string{"a"}, Status: "waiting"},
		{Name: "d", Needs: []string{"b", "c"}, Status: "waiting"},
	})
	at := map[string]placed{}
	for _, n := range d.Nodes {
		at[n.Name] = n
	}
	// Three layers left to right; b and c share the middle one, one above
	// the other; a and d are centred on them.
	if inLayers := at["a"].X < at["b"].X && at["b"].X == at["c"].X && at["c"].X < at["d"].X; !inLayers {
		t.Fatalf("layers: %+v", at)
	}
	if at["b"].Y == at["c"].Y || at["a"].Y != at["d"].Y || at["a"].Y != (at["b"].Y+at["c"].Y)/2 {
		t.Fatalf("rows: a %d, b %d, c %d, d %d", at["a"].Y, at["b"].Y, at["c"].Y, at["d"].Y)
	}
	if len(d.Edges) != 4 || d.Width != 2*pad+3*boxW+2*gapX || d.Height != 2*pad+2*boxH+gapY {
		t.Fatalf("edges %d, size %dx%d", len(d.Edges), d.Width, d.Height)
	}
	for _, e := range d.Edges {
		if !strings.HasPrefix(e.Path, "M") || (e.From == "a" && e.Status != "completed") {
			t.Fatalf("edge %+v", e)
		}
	}
}

// The barycenter sweeps uncross edges: two chains given interleaved come
// out as two straight rows.
func TestLayoutUncrosses(t *testing.T) {
	d := layoutDAG([]dagNode{
		{Name: "a1"}, {Name: "b1"},
		{Name: "b2", Needs: []string{"b1"}}, {Name: "a2", Needs: []string{"a1"}},
		{Name: "a3", Needs: []string{"a2"}}, {Name: "b3", Needs: []string{"b2"}},
	})
	y := map[string]int{}
	for _, n := range d.Nodes {
		y[n.Name] = n.Y
	}
	if y["a1"] != y["a2"] || y["a2"] != y["a3"] || y["b1"] != y["b2"] || y["b2"] != y["b3"] {
		t.Fatalf("rows %v: the chains cross", y)
	}
}

func TestLayoutEmptyAndUnknownNeeds(t *testing.T) {
	if d := layoutDAG(nil); len(d.Nodes) != 0 || d.Width != 2*pad {
		t.Fatalf("empty: %+v", d)
	}
	// A need the view does not list is not drawn (nor does it crash).
	d := layoutDAG([]dagNode{{Name: "x", Needs: []string{"gone"}}})
	if len(d.Nodes) != 1 || len(d.Edges) != 0 {
		t.Fatalf("%+v", d)
	}
}

func TestClip(t *testing.T) {
	if got := clip("short", 10); got != "short" {
		t.Fatal(got)
	}
	if got := clip("ünïcödé-name-that-is-long", 8); got != "ünïcödé…" {
		t.Fatal(got)
	}
}
