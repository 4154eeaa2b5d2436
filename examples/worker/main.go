// Command worker is an example worker program: it serves the capability
// "text" with two actions, from outside robonode, through the WorkerService
// protocol (package wag/worker does the protocol; this file is only the
// actions).
//
//	robonode --capability none &                  # a node that runs no tasks itself
//	go run ./examples/worker --node 127.0.0.1:7233 &
//	roboctl submit examples/worker/text.yaml --wait
//
// Any number of these may run, against any nodes of a mesh: each is a pool
// of --slots slots for the capability's Waggler. Stop one mid-task and its
// attempts move to another.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
	"unicode"

	"go.uber.org/zap"

	"github.com/robonet/robonet/wag/worker"
)

func main() {
	addr := flag.String("node", "127.0.0.1:7233", "gRPC address of any robonode of the mesh")
	name := flag.String("name", "text-worker", "name of this program on the node (unique per node)")
	slots := flag.Int("slots", 4, "attempts run at once")
	pause := flag.Duration("pause", 0, "time each attempt takes, to watch progress and failover")
	capability := flag.String("capability", "text", "the capability served (the Python SDK's benchmark serves reflect as \"bench\")")
	ca := flag.String("tls-ca", os.Getenv("ROBONET_TLS_CA"), "the mesh CA's certificate, for a node with TLS (env ROBONET_TLS_CA)")
	tokenFile := flag.String("token-file", "", "file holding the API token, for a node with tokens (default: env ROBONET_TOKEN)")
	flag.Parse()

	log, _ := zap.NewDevelopment()
	defer func() { _ = log.Sync() }()
	creds := worker.Credentials{CAFile: *ca, Token: os.Getenv("ROBONET_TOKEN")}
	if *tokenFile != "" {
		t, err := worker.ReadToken(*tokenFile)
		if err != nil {
			fmt.Fprintf(os.Stderr, "worker: %v\n", err)
			os.Exit(2)
		}
		creds.Token = t
	}
	conn, err := worker.Dial(*addr, creds)
	if err != nil {
		fmt.Fprintf(os.Stderr, "worker: %v\n", err)
		os.Exit(2)
	}
	defer func() { _ = conn.Close() }()

	p := &worker.Program{
		Name: *name, Capability: *capability, Slots: *slots, Logger: log,
		Handlers: map[string]worker.Handler{
			"wordcount": func(ctx context.Context, job *worker.Job) (any, error) { return wordcount(ctx, job, *pause) },
			"sum":       sum,
			// reflect returns its input: the reference the Python SDK's
			// benchmark measures its worker against. (Not "echo": the
			// built-in actions are robonode's, not a program's to claim.)
			"reflect": func(_ context.Context, job *worker.Job) (any, error) { return job.Input, nil },
		},
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := p.Run(ctx, conn); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintf(os.Stderr, "worker: %v\n", err)
		os.Exit(1)
	}
}

// wordcount counts the words of {"text": "..."} line by line, reporting
// progress per line, and pausing pause in all.
func wordcount(ctx context.Context, job *worker.Job, pause time.Duration) (any, error) {
	var in struct {
		Text string `json:"text"`
	}
	if err := job.Decode(&in); err != nil {
		return nil, err
	}
	lines := strings.Split(in.Text, "\n")
	words := 0
	for i, line := range lines {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(pause / time.Duration(len(lines))):
		}
		words += len(strings.FieldsFunc(line, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }))
		job.Progress(int64(i+1), int64(len(lines)), fmt.Sprintf("line %d of %d", i+1, len(lines)))
	}
	// In the task's log: roboctl logs ID TASK.
	fmt.Fprintf(job.Stderr(), "counted %d words in %d lines\n", words, len(lines))
	return map[string]any{"words": words, "lines": len(lines)}, nil
}

// sum adds up {"numbers": [...]}; an empty list is an error, to show how
// a failure reads.
func sum(_ context.Context, job *worker.Job) (any, error) {
	var in struct {
		Numbers []float64 `json:"numbers"`
	}
	if err := job.Decode(&in); err != nil {
		return nil, err
	}
	if len(in.Numbers) == 0 {
		return nil, errors.New("sum: nothing to add up (input numbers is empty)")
	}
	total := 0.0
	for _, n := range in.Numbers {
		total += n
	}
	return map[string]any{"total": total}, nil
}
