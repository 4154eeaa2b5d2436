package mesh

import (
	"encoding/json"
	"reflect"
	"testing"
)

// decodeCmd renders a command for comparison.
func decodeCmd(t *testing.T, c Command) string {
	t.Helper()
	var body map[string]any
	if err := json.Unmarshal(c.body, &body); err != nil {
		t.Fatal(err)
	}
	switch c.typ {
	case CmdAssignWaggler:
		return "assign " + body["capability"].(string) + " " + body["node"].(string) + " " + jsonNum(body["epoch"])
	case CmdUnassignWaggler:
		return "unassign " + body["capability"].(string) + " " + jsonNum(body["epoch"])
	}
	return "?"
}

func jsonNum(v any) string { b, _ := json.Marshal(v); return string(b) }

func TestPlanWagglers(t *testing.T) {
	w := func(name string, caps ...string) wagglerCandidate {
		m := map[string]int{}
		for _, c := range caps {
			m[c] = 2
		}
		return wagglerCandidate{Name: name, Capabilities: m}
	}
	ranked := func(c wagglerCandidate, rank int) wagglerCandidate { c.Rank = rank; return c }
	lead := func(c wagglerCandidate) wagglerCandidate { c.Leader = true; return c }
	st := func(roles map[string]WagglerAssignment, quarantined ...string) ControlState {
		s := newControlState()
		for c, a := range roles {
			s.Wagglers[c] = a
		}
		for _, q := range quarantined {
			s.Quarantine[q] = QuarantineEntry{}
		}
		return s
	}
	for _, tc := range []struct {
		name     string
		state    ControlState
		eligible []wagglerCandidate
		want     []string
	}{
		{"first roles spread over nodes", st(nil), []wagglerCandidate{w("a", "x", "y"), w("b", "x", "y")},
			[]string{"assign x a 1", "assign y b 1"}},
		{"a held role stays", st(map[string]WagglerAssignment{"x": {Node: "b", Epoch: 4}}), []wagglerCandidate{w("a", "x"), w("b", "x")},
			nil},
		{"a dead holder's role moves, epoch+1", st(map[string]WagglerAssignment{"x": {Node: "gone", Epoch: 4}}), []wagglerCandidate{w("a", "x")},
			[]string{"assign x a 5"}},
		{"a quarantined holder's role moves", st(map[string]WagglerAssignment{"x": {Node: "a", Epoch: 2}}, "a"), []wagglerCandidate{w("a", "x"), w("b", "x")},
			[]string{"assign x b 3"}},
		{"no node serves it: unassigned", st(map[string]WagglerAssignment{"x": {Node: "a", Epoch: 2}}), []wagglerCandidate{w("b", "y")},
			[]string{"unassign x 2", "assign y b 1"}},
		{"served again after removal: a higher epoch", st(map[string]WagglerAssignment{"x": {Epoch: 2}}), []wagglerCandidate{w("b", "x")},
			[]string{"assign x b 3"}},
		{"only nodes that serve it", st(nil), []wagglerCandidate{w("server"), w("worker", "gpu")},
			[]string{"assign gpu worker 1"}},
		{"not the leader while another node serves it", st(nil), []wagglerCandidate{lead(w("a", "x", "y")), w("b", "x"), w("c", "y")},
			[]string{"assign x b 1", "assign y c 1"}},
		{"the leader when only it serves it", st(nil), []wagglerCandidate{lead(w("a", "x")), w("b", "y")},
			[]string{"assign x a 1", "assign y b 1"}},
		{"a role the leader holds stays", st(map[string]WagglerAssignment{"x": {Node: "a", Epoch: 3}}), []wagglerCandidate{lead(w("a", "x")), w("b", "x")},
			nil},
		{"trust before leadership", st(nil), []wagglerCandidate{ranked(lead(w("a", "x")), 2), ranked(w("b", "x"), 1)},
			[]string{"assign x a 1"}},
		{"the most trusted first", st(nil), []wagglerCandidate{w("a", "x"), ranked(w("b", "x"), 2), ranked(w("c", "x"), 1)},
			[]string{"assign x b 1"}},
		{"never a node that betrayed", st(map[string]WagglerAssignment{"x": {Node: "a", Epoch: 2}}), []wagglerCandidate{ranked(w("a", "x"), -1), w("b", "x")},
			[]string{"assign x b 3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, c := range planWagglers(tc.state, tc.eligible) {
				got = append(got, decodeCmd(t, c))
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("plan = %q, want %q", got, tc.want)
			}
		})
	}
}

// Once unassigned, a capability keeps its epoch, so that the next holder
// gets a higher one.
func TestUnassignKeepsTheEpoch(t *testing.T) {
	f := newFSM(nil)
	for i, c := range []Command{AssignWaggler("x", "a", 1), UnassignWaggler("x", 1)} {
		if err := f.apply(uint64(i+1), c.Encode()); err != nil {
			t.Fatal(err)
		}
	}
	if got := f.State().Wagglers["x"]; got != (WagglerAssignment{Epoch: 1}) {
		t.Fatalf("after unassign: %+v", got)
	}
	if err := f.apply(3, AssignWaggler("x", "b", 1).Encode()); err == nil {
		t.Fatal("epoch 1 was assigned again")
	}
	if err := f.apply(4, UnassignWaggler("x", 7).Encode()); err != nil {
		t.Fatal(err)
	}
	if err := f.apply(5, AssignWaggler("x", "b", 2).Encode()); err != nil {
		t.Fatal(err)
	}
}
