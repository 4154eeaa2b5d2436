package wag

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/robonet/robonet/engine/value"
	"github.com/robonet/robonet/internal/clock"
)

// httpServer serves the routes the http action is tested against, on
// 127.0.0.1.
func httpServer(t *testing.T) *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("/json", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.Header().Set("X-Multi", "a")
		w.Header().Add("X-Multi", "b")
		_, _ = io.WriteString(w, `{"ok": true, "n": 1, "f": 1.5}`)
	})
	mux.HandleFunc("/problem", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/problem+json")
		_, _ = io.WriteString(w, `{"title": "x"}`)
	})
	mux.HandleFunc("/text", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, "hello\n")
	})
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{
			"method": r.Method, "body": string(body), "content_type": r.Header.Get("Content-Type"),
			"x_test": r.Header.Get("X-Test"), "idempotency_key": r.Header.Get("Idempotency-Key"),
		})
	})
	mux.HandleFunc("/status/{code}", func(w http.ResponseWriter, r *http.Request) {
		code, _ := strconv.Atoi(r.PathValue("code"))
		w.WriteHeader(code)
		_, _ = io.WriteString(w, "nope: "+strings.Repeat("z", 1000))
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // until the client gives up
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, strings.Repeat("b", 5000))
	})
	mux.HandleFunc("/badjson", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, "not json")
	})
	mux.HandleFunc("/binary", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = w.Write([]byte{0xff, 0xfe, 0x00})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// runHTTP runs the http action with a client of its own, closed after the
// test.
func runHTTP(t *testing.T, input map[string]any, edit ...func(*Call)) (map[string]any, error) {
	t.Helper()
	client := newHTTPClient()
	t.Cleanup(client.CloseIdleConnections)
	call := &Call{Key: testKey("probe"), Action: "http", Input: input, rt: &runtimeEnv{clock: clock.System(), httpClient: client}}
	for _, e := range edit {
		e(call)
	}
	out, err := httpAction(context.Background(), call)
	if err != nil {
		return nil, err
	}
	return out.(map[string]any), nil
}

func TestHTTPResponses(t *testing.T) {
	srv := httpServer(t)
	out, err := runHTTP(t, map[string]any{"url": srv.URL + "/json"})
	if err != nil {
		t.Fatal(err)
	}
	if out["status"] != int64(200) || !value.Equal(out["body"], map[string]any{"ok": true, "n": int64(1), "f": 1.5}) {
		t.Fatalf("output %v", out)
	}
	headers := out["headers"].(map[string]any)
	if headers["content-type"] != "application/json; charset=utf-8" || headers["x-multi"] != "a, b" {
		t.Fatalf("headers %v", headers)
	}
	if _, err := value.Normalize(out); err != nil {
		t.Fatalf("output is not canonical: %v", err)
	}

	out, err = runHTTP(t, map[string]any{"url": srv.URL + "/problem"})
	if err != nil || !value.Equal(out["body"], map[string]any{"title": "x"}) {
		t.Fatalf("+json: %v %v", out, err)
	}
	out, err = runHTTP(t, map[string]any{"url": srv.URL + "/text"})
	if err != nil || out["body"] != "hello\n" {
		t.Fatalf("text: %v %v", out, err)
	}
}

func TestHTTPRequests(t *testing.T) {
	srv := httpServer(t)
	var idem string
	out, err := runHTTP(t, map[string]any{
		"method":  "post",
		"url":     srv.URL + "/echo",
		"headers": map[string]any{"X-Test": "yes", "X-Num": int64(7)},
		"body":    map[string]any{"b": []any{int64(1)}, "a": "x"},
	}, func(c *Call) { idem = c.IdempotencyKey() })
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"method": "POST", "body": `{"a":"x","b":[1]}`, "content_type": "application/json", "x_test": "yes", "idempotency_key": idem}
	if !value.Equal(out["body"], want) {
		t.Fatalf("server saw %v, want %v", out["body"], want)
	}

	out, err = runHTTP(t, map[string]any{
		"method": "PUT", "url": srv.URL + "/echo", "body": "plain text",
		"headers": map[string]any{"Content-Type": "text/csv"},
	})
	if err != nil {
		t.Fatal(err)
	}
	body := out["body"].(map[string]any)
	if body["method"] != "PUT" || body["body"] != "plain text" || body["content_type"] != "text/csv" {
		t.Fatalf("server saw %v", body)
	}
}

