package bench

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// The waits scenario (issue 36): Config.Waits instances of a workflow
// whose first task waits for a signal are submitted through the API;
// once the server has parked them all (none held in memory), the Go heap
// it keeps after a collection is read against the heap before the
// submissions — the memory each waiting instance costs the server. Then a
// storm: one signal per instance from ChainClients concurrent clients,
// timed from the first signal until every instance is COMPLETE, against
// the reference measured next on the same node: as many one-task
// instances submitted one a call.

const waitSpec = `
name: bench-wait
version: 1
tasks:
  approve:
    wait: {signal: go}
  done:
    needs: approve
    capability: core
    action: echo
    with: {n: "${{ tasks.approve.output.n }}"}
`

// Parked is what the waits scenario measures besides Result's figures.
type Parked struct {
	// ParkSeconds: from the first submission until no instance is held
	// in memory and every one was parked.
	ParkSeconds float64 `json:"park_seconds"`
	// HeapPerParked: the server's Go heap in use after a collection, once
	// every instance is parked, less the same before the submissions,
	// per instance.
	HeapPerParked float64 `json:"heap_bytes_per_parked"`
	// HeapPerHeld: the same while the engine held the most instances at
	// once (waiting, not parked yet), per instance held.
	HeapPerHeld float64 `json:"heap_bytes_per_held"`
	MostHeld    int     `json:"most_held"`
	// SignalSeconds and SignalsPerS: the storm's sending, every signal
	// acknowledged (recorded).
	SignalSeconds float64 `json:"signal_seconds"`
	SignalsPerS   float64 `json:"signals_per_sec"`
	// ReferenceSeconds: as many one-task instances, submitted one a call
	// by as many clients, from the first submission until all are
	// COMPLETE, on the same node after the storm. OfReference is it over
	// the storm's time: 1 means waking a parked instance with a signal
	// costs what starting a new one does.
	ReferenceSeconds float64 `json:"reference_seconds"`
	OfReference      float64 `json:"of_reference"`
}

