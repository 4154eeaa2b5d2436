package main

import (
	"bytes"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/robonet/robonet/internal/pki"
)

// `robonode tls` makes a working development setup in two commands.
func TestTLSCommands(t *testing.T) {
	dir := t.TempDir()
	robonode := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := run(args, &out, &errOut, env{}.get)
		return code, out.String(), errOut.String()
	}
	if code, out, errOut := robonode("tls", "ca", "create", "--dir", dir); code != exitOK || !strings.Contains(out, pki.CAFile) {
		t.Fatalf("tls ca create: exit %d\n%s%s", code, out, errOut)
	}
	if code, _, errOut := robonode("tls", "ca", "create", "--dir", dir); code != exitRuntime || !strings.Contains(errOut, "exists") {
		t.Fatalf("a second CA in one directory: exit %d: %s", code, errOut)
	}
	for _, c := range []struct {
		args   []string
		server bool
	}{{[]string{"--name", "s1", "--server"}, true}, {[]string{"--name", "w1"}, false}} {
		args := append([]string{"tls", "cert", "create", "--ca-dir", dir, "--dir", dir}, c.args...)
		if code, out, errOut := robonode(args...); code != exitOK {
			t.Fatalf("%v: exit %d\n%s%s", args, code, out, errOut)
		}
		name := c.args[1]
		cert, key := pki.NodeFiles(dir, name)
		id, err := pki.Load(pki.Files{CA: filepath.Join(dir, pki.CAFile), Cert: cert, Key: key})
		if err != nil || id.Name != name || id.Server != c.server {
			t.Fatalf("%s: %+v %v", name, id, err)
		}
		if st, err := os.Stat(key); err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("the key of %s is not private: %v %v", name, st.Mode(), err)
		}
	}
	if code, _, errOut := robonode("tls", "cert", "create", "--ca-dir", dir, "--dir", dir); code != exitUsage || !strings.Contains(errOut, "--name") {
		t.Fatalf("cert create without --name: exit %d: %s", code, errOut)
	}
}

func TestKeyringGenerateAndKeyArguments(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"keyring", "generate"}, &out, &errOut, env{}.get); code != exitOK {
		t.Fatalf("keyring generate: exit %d: %s", code, errOut.String())
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(out.String()))
	if err != nil || len(key) != 32 {
		t.Fatalf("generated %q: %d bytes, %v", out.String(), len(key), err)
	}
	if got, err := readKeyArg("-", strings.NewReader(out.String())); err != nil || !bytes.Equal(got, key) {
		t.Fatalf("a key from stdin: %v", err)
	}
	for _, bad := range []string{"not base64!", base64.StdEncoding.EncodeToString([]byte("short"))} {
		_, err := readKeyArg(bad, nil)
		if err == nil || strings.Contains(err.Error(), bad) {
			t.Fatalf("key %q: %v (an error that does not quote it)", bad, err)
		}
	}
}
