package node

import (
	"context"
	"errors"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

func TestTokenSet(t *testing.T) {
	if s, err := newTokenSet(nil); s != nil || err != nil {
		t.Fatalf("no tokens: %v %v, want nil, nil", s, err)
	}
	_, err := newTokenSet([]string{"long-enough-token-1", "short"})
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "token 2 of 2") || strings.Contains(err.Error(), "short") {
		t.Fatalf("a short token: %v (it must be refused without being quoted)", err)
	}
	s, err := newTokenSet([]string{"long-enough-token-1", "long-enough-token-2"})
	if err != nil {
		t.Fatal(err)
	}
	for tok, want := range map[string]bool{
		"long-enough-token-1": true, "long-enough-token-2": true,
		"long-enough-token-3": false, "": false, "long-enough-token-1 ": false,
	} {
		if got := s.valid(tok); got != want {
			t.Errorf("valid(%q) = %v, want %v", tok, got, want)
		}
	}
}

func TestAuthz(t *testing.T) {
	tokens, _ := newTokenSet([]string{"long-enough-token-1"})
	withToken := func(v string) context.Context {
		return metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", v))
	}
	const (
		submit = "/robonet.v1.WorkflowService/SubmitWorkflow"
		work   = "/robonet.v1.WagService/Work"
		health = "/grpc.health.v1.Health/Check"
	)
	for _, c := range []struct {
		name   string
		a      authz
		ctx    context.Context
		method string
		want   codes.Code
	}{
		{"open node", authz{}, context.Background(), submit, codes.OK},
		{"no token", authz{tls: true, tokens: tokens}, context.Background(), submit, codes.Unauthenticated},
		{"wrong token", authz{tls: true, tokens: tokens}, withToken("Bearer nope-nope-nope-nope"), submit, codes.Unauthenticated},
		{"not bearer", authz{tls: true, tokens: tokens}, withToken("Basic long-enough-token-1"), submit, codes.Unauthenticated},
		{"token", authz{tls: true, tokens: tokens}, withToken("Bearer long-enough-token-1"), submit, codes.OK},
		{"lower-case scheme", authz{tls: true, tokens: tokens}, withToken("bearer long-enough-token-1"), submit, codes.OK},
		{"health without token", authz{tls: true, tokens: tokens}, context.Background(), health, codes.OK},
		{"a client on WagService", authz{tls: true, tokens: tokens}, withToken("Bearer long-enough-token-1"), work, codes.PermissionDenied},
		{"WagService without TLS", authz{}, context.Background(), work, codes.OK},
	} {
		if got := status.Code(c.a.check(c.ctx, c.method)); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}
