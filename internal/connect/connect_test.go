package connect

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A token goes unencrypted only to loopback.
func TestTokenNeverInPlaintextBeyondLoopback(t *testing.T) {
	for addr, ok := range map[string]bool{
		"127.0.0.1:7233": true, "localhost:7233": true, "[::1]:7233": true,
		"10.0.0.1:7233": false, "example.com:7233": false, "0.0.0.0:7233": false,
	} {
		conn, err := Dial(addr, Credentials{Token: "a-secret-token-0123456789"})
		if conn != nil {
			_ = conn.Close()
		}
		switch {
		case ok && err != nil:
			t.Errorf("%s: %v", addr, err)
		case !ok && (err == nil || !strings.Contains(err.Error(), "--tls-ca")):
			t.Errorf("%s: %v, want a refusal naming --tls-ca", addr, err)
		case !ok && strings.Contains(err.Error(), "a-secret-token"):
			t.Errorf("%s: the refusal quotes the token: %v", addr, err)
		}
	}
}

func TestReadToken(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if tok, err := ReadToken(write("t1", "# a comment\n\n  the-token  \nsecond\n")); err != nil || tok != "the-token" {
		t.Fatalf("ReadToken: %q %v", tok, err)
	}
	if _, err := ReadToken(write("t2", "# only a comment\n")); err == nil {
		t.Fatal("a file without a token was accepted")
	}
	if _, err := ReadToken(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("a missing file was accepted")
	}
}
