package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// healthcheck exits 0 and prints the answer on 200; 1 with the status and
// the answer otherwise, or when nothing answers; 2 on a bad URL.
func TestHealthcheck(t *testing.T) {
	var ready atomic.Bool
	ready.Store(true)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if !ready.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte("not ready\n"))
			return
		}
		_, _ = w.Write([]byte("ready (leader s1, term 3)\n"))
	}))
	defer srv.Close()
	probe := func(url string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := run([]string{"healthcheck", "--url", url}, &out, &errOut, env{}.get)
		return code, out.String(), errOut.String()
	}
	if code, out, _ := probe(srv.URL + "/readyz"); code != exitOK || !strings.Contains(out, "leader s1") {
		t.Fatalf("ready: exit %d, %q", code, out)
	}
	ready.Store(false)
	if code, _, stderr := probe(srv.URL + "/readyz"); code != exitRuntime || !strings.Contains(stderr, "503") || !strings.Contains(stderr, "not ready") {
		t.Fatalf("not ready: exit %d, %q", code, stderr)
	}
	srv.Close()
	if code, _, stderr := probe(srv.URL + "/readyz"); code != exitRuntime || !strings.Contains(stderr, "refused") {
		t.Fatalf("nothing listening: exit %d, %q", code, stderr)
	}
	if code, _, _ := probe("::not a url"); code != exitUsage {
		t.Fatalf("a bad URL: exit %d, want %d", code, exitUsage)
	}
}
