package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/robonet/robonet/engine/value"
	"github.com/robonet/robonet/internal/client"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// maxBatchSize is the most items one SubmitWorkflows call may carry (the
// node refuses more).
const maxBatchSize = 1000

// maxInputsLine bounds one line of an --inputs-file (a node refuses
// inputs far smaller than this by default; it only stops a runaway read).
const maxInputsLine = 64 << 20

// batchLine is one instance to start: the inputs of a line of the file.
type batchLine struct {
	line   int // 1-based line number in the file
	inputs string
}

// submittedView is the -o json form of one started instance of a batch.
type submittedView struct {
	Line       int    `json:"line"`
	InstanceID string `json:"instance_id"`
	Existing   bool   `json:"existing"`
}

// runBatch starts one instance per line of --inputs-file.
func (o *submitOptions) runBatch(cmd *cobra.Command, g *globalOptions, args []string, format client.Format) error {
	switch {
	case o.wait:
		return errors.New("--wait follows one instance; with --inputs-file, follow them with roboctl ls or roboctl watch ID")
	case o.inputsFile != "":
		return errors.New("give --inputs (one instance) or --inputs-file (one per line), not both")
	case o.batchSize < 1 || o.batchSize > maxBatchSize:
		return fmt.Errorf("--batch-size %d: want 1 to %d", o.batchSize, maxBatchSize)
	}
	spec, ref, err := o.target(cmd, args)
	if err != nil {
		return err
	}
	overrides, err := o.inputFlags()
	if err != nil {
		return err
	}
	lines, err := readInputLines(o.inputsLines, overrides)
	if err != nil {
		return err
	}
	if len(lines) == 0 {
		return fmt.Errorf("--inputs-file %s: no inputs in it (one JSON object per line)", o.inputsLines)
	}
	req := &robonetv1.SubmitWorkflowsRequest{}
	if spec != nil {
		req.Workflow = &robonetv1.SubmitWorkflowsRequest_Spec{Spec: spec}
	} else {
		req.Workflow = &robonetv1.SubmitWorkflowsRequest_Ref{Ref: ref}
	}

	wf, conn, err := g.connect()
	if err != nil {
		return g.fail(cmd, err)
	}
	defer func() { _ = conn.Close() }()

	start := time.Now()
	var (
		views    []submittedView
		existing int
		info     *robonetv1.WorkflowInfo
	)
	out, errOut := cmd.OutOrStdout(), cmd.ErrOrStderr()
	for from := 0; from < len(lines); from += o.batchSize {
		chunk := lines[from:min(from+o.batchSize, len(lines))]
		req.Items = make([]*robonetv1.SubmitItem, len(chunk))
		for i, l := range chunk {
			it := &robonetv1.SubmitItem{InputsJson: l.inputs}
			if o.idempotencyKey != "" {
				it.IdempotencyKey = fmt.Sprintf("%s/%d", o.idempotencyKey, l.line)
			}
			if o.deadline > 0 {
				it.Deadline = durationpb.New(o.deadline)
			}
			req.Items[i] = it
		}
		var resp *robonetv1.SubmitWorkflowsResponse
		if err := g.call(cmd.Context(), func(ctx context.Context) (err error) {
			resp, err = wf.SubmitWorkflows(ctx, req)
			return err
		}); err != nil {
			fmt.Fprintf(errOut, "roboctl: lines %d to %d of %s were not submitted; %d instances before them were\n",
				chunk[0].line, chunk[len(chunk)-1].line, o.inputsLines, from)
			if from > 0 && o.idempotencyKey != "" {
				fmt.Fprintf(errOut, "roboctl: run the same command again to submit the rest: the keys %s/LINE skip what started\n", o.idempotencyKey)
			}
			return g.fail(cmd, err)
		}
		if info == nil {
			printWarnings(cmd, resp.GetWarnings()) // once: every call names the same workflow
			// The rest by reference: the spec is registered now.
			info = resp.GetWorkflow()
			req.Workflow = &robonetv1.SubmitWorkflowsRequest_Ref{Ref: &robonetv1.WorkflowRef{Name: info.GetName(), Version: info.GetVersion()}}
		}
		for i, inst := range resp.GetInstances() {
			if inst.GetExisting() {
				existing++
			}
			v := submittedView{Line: chunk[i].line, InstanceID: inst.GetInstanceId(), Existing: inst.GetExisting()}
			views = append(views, v)
			if format == client.FormatTable {
				fmt.Fprintln(out, v.InstanceID)
			}
		}
		if format == client.FormatTable && len(lines) > o.batchSize {
			fmt.Fprintf(errOut, "submitted %d of %d\n", len(views), len(lines))
		}
	}
	took := time.Since(start)
	note := ""
	if existing > 0 {
		note = fmt.Sprintf(", %d already submitted with their keys", existing)
	}
	fmt.Fprintf(errOut, "%d instances of %s v%d in %s (%.0f a second)%s\n", len(views), info.GetName(), info.GetVersion(),
		took.Round(time.Millisecond), float64(len(views))/took.Seconds(), note)
	if format != client.FormatTable {
		return client.WriteData(out, format, views)
	}
	return nil
}

// readInputLines reads a JSON Lines file of inputs, each line an object,
// overrides applied over each; every line is checked before anything is
// sent, so a mistake on line 9,000 is found before line 1 starts.
func readInputLines(path string, overrides map[string]any) ([]batchLine, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--inputs-file: %w", err)
	}
	defer func() { _ = f.Close() }()
	r := bufio.NewReaderSize(f, 1<<20)
	var out []batchLine
	for n := 1; ; n++ {
		text, err := readLine(r)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("--inputs-file %s:%d: %w", path, n, err)
		}
		text = bytes.TrimSpace(text)
		if len(text) == 0 {
			continue
		}
		v, err := value.Decode(text)
		if err != nil {
			return nil, fmt.Errorf("--inputs-file %s:%d: not valid JSON: %w", path, n, err)
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("--inputs-file %s:%d: want a JSON object of inputs, got %s", path, n, value.TypeName(v))
		}
		inputs := string(text)
		if len(overrides) > 0 {
			maps.Copy(m, overrides)
			data, err := value.Encode(m)
			if err != nil {
				return nil, fmt.Errorf("--inputs-file %s:%d: encoding the inputs: %w", path, n, err)
			}
			inputs = string(data)
		}
		out = append(out, batchLine{line: n, inputs: inputs})
	}
}

// readLine reads one line (without its end), refusing one longer than
// maxInputsLine. It returns io.EOF only when nothing is left.
func readLine(r *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		part, err := r.ReadSlice('\n')
		line = append(line, part...)
		if len(line) > maxInputsLine {
			return nil, fmt.Errorf("a line longer than %d MiB", maxInputsLine>>20)
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(line) > 0:
			return line, nil
		case err != nil:
			return nil, err
		}
		return bytes.TrimSuffix(line, []byte("\n")), nil
	}
}
