package node

import (
	"context"
	"testing"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

func TestAuthz(t *testing.T) {
	tokens, err := newTokenKeeper(Config{APITokens: []string{"long-enough-token-1"}}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
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
		if _, _, err := c.a.who(c.ctx, c.method); status.Code(err) != c.want {
			t.Errorf("%s: %v, want %s", c.name, err, c.want)
		}
	}
}