func runWaits(ctx context.Context, cfg *Config, round int) (Result, error) {
	label := Waits
	if cfg.Rounds > 1 {
		label = fmt.Sprintf("%s-r%d", label, round)
	}
	fmt.Fprintf(cfg.Progress, "%s: starting the node\n", label)
	t, err := start(ctx, cfg, label, false, "--http", "127.0.0.1:0", "--enable-debug")
	if err != nil {
		return Result{}, err
	}
	defer func() { _ = t.stop() }()
	srv := t.procs[0]
	if srv.http == "" {
		return Result{}, fmt.Errorf("the server logged no HTTP address")
	}
	if _, err := t.api.RegisterWorkflow(ctx, &robonetv1.RegisterWorkflowRequest{Spec: &robonetv1.InlineSpec{Source: []byte(waitSpec), Filename: "bench-wait.yaml"}}); err != nil {
		return Result{}, fmt.Errorf("registering bench-wait: %w", err)
	}
	heap0, err := heapAfterGC(ctx, srv.http)
	if err != nil {
		return Result{}, err
	}
	before, err := t.usage()
	if err != nil {
		return Result{}, err
	}
	client0 := selfCPU()

	fmt.Fprintf(cfg.Progress, "%s: submitting %d instances that wait for a signal\n", label, cfg.Waits)
	start := time.Now()
	ids, err := submitInstances(ctx, t, "bench-wait", cfg.Waits, cfg.ChainClients, cfg.BatchSize)
	if err != nil {
		return Result{}, fmt.Errorf("%w%s", err, t.errorLogs())
	}
	submitted := time.Since(start)
	var p Parked
	var heapHeld int64
	for {
		m, err := scrape(ctx, srv.http, "robonet_engine_instances_held", "robonet_engine_instances_parked_total")
		if err != nil {
			return Result{}, err
		}
		held, parked := int(m[0]), int(m[1])
		if held > p.MostHeld && held >= 1000 {
			// The most held so far: what a waiting instance costs while
			// it is in memory (its graph, event log, timers).
			if h, err := heapAfterGC(ctx, srv.http); err == nil {
				p.MostHeld, heapHeld = held, h
			}
		}
		if held == 0 && parked >= cfg.Waits {
			break
		}
		if time.Since(start) > 30*time.Minute {
			return Result{}, fmt.Errorf("after 30 minutes %d instances are held and %d were parked, want %d parked%s", held, parked, cfg.Waits, t.errorLogs())
		}
		select {
		case <-ctx.Done():
			return Result{}, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
	p.ParkSeconds = time.Since(start).Seconds()
	heap1, err := heapAfterGC(ctx, srv.http)
	if err != nil {
		return Result{}, err
	}
	p.HeapPerParked = float64(heap1-heap0) / float64(cfg.Waits)
	if p.MostHeld > 0 {
		p.HeapPerHeld = float64(heapHeld-heap0) / float64(p.MostHeld)
	}

	fmt.Fprintf(cfg.Progress, "%s: all parked in %.1fs; sending a signal to each\n", label, p.ParkSeconds)
	storm := time.Now()
	if err := signalAll(ctx, t, ids, cfg.ChainClients); err != nil {
		return Result{}, fmt.Errorf("%w%s", err, t.errorLogs())
	}
	p.SignalSeconds = time.Since(storm).Seconds()
	p.SignalsPerS = float64(len(ids)) / p.SignalSeconds
	if err := t.waitComplete(ctx, ids, 30*time.Minute); err != nil {
		return Result{}, fmt.Errorf("%w%s", err, t.errorLogs())
	}
	took := time.Since(storm)

	// The reference, on the same node in the same run: as many one-task
	// instances submitted one a call from as many clients — what a signal
	// does (make an instance run its one task) without the wait.
	fmt.Fprintf(cfg.Progress, "%s: the reference: %d one-task instances submitted one a call\n", label, len(ids))
	ref, err := runMany(ctx, t, "bench-one", 1, len(ids), cfg.ChainClients, 1)
	if err != nil {
		return Result{}, fmt.Errorf("the reference: %w%s", err, t.errorLogs())
	}
	p.ReferenceSeconds = ref.Seconds
	p.OfReference = ref.Seconds / took.Seconds()
	r := Result{Scenario: Waits, Instances: len(ids), Tasks: len(ids), Seconds: took.Seconds(),
		TasksPerS: float64(len(ids)) / took.Seconds(), SubmitsPerS: float64(len(ids)) / submitted.Seconds(), Parked: &p}
	if cfg.Rounds > 1 {
		r.Round = round
	}
	r.ClientCPUSeconds = (selfCPU() - client0).Seconds()
	if r.Nodes, err = t.nodeUsages(before); err != nil {
		return Result{}, err
	}
	return r, nil
}

// signalAll sends each instance its signal from clients concurrent
// clients.
func signalAll(ctx context.Context, t *target, ids []string, clients int) error {
	var next atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	for range clients {
		g.Go(func() error {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(ids) {
					return nil
				}
				_, err := t.api.SignalInstance(gctx, &robonetv1.SignalInstanceRequest{InstanceId: ids[i], Name: "go",
					PayloadJson: `{"n":` + strconv.Itoa(i) + `}`})
				if err != nil {
					return fmt.Errorf("signal %s: %w", ids[i], err)
				}
			}
		})
	}
	return g.Wait()
}

// heapAfterGC reads the node's Go heap in use after a collection (the
// heap profile's endpoint collects first when asked to).
func heapAfterGC(ctx context.Context, addr string) (int64, error) {
	var heap int64 = -1
	err := get(ctx, "http://"+addr+"/debug/pprof/heap?gc=1&debug=1", func(line string) {
		if v, ok := strings.CutPrefix(line, "# HeapInuse = "); ok {
			heap, _ = strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	})
	if err == nil && heap < 0 {
		err = fmt.Errorf("the heap profile of %s has no HeapInuse line", addr)
	}
	return heap, err
}

// scrape reads the values of unlabelled metrics from the node's /metrics
// (0 for one it does not export).
func scrape(ctx context.Context, addr string, names ...string) ([]float64, error) {
	out := make([]float64, len(names))
	err := get(ctx, "http://"+addr+"/metrics", func(line string) {
		for i, n := range names {
			if v, ok := strings.CutPrefix(line, n+" "); ok {
				out[i], _ = strconv.ParseFloat(strings.TrimSpace(v), 64)
			}
		}
	})
	return out, err
}

func get(ctx context.Context, url string, line func(string)) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line(sc.Text())
	}
	return sc.Err()
}
