package main

import (
	"reflect"
	"strings"
	"testing"

	"go.uber.org/zap"
)

// TestExecSettings: --exec-allow is repeatable (a comma-separated list in
// the environment, a list or a string in the file) and checked at once;
// both settings reach the node's configuration.
func TestExecSettings(t *testing.T) {
	s, err := resolveArgs(t, env{}, "--exec-allow", "/usr/bin/curl", "--exec-allow", "/opt/tools/*", "--exec-user", "nobody")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"/usr/bin/curl", "/opt/tools/*"}; !reflect.DeepEqual(s.ExecAllow, want) || s.ExecUser != "nobody" {
		t.Errorf("flags: %q %q", s.ExecAllow, s.ExecUser)
	}
	cfg := nodeConfig(s, zap.NewNop())
	if !reflect.DeepEqual(cfg.ExecAllow, s.ExecAllow) || cfg.ExecUser != "nobody" {
		t.Errorf("node config: %q %q", cfg.ExecAllow, cfg.ExecUser)
	}
	if s, err := resolveArgs(t, env{"ROBONET_EXEC_ALLOW": "/bin/sh, /usr/bin/sh", "ROBONET_EXEC_USER": "robonet"}); err != nil ||
		!reflect.DeepEqual(s.ExecAllow, []string{"/bin/sh", "/usr/bin/sh"}) || s.ExecUser != "robonet" {
		t.Errorf("env: %q %q %v", s.ExecAllow, s.ExecUser, err)
	}
	for _, file := range []string{"exec_allow: [/bin/sh, '/opt/tools/*']\n", "exec_allow: /bin/sh,/opt/tools/*\n"} {
		s, err := resolveArgs(t, env{}, "--config", writeFile(t, "robonode.yaml", file))
		if err != nil || !reflect.DeepEqual(s.ExecAllow, []string{"/bin/sh", "/opt/tools/*"}) {
			t.Errorf("file %q: %q %v", file, s.ExecAllow, err)
		}
	}
	if s, err := resolveArgs(t, env{"ROBONET_EXEC_ALLOW": "none"}); err != nil || !reflect.DeepEqual(s.ExecAllow, []string{"none"}) {
		t.Errorf("none: %q %v", s.ExecAllow, err)
	}
	if s, _ := resolveArgs(t, env{}); s.ExecAllow != nil || s.ExecUser != "" {
		t.Errorf("defaults: %q %q, want no policy and no user", s.ExecAllow, s.ExecUser)
	}
	for _, args := range [][]string{{"--exec-allow", "curl"}, {"--exec-allow", "*", "--exec-allow", "/bin/sh"}, {"--exec-allow", "/opt/[x"}} {
		_, err := resolveArgs(t, env{}, args...)
		var ue usageError
		if err == nil || !strings.Contains(err.Error(), "exec-allow") || !asUsage(err, &ue) {
			t.Errorf("%v: %v, want a usage error about exec-allow", args, err)
		}
	}
}
