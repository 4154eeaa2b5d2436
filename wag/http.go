package wag

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/robonet/robonet/engine/value"
)

const (
	httpExample       = `{url: "https://example.com/health"}`
	bodyExcerptBytes  = 512
	defaultHTTPMethod = http.MethodGet
	// defaultHTTPTimeout bounds a request whose input sets no timeout.
	defaultHTTPTimeout = 5 * time.Minute
)

// newHTTPClient is the client the http action shares on one node: bounded
// connection set-up, no overall timeout (each request has its own, from its
// input or defaultHTTPTimeout).
func newHTTPClient() *http.Client {
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	return &http.Client{Transport: &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           dialer.DialContext,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		IdleConnTimeout:       90 * time.Second,
		MaxIdleConns:          256,
		MaxIdleConnsPerHost:   32,
		ForceAttemptHTTP2:     true,
	}}
}

// httpInput is the parsed input of the http action.
type httpInput struct {
	method   string
	url      string
	headers  [][2]string
	body     []byte
	bodyJSON bool
	timeout  time.Duration
	expect   []int // nil: 200..299
}

func parseHTTPInput(in any) (httpInput, error) {
	m, err := inputObject("http", in, httpExample, "body", "expect_status", "headers", "method", "timeout", "url")
	if err != nil {
		return httpInput{}, err
	}
	var x httpInput
	if x.method, err = optString("http", m, "method"); err != nil {
		return x, err
	}
	x.method = strings.ToUpper(x.method)
	if x.method == "" {
		x.method = defaultHTTPMethod
	}
	if !validMethod(x.method) {
		return x, inputError("http", "method", "%q is not an HTTP method; use e.g. GET, POST, PUT, DELETE", x.method)
	}
	if x.url, err = optString("http", m, "url"); err != nil {
		return x, err
	}
	if x.url == "" {
		return x, inputError("http", "url", "is required, e.g. url: \"https://example.com/health\"")
	}
	u, err := url.Parse(x.url)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return x, inputError("http", "url", "%q must be an absolute http:// or https:// URL", x.url)
	}
	if x.headers, err = stringMap("http", m, "headers"); err != nil {
		return x, err
	}
	if x.body, x.bodyJSON, err = payload("http", m, "body"); err != nil {
		return x, err
	}
	if x.timeout, err = optDuration("http", m, "timeout"); err != nil {
		return x, err
	}
	if x.expect, err = parseExpect(m["expect_status"]); err != nil {
		return x, err
	}
	return x, nil
}

func validMethod(m string) bool {
	if m == "" {
		return false
	}
	for _, c := range m {
		if c < 'A' || c > 'Z' {
			return false
		}
	}
	return true
}

func parseExpect(v any) ([]int, error) {
	var list []any
	switch x := v.(type) {
	case nil:
		return nil, nil
	case int64:
		list = []any{x}
	case []any:
		list = x
	default:
		return nil, inputError("http", "expect_status", "must be a list of status codes, e.g. expect_status: [200, 404], got %s", value.TypeName(v))
	}
	if len(list) == 0 {
		return nil, inputError("http", "expect_status", "is empty; leave it out to accept 200-299")
	}
	out := make([]int, 0, len(list))
	for i, e := range list {
		n, ok := e.(int64)
		if !ok || n < 100 || n > 599 {
			return nil, inputError("http", fmt.Sprintf("expect_status[%d]", i), "must be a status code 100..599, got %s", value.Render(e))
		}
		out = append(out, int(n))
	}
	return out, nil
}

func (x httpInput) expected(status int) bool {
	if x.expect == nil {
		return status >= 200 && status <= 299
	}
	return slices.Contains(x.expect, status)
}

func (x httpInput) expectation() string {
	if x.expect == nil {
		return "200-299"
	}
	s := make([]string, len(x.expect))
	for i, n := range x.expect {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ", ")
}

// httpAction makes an HTTP request (see the package doc for its input and
// output).
func httpAction(ctx context.Context, call *Call) (any, error) {
	in, err := parseHTTPInput(call.Input)
	if err != nil {
		return nil, err
	}
	rt := call.runtime()
	if in.timeout == 0 {
		in.timeout = defaultHTTPTimeout
	}
	ctx, cancel := withTimeout(ctx, rt.clock, in.timeout, "request")
	defer cancel()
	var body io.Reader
	if in.body != nil {
		body = bytes.NewReader(in.body)
	}
	req, err := http.NewRequestWithContext(ctx, in.method, in.url, body)
	if err != nil {
		return nil, fmt.Errorf("http: %s %s: %w", in.method, in.url, err)
	}
	for _, kv := range in.headers {
		req.Header.Set(kv[0], kv[1])
	}
	if in.bodyJSON && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if req.Header.Get("Idempotency-Key") == "" {
		req.Header.Set("Idempotency-Key", call.IdempotencyKey())
	}
	what := in.method + " " + in.url
	resp, err := rt.httpClient.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("http: %s: %w", what, ctxErr(ctx))
		}
		return nil, fmt.Errorf("http: %s: %w", what, err)
	}
	defer func() { _ = resp.Body.Close() }()
	limit := call.maxOutput()
	data, err := io.ReadAll(io.LimitReader(resp.Body, int64(limit)+1))
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("http: %s: reading the body: %w", what, ctxErr(ctx))
		}
		return nil, fmt.Errorf("http: %s: reading the body: %w", what, err)
	}
	if !in.expected(resp.StatusCode) {
		return nil, fmt.Errorf("http: %s returned %s, expected %s; body: %s", what, resp.Status, in.expectation(), excerpt(data))
	}
	if len(data) > limit {
		return nil, fmt.Errorf("http: %s: response body exceeds the %d-byte output limit (MaxOutputBytes)", what, limit)
	}
	headers := make(map[string]any, len(resp.Header))
	for name, vals := range resp.Header {
		headers[strings.ToLower(name)] = strings.Join(vals, ", ")
	}
	out := map[string]any{"status": int64(resp.StatusCode), "headers": headers}
	ct := resp.Header.Get("Content-Type")
	if isJSONContent(ct) && len(bytes.TrimSpace(data)) > 0 {
		v, err := value.Decode(data)
		if err != nil {
			return nil, fmt.Errorf("http: %s: the body says Content-Type %s but is not JSON: %w", what, ct, err)
		}
		out["body"] = v
		return out, nil
	}
	if !utf8.Valid(data) {
		return nil, fmt.Errorf("http: %s: the body (Content-Type %q) is not UTF-8 text; the http action returns text and JSON only", what, ct)
	}
	out["body"] = string(data)
	return out, nil
}

func isJSONContent(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}

// excerpt is the start of a body for an error message.
func excerpt(data []byte) string {
	if len(data) == 0 {
		return "(empty)"
	}
	cut := len(data) > bodyExcerptBytes
	if cut {
		data = data[:bodyExcerptBytes]
	}
	s := strings.ToValidUTF8(string(data), "?")
	if cut {
		s += "…"
	}
	return strconv.Quote(s)
}
