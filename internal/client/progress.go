package client

import (
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// Progress shows an instance's progress as it changes: on a terminal a
// live bar of units done out of the total with the running and failed
// counts; on anything else (a file, a pipe, a test buffer) one line per
// change, so logs stay readable.
// It is safe for concurrent use.
type Progress struct {
	mu   sync.Mutex
	w    io.Writer
	bar  *progressbar.ProgressBar // nil unless w is a terminal
	last ProgressView
	seen bool
}

// NewProgress returns a Progress writing to w.
func NewProgress(w io.Writer) *Progress {
	p := &Progress{w: w}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		p.bar = progressbar.NewOptions(1,
			progressbar.OptionSetWriter(w),
			progressbar.OptionSetWidth(30),
			progressbar.OptionShowCount(),
			progressbar.OptionSetPredictTime(false),
			progressbar.OptionSetElapsedTime(true),
			progressbar.OptionShowDescriptionAtLineEnd(),
			progressbar.OptionSetRenderBlankState(true),
		)
	}
	return p
}

// Update shows in's progress if it changed.
func (p *Progress) Update(in *robonetv1.Instance) {
	v := progressOf(in.GetProgress())
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.seen && v == p.last {
		return
	}
	p.seen, p.last = true, v
	desc := fmt.Sprintf("%d running, %d failed", v.Running, v.Failed)
	if v.Skipped > 0 {
		desc += fmt.Sprintf(", %d skipped", v.Skipped)
	}
	if v.Unexpanded > 0 {
		desc += ", spreads to expand"
	}
	if p.bar == nil {
		fmt.Fprintf(p.w, "progress: %s\n", ProgressLine(v))
		return
	}
	p.bar.ChangeMax(max(int(v.Total), 1))
	p.bar.Describe(desc)
	_ = p.bar.Set(int(v.Done))
}

// Finish ends the display (the bar's line is completed).
func (p *Progress) Finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bar != nil {
		_ = p.bar.Exit()
		fmt.Fprintln(p.w)
	}
}
