package e2e_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// browserSpec's first task sleeps, so that the browser sees the DAG
// running and then watches it turn green: a diamond around a spread.
var browserSpec = testdataSpec("browser.yaml")

// browser finds Chromium; without it the test is skipped, unless
// ROBONET_BROWSER_TEST=1 (CI) says it must run.
func browser(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("ROBONET_BROWSER_TEST") == "1" {
		t.Fatal("ROBONET_BROWSER_TEST=1 but no Chromium is installed (apt-get install chromium)")
	}
	t.Skip("no Chromium installed (apt-get install chromium); .ci/run installs it")
	return ""
}

// artifacts is where the test leaves its screenshots: $ROBONET_ARTIFACTS
// (CI keeps it), else a temporary directory.
func artifacts(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("ROBONET_ARTIFACTS")
	if dir == "" {
		return t.TempDir()
	}
	dir = filepath.Join(dir, "dashboard")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestDashboardInBrowser drives the dashboard in a real headless Chromium:
// every page loads without a console error (CSP violations included), an
// instance's DAG changes colour as its tasks finish (server-sent events,
// no reload), and the cancel button cancels. It saves a screenshot of
// each page.
func TestDashboardInBrowser(t *testing.T) {
	chrome := browser(t)
	out := artifacts(t)
	cfg := testConfig(t, sqliteStore)
	cfg.HTTPAddr = "127.0.0.1:0"
	tn := startNodeWith(t, cfg)
	base := "http://" + tn.node.HTTPAddr()

	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chrome), chromedp.NoSandbox, chromedp.WindowSize(1400, 900))...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(alloc)
	defer cancelBrowser()
	// The first action starts the browser, on a context without a deadline
	// (a deadline there would end the browser); the rest get one.
	if err := chromedp.Do(bctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("starting Chromium (%s): %v", chrome, err)
	}
	ctx, cancel := context.WithTimeout(bctx, 2*time.Minute)
	defer cancel()

	// Every console error or warning, uncaught exception and browser log
	// error (a Content-Security-Policy violation, a failed load) is a
	// problem.
	var (
		mu       sync.Mutex
		problems []string
	)
	consoleCtx, stopConsole := context.WithCancel(bctx)
	messages := chromedp.Console(consoleCtx)
	consoleDone := make(chan struct{})
	go func() {
		defer close(consoleDone)
		for m, err := range messages {
			if err != nil {
				return
			}
			switch m.Type {
			case chromedp.ConsoleError, chromedp.ConsoleWarning, chromedp.ConsoleException:
				mu.Lock()
				problems = append(problems, m.String())
				mu.Unlock()
			}
		}
	}()
	defer func() {
		stopConsole()
		<-consoleDone
	}()

	screenshot := func(name string) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			png, err := chromedp.FullScreenshot(100)(ctx, tg) // 100: PNG
			if err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(out, name+".png"), png, 0o644)
		})
	}
	attr := func(sel, name string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.AttributeValue(sel, name))
		if err != nil {
			t.Fatalf("reading %s of %s: %v", name, sel, err)
		}
		return v.Value
	}
	text := func(sel string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.TextContent(sel))
		if err != nil {
			t.Fatalf("reading the text of %s: %v", sel, err)
		}
		return v
	}

	// An instance watched from its first second: the DAG is running, then
	// every task turns green, without a reload.
	id := submitSpec(t, tn.api, browserSpec, "")
	if err := chromedp.Do(ctx,
		chromedp.Navigate(base+"/ui/instances/"+id),
		chromedp.WaitVisible(`g.task[data-task="warm_up"]`),
	); err != nil {
		t.Fatalf("opening instance %s: %v", id, err)
	}
	warmUp := attr(`g.task[data-task="warm_up"]`, "class")
	if err := chromedp.Do(ctx,
		screenshot("instance-running"),
		chromedp.WaitVisible(`g.task.completed[data-task="report"]`),
		// Once it is over the page reloads as a finished one: outputs
		// shown, no cancel button.
		chromedp.WaitVisible(`#outputs`),
		screenshot("instance"),
	); err != nil {
		t.Fatalf("watching instance %s: %v", id, err)
	}
	if warmUp != "task running" && warmUp != "task waiting" {
		t.Errorf("warm_up on the first paint: class %q, want running (or waiting for its claim)", warmUp)
	}
	if report, state := attr(`g.task[data-task="report"]`, "class"), text(`#state`); report != "task completed" || state != "complete" {
		t.Errorf("after the run: report %q, state %q", report, state)
	}
	if gone, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.getElementById("cancel") === null`)); err != nil || !gone {
		t.Errorf("the cancel button is still there once the instance finished (%v)", err)
	}
	if label := text(`g.task[data-task="fan_out"] text.label`); label != "4/4 done" {
		t.Errorf("the spread's box says %q, want 4/4 done", label)
	}

	// The cancel button cancels a running instance.
	long := submitSpec(t, tn.api, browserSpec, `{"nap": "60s"}`)
	if err := chromedp.Do(ctx,
		chromedp.Navigate(base+"/ui/instances/"+long),
		chromedp.WaitVisible(`#cancel`),
		chromedp.Click(`#cancel`),
		chromedp.WaitVisible(`span.state.cancelled`),
		screenshot("instance-cancelled"),
	); err != nil {
		t.Fatalf("cancelling instance %s: %v", long, err)
	}
	if in := waitDone(t, tn.api, long, 30*time.Second); in.GetState() != robonetv1.InstanceState_INSTANCE_STATE_CANCELLED {
		t.Errorf("after the cancel button: %s", in.GetState())
	}

	// Every other page loads.
	for _, p := range []struct{ path, ready, shot string }{
		{"/ui/", `#members`, "mesh"},
		{"/ui/instances", `#instances`, "instances"},
		{"/ui/instances?state=cancelled", `#instances`, "instances-cancelled"},
		{"/ui/workflows", `#schedules`, "workflows"},
	} {
		if err := chromedp.Do(ctx, chromedp.Navigate(base+p.path), chromedp.WaitVisible(p.ready), screenshot(p.shot)); err != nil {
			t.Errorf("page %s: %v", p.path, err)
		}
	}
	// Let late console messages arrive before judging.
	time.Sleep(300 * time.Millisecond)
	mu.Lock()
	for _, p := range problems {
		t.Errorf("browser: %s", p)
	}
	mu.Unlock()
	t.Logf("screenshots in %s", out)
}