func TestHTTPExpectStatus(t *testing.T) {
	srv := httpServer(t)
	_, err := runHTTP(t, map[string]any{"url": srv.URL + "/status/503"})
	if err == nil || !strings.Contains(err.Error(), "/status/503 returned 503 Service Unavailable, expected 200-299; body: \"nope: zzz") ||
		!strings.HasSuffix(err.Error(), `…"`) || len(err.Error()) > 700 {
		t.Fatalf("error %v", err)
	}
	out, err := runHTTP(t, map[string]any{"url": srv.URL + "/status/404", "expect_status": []any{int64(200), int64(404)}})
	if err != nil || out["status"] != int64(404) {
		t.Fatalf("expected 404: %v %v", out, err)
	}
	_, err = runHTTP(t, map[string]any{"url": srv.URL + "/json", "expect_status": int64(201)})
	if err == nil || !strings.Contains(err.Error(), "returned 200 OK, expected 201") {
		t.Fatalf("error %v", err)
	}
}

func TestHTTPLimits(t *testing.T) {
	srv := httpServer(t)
	_, err := runHTTP(t, map[string]any{"url": srv.URL + "/slow", "timeout": "100ms"})
	if err == nil || !strings.Contains(err.Error(), "request timed out after 100ms") || !errors.Is(err, errTimedOut) {
		t.Fatalf("timeout: %v", err)
	}
	_, err = runHTTP(t, map[string]any{"url": srv.URL + "/big"}, func(c *Call) { c.MaxOutputBytes = 1000 })
	if err == nil || !strings.Contains(err.Error(), "response body exceeds the 1000-byte output limit") {
		t.Fatalf("cap: %v", err)
	}
	if _, err := runHTTP(t, map[string]any{"url": srv.URL + "/big"}, func(c *Call) { c.MaxOutputBytes = 5000 }); err != nil {
		t.Fatalf("at the cap: %v", err)
	}
	_, err = runHTTP(t, map[string]any{"url": srv.URL + "/badjson"})
	if err == nil || !strings.Contains(err.Error(), "says Content-Type application/json but is not JSON") {
		t.Fatalf("bad JSON: %v", err)
	}
	_, err = runHTTP(t, map[string]any{"url": srv.URL + "/binary"})
	if err == nil || !strings.Contains(err.Error(), "is not UTF-8 text") {
		t.Fatalf("binary: %v", err)
	}
}

func TestHTTPBadInput(t *testing.T) {
	cases := []struct {
		input map[string]any
		want  string
	}{
		{map[string]any{}, "http: input.url is required"},
		{map[string]any{"url": "ftp://example.com/x"}, `http: input.url "ftp://example.com/x" must be an absolute http:// or https:// URL`},
		{map[string]any{"url": "/relative"}, `http: input.url "/relative" must be an absolute`},
		{map[string]any{"url": "http://x", "method": "GE T"}, `http: input.method "GE T" is not an HTTP method`},
		{map[string]any{"url": "http://x", "expect_status": "200"}, "http: input.expect_status must be a list of status codes"},
		{map[string]any{"url": "http://x", "expect_status": []any{int64(99)}}, "http: input.expect_status[0] must be a status code 100..599, got 99"},
		{map[string]any{"url": "http://x", "headers": []any{}}, "http: input.headers must be an object"},
		{map[string]any{"url": "http://x", "timeout": "-1s"}, "http: input.timeout \"-1s\" is not a positive duration"},
		{map[string]any{"url": "http://x", "data": "x"}, "http: unknown field \"data\""},
	}
	for _, tc := range cases {
		_, err := runHTTP(t, tc.input)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("input %v: error %v, want %q", tc.input, err, tc.want)
		}
	}
}
