package e2e_test

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// The dashboard a real node serves: the mesh, the instance list, and an
// instance drawn from its real DAG (needs included), every task coloured
// by its state; with API tokens it asks to sign in.
func TestDashboard(t *testing.T) {
	cfg := testConfig(t, sqliteStore)
	cfg.HTTPAddr = "127.0.0.1:0"
	tn := startNodeWith(t, cfg)
	in := run(t, tn, metricsSpec, "")
	wantState(t, in, robonetv1.InstanceState_INSTANCE_STATE_COMPLETE)
	base := "http://" + tn.node.HTTPAddr()
	client := &http.Client{Timeout: 10 * time.Second}
	page := func(path string) (int, string) {
		t.Helper()
		resp, err := client.Get(base + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for path, want := range map[string][]string{
		"/":                           {`id="members"`, "e2e", "leader", `id="wagglers"`, `id="pools"`},
		"/ui/instances":               {in.GetId(), "metered v1", "complete"},
		"/ui/instances/" + in.GetId(): {`<g class="task completed" data-task="slow"`, `<g class="task completed" data-task="fan"`, "3/3 done", `class="edge completed" data-from="slow"`},
		"/ui/workflows":               {"metered"},
	} {
		code, body := page(path)
		if code != http.StatusOK {
			t.Errorf("GET %s: %d\n%s", path, code, body)
			continue
		}
		for _, w := range want {
			if !strings.Contains(body, w) {
				t.Errorf("GET %s lacks %q", path, w)
			}
		}
	}
	if code, body := page("/ui/instances/" + in.GetId() + "/live"); code != http.StatusOK || !strings.Contains(body, `"terminal":true`) {
		t.Errorf("the live view of a finished instance: %d %q", code, body)
	}

	secured := testConfig(t, sqliteStore)
	secured.HTTPAddr, secured.APITokens = "127.0.0.1:0", []string{"a-long-enough-api-token-0123456789"}
	sn := startNodeWith(t, secured)
	noRedirect := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Get("http://" + sn.node.HTTPAddr() + "/ui/instances")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/ui/login") {
		t.Errorf("a signed-out visit with API tokens on: %d to %q, want the login page", resp.StatusCode, resp.Header.Get("Location"))
	}
	client.CloseIdleConnections()
	noRedirect.CloseIdleConnections()
}

// An instance's ETA, from the real heartbeats of the sleep action (which
// reports one), through the API and on the dashboard's instance page;
// none once it finished.
func TestDashboardShowsETA(t *testing.T) {
	cfg := testConfig(t, sqliteStore)
	cfg.HTTPAddr = "127.0.0.1:0"
	tn := startNodeWith(t, cfg)
	id := submitSpec(t, tn.api, testdataSpec("napping.yaml"), "")
	get := func() *robonetv1.Instance {
		t.Helper()
		resp, err := tn.api.GetInstance(ctxFor(t, 10*time.Second), &robonetv1.GetInstanceRequest{InstanceId: id})
		if err != nil {
			t.Fatalf("GetInstance: %v", err)
		}
		return resp.GetInstance()
	}
	var in *robonetv1.Instance
	eventually(t, 30*time.Second, "an ETA", func() bool { in = get(); return in.GetEta() != nil })
	if eta := in.GetEta().AsDuration(); eta <= 9*time.Minute || eta > 10*time.Minute {
		t.Fatalf("ETA %s, want just under 10m: three 10m naps side by side", eta)
	}

	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get("http://" + tn.node.HTTPAddr() + "/ui/instances/" + id)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	client.CloseIdleConnections()
	if !regexp.MustCompile(`<span id="eta">about (9m[0-9]+s|10m0s) left</span>`).Match(body) {
		t.Errorf("the instance page does not show the ETA:\n%s", body)
	}

	if _, err := tn.api.CancelInstance(ctxFor(t, 10*time.Second), &robonetv1.CancelInstanceRequest{InstanceId: id}); err != nil {
		t.Fatalf("CancelInstance: %v", err)
	}
	if in := waitDone(t, tn.api, id, 30*time.Second); in.GetEta() != nil {
		t.Errorf("a finished instance has an ETA: %s", in.GetEta().AsDuration())
	}
}
