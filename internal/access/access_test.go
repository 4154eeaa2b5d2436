package access

import (
	"context"
	"strings"
	"testing"
)

func TestRoleAllows(t *testing.T) {
	order := []Role{Read, Submit, Operate, Admin}
	for i, r := range order {
		for j, need := range order {
			if got := r.Allows(need); got != (i >= j) {
				t.Errorf("%s.Allows(%s) = %v", r, need, got)
			}
		}
		if r.Allows(Worker) != (r == Admin) {
			t.Errorf("%s.Allows(worker) = %v", r, r.Allows(Worker))
		}
		if Worker.Allows(r) {
			t.Errorf("worker.Allows(%s)", r)
		}
	}
	if !Worker.Allows(Worker) || None.Allows(Read) {
		t.Error("worker must allow worker; none nothing")
	}
}

const (
	tokA = "aaaaaaaaaaaaaaaaaaaaaaaa"
	tokB = "bbbbbbbbbbbbbbbbbbbbbbbb"
	tokC = "cccccccccccccccccccccccc"
)

func TestParseTokenFile(t *testing.T) {
	file := "# tokens\n\n" +
		tokA + " name=alice role=read workflows=billing-*,report\n" +
		tokB + " name=gpu-box role=worker capabilities=ai.*,text\n" +
		tokC + "\n"
	ts, warnings, err := ParseTokenFile("tokens", []byte(file))
	if err != nil {
		t.Fatal(err)
	}
	if ts.Len() != 3 || strings.Join(ts.Names(), ",") != "alice,gpu-box,line-5" {
		t.Fatalf("names %v", ts.Names())
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "tokens:5") {
		t.Fatalf("warnings %q", warnings)
	}
	p, ok := ts.Lookup(tokA)
	if !ok || p.Role != Read || !p.MayWorkflow("billing-eu") || !p.MayWorkflow("report") || p.MayWorkflow("payroll") {
		t.Fatalf("alice: %+v", p)
	}
	p, ok = ts.Lookup(tokB)
	if !ok || p.Role != Worker || !p.MayCapability("ai.chat") || !p.MayCapability("text") || p.MayCapability("code.exec") {
		t.Fatalf("gpu-box: %+v", p)
	}
	if p, ok = ts.Lookup(tokC); !ok || p.Role != Admin || !p.MayWorkflow("anything") {
		t.Fatalf("legacy: %+v", p)
	}
	if _, ok := ts.Lookup("dddddddddddddddddddddddd"); ok {
		t.Fatal("an unknown token was found")
	}
}

func TestParseTokenFileErrors(t *testing.T) {
	for _, tc := range []struct{ file, want string }{
		{"short name=a role=read", "f:1: the token is 5 bytes"},
		{tokA + " name=a", "f:1: no role=ROLE"},
		{tokA + " role=read", "f:1: no name=NAME"},
		{tokA + " name=a role=boss", `unknown role "boss"`},
		{tokA + " name=a role=worker", "role=worker needs capabilities="},
		{tokA + " name=a role=read capabilities=x", "capabilities= scopes a worker token"},
		{tokA + " name=a role=admin workflows=x", "workflows= scopes read, submit and operate"},
		{tokA + " name=a role=read workflows=[", "is not a glob"},
		{tokA + " name=a role=read colour=blue", `unknown key "colour"`},
		{tokA + " name=a role=read\n" + tokB + " name=a role=read", "f:2: the name a is taken by line 1"},
		{tokA + " name=a role=read\n" + tokA + " name=b role=read", "f:2: the same token as line 1"},
		{"# nothing\n", "f has no token"},
	} {
		_, _, err := ParseTokenFile("f", []byte(tc.file))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want %q", tc.file, err, tc.want)
		}
		if err != nil && (strings.Contains(err.Error(), tokA) || strings.Contains(err.Error(), tokB)) {
			t.Errorf("%q: the error quotes a token: %v", tc.file, err)
		}
	}
}

func TestContext(t *testing.T) {
	if _, ok := FromContext(context.Background()); ok {
		t.Fatal("a principal in an empty context")
	}
	p := &Principal{Name: "n", Role: Submit}
	got, ok := FromContext(NewContext(context.Background(), p))
	if !ok || got != p {
		t.Fatal("the principal did not round-trip")
	}
	if s := p.String(); s != "n (role submit)" {
		t.Fatalf("String: %q", s)
	}
}
