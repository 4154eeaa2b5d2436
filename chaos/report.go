package chaos

import (
	"encoding/json"
	"fmt"
	"html"
	"io"
	"slices"
	"sort"
	"strings"
	"time"
)

// Report is a chaos run's outcome.
type Report struct {
	Command string    `json:"command"`
	Started time.Time `json:"started"`
	Ended   time.Time `json:"ended"`
	Rate    float64   `json:"rate_per_second"`
	// Replication is the database's: "sync" or "async".
	Replication Replication `json:"replication"`
	// StandbyLag is how long the primary's WAL senders were stopped before
	// it was killed (0: not at all).
	StandbyLag time.Duration `json:"standby_lag_ns,omitempty"`
	Verdict    Verdict       `json:"verdict"`
	Faults     []Fault       `json:"faults"`
	Recovery   struct {
		P50 time.Duration `json:"p50_ns"`
		P99 time.Duration `json:"p99_ns"`
		Max time.Duration `json:"max_ns"`
		// Never counts faults after which nothing of theirs completed.
		Never int `json:"never"`
		// StallP50 and StallMax summarise the faults' stalls.
		StallP50 time.Duration `json:"stall_p50_ns"`
		StallMax time.Duration `json:"stall_max_ns"`
	} `json:"recovery"`
	// ByKind summarises the recovery of each kind of fault.
	ByKind []KindRecovery `json:"recovery_by_kind"`
	// Completions is successful executions per second since Started.
	Completions []int `json:"completions_per_second"`
	// Notes are what went wrong around the run (not in the verdict).
	Notes []string `json:"notes,omitempty"`
}

// KindRecovery is the recovery of the faults of one kind: from the fault
// (once injected) to the next task of an affected capability completed.
type KindRecovery struct {
	Kind  FaultKind     `json:"kind"`
	Count int           `json:"count"`
	P50   time.Duration `json:"p50_ns"`
	P99   time.Duration `json:"p99_ns"`
	Max   time.Duration `json:"max_ns"`
	// Never counts faults of the kind after which nothing of theirs
	// completed.
	Never int `json:"never"`
}

// WorstRejoin returns the slowest rejoin of a healed server (-1 if one
// never came back within RejoinWait) and how many faults measured one.
func (r *Report) WorstRejoin() (time.Duration, int) {
	var worst time.Duration
	n := 0
	for _, f := range r.Faults {
		switch {
		case f.Rejoin == 0:
			continue
		case f.Rejoin < 0 || worst < 0:
			worst = -1
		default:
			worst = max(worst, f.Rejoin)
		}
		n++
	}
	return worst, n
}

// Summarize fills in the recovery percentiles and the completions series.
func (r *Report) Summarize(rows []Row) {
	var rec, stalls []time.Duration
	r.Recovery.Never = 0
	for _, f := range r.Faults {
		stalls = append(stalls, f.Stall)
		if f.Recovery < 0 {
			r.Recovery.Never++
			continue
		}
		rec = append(rec, f.Recovery)
	}
	slices.Sort(rec)
	if len(rec) > 0 {
		r.Recovery.P50 = percentile(rec, 0.50)
		r.Recovery.P99 = percentile(rec, 0.99)
		r.Recovery.Max = rec[len(rec)-1]
	}
	r.ByKind = nil
	byKind := map[FaultKind][]time.Duration{}
	never := map[FaultKind]int{}
	var kinds []FaultKind
	for _, f := range r.Faults {
		if _, seen := byKind[f.Kind]; !seen {
			kinds = append(kinds, f.Kind)
			byKind[f.Kind] = nil
		}
		if f.Recovery < 0 {
			never[f.Kind]++
		} else {
			byKind[f.Kind] = append(byKind[f.Kind], f.Recovery)
		}
	}
	for _, k := range kinds {
		d := byKind[k]
		slices.Sort(d)
		kr := KindRecovery{Kind: k, Count: len(d) + never[k], Never: never[k], P50: -1, P99: -1, Max: -1}
		if len(d) > 0 {
			kr.P50, kr.P99, kr.Max = percentile(d, 0.50), percentile(d, 0.99), d[len(d)-1]
		}
		r.ByKind = append(r.ByKind, kr)
	}
	slices.Sort(stalls)
	if len(stalls) > 0 {
		r.Recovery.StallP50 = percentile(stalls, 0.50)
		r.Recovery.StallMax = stalls[len(stalls)-1]
	}
	secs := int(r.Ended.Sub(r.Started)/time.Second) + 1
	r.Completions = make([]int, max(secs, 1))
	for _, row := range rows {
		if !row.OK {
			continue
		}
		i := int(row.RecordedAt.Sub(r.Started) / time.Second)
		if i >= 0 && i < len(r.Completions) {
			r.Completions[i]++
		}
	}
}

// percentile of sorted durations (nearest rank).
func percentile(sorted []time.Duration, p float64) time.Duration {
	i := int(float64(len(sorted))*p+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// WriteJSON writes r as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

func ms(d time.Duration) string {
	if d < 0 {
		return "none"
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}

// rejoinText renders a rejoin time; -1 is "never (within RejoinWait)".
func rejoinText(d time.Duration) string {
	if d < 0 {
		return "never (within " + RejoinWait.String() + ")"
	}
	return ms(d)
}

// WriteMarkdown writes r for a person: the verdict, the faults with their
// recovery, and the timeline picture's file name.
func (r *Report) WriteMarkdown(w io.Writer, svgName string) error {
	v := r.Verdict
	verdict := "PASSED"
	if !v.Passed() {
		verdict = "FAILED"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "## Chaos run, %s: %s\n\n", r.Started.UTC().Format("2006-01-02 15:04 MST"), verdict)
	fmt.Fprintf(&b, "```sh\n%s\n```\n\n", r.Command)
	fmt.Fprintf(&b, "%s of workload at %.1f submissions/s, %d faults; the database replicating %s",
		r.Ended.Sub(r.Started).Round(time.Second), r.Rate, len(r.Faults), replicationText(r.Replication))
	if r.StandbyLag > 0 {
		fmt.Fprintf(&b, "; the primary's WAL senders stopped for %s before it was killed (the standbys behind)", r.StandbyLag)
	}
	b.WriteString(".\n\n")
	b.WriteString("| submitted | acknowledged | indeterminate | completed | executions checked | lost | duplicated | wrong | stuck | unexpected |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|\n")
	fmt.Fprintf(&b, "| %d | %d | %d | %d | %d | **%d** | **%d** | **%d** | **%d** | **%d** |\n\n",
		v.Submitted, v.Acknowledged, v.Indeterminate, v.Completed, v.Executions, v.Lost, v.Duplicated, v.Wrong, v.Stuck, v.Unexpected)
	fmt.Fprintf(&b, "Recovery (fault → next task of an affected capability completed): p50 %s, p99 %s, max %s", ms(r.Recovery.P50), ms(r.Recovery.P99), ms(r.Recovery.Max))
	if r.Recovery.Never > 0 {
		fmt.Fprintf(&b, "; %d faults with nothing of theirs completed after them", r.Recovery.Never)
	}
	fmt.Fprintf(&b, ". Longest stall (no task of an affected capability completed, from the fault until %s after its heal): p50 %s, max %s.",
		StallWindow, ms(r.Recovery.StallP50), ms(r.Recovery.StallMax))
	if worst, n := r.WorstRejoin(); n > 0 {
		fmt.Fprintf(&b, " Rejoin (heal → the cut server a voter that knows the leader, alive to the others), %d faults: max %s (limit %s).", n, rejoinText(worst), RejoinLimit)
	}
	b.WriteString("\n\n")
	if svgName != "" {
		fmt.Fprintf(&b, "![faults against completions per second](%s)\n\n", svgName)
	}
	b.WriteString("| fault kind | count | recovery p50 | p99 | max | nothing after |\n|---|---|---|---|---|---|\n")
	for _, k := range r.ByKind {
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %d |\n", k.Kind, k.Count, ms(k.P50), ms(k.P99), ms(k.Max), k.Never)
	}
	b.WriteString("\n")
	b.WriteString("| at | fault | targets | held | recovery | stall | rejoin | note |\n|---|---|---|---|---|---|---|---|\n")
	for _, f := range r.Faults {
		rejoin := ""
		switch {
		case f.Rejoin < 0:
			rejoin = "never"
		case f.Rejoin > 0:
			rejoin = ms(f.Rejoin)
		}
		fmt.Fprintf(&b, "| +%s | %s | %s | %s | %s | %s | %s | %s |\n", f.At.Sub(r.Started).Round(time.Second), f.Kind, strings.Join(f.Targets, ", "),
			f.Healed.Sub(f.At).Round(100*time.Millisecond), ms(f.Recovery), ms(f.Stall), rejoin, strings.ReplaceAll(f.Error, "|", "/"))
	}
	if v.Unchecked != "" {
		fmt.Fprintf(&b, "\n**The database's record could not be read** (the counts above rest on the API alone): %s\n", v.Unchecked)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "\nNote: %s\n", n)
	}
	if len(v.Problems) > 0 {
		b.WriteString("\nProblems:\n\n")
		for _, p := range v.Problems {
			fmt.Fprintf(&b, "- %s\n", p)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func replicationText(r Replication) string {
	if r == Asynchronous {
		return "asynchronously (commits acknowledged on the primary alone)"
	}
	return "synchronously (a commit acknowledged once a standby has it)"
}

// faultColors gives each kind a colour in the timeline.
var faultColors = map[FaultKind]string{
	KillWorker: "#e4572e", KillLeader: "#a31621", KillWaggler: "#f3a712", PauseWorker: "#29335c",
	DisconnectWorker: "#669bbc", DisconnectLeader: "#003049", PartitionMinority: "#7b2cbf",
	RestartPostgres: "#2a9d8f", KillAndPause: "#6d597a", KillPostgresPrimary: "#0b6e4f",
	KillPostgresStandby: "#90be6d", PartitionPostgresPrimary: "#577590", PausePartitionOwner: "#bc4749", KillPartitionOwner: "#6a4c93",
}

// WriteSVG draws the timeline: completions per second as a line, each
// fault as a band from injection to heal, labelled with its kind.
func (r *Report) WriteSVG(w io.Writer) error {
	const (
		width, height       = 1000.0, 320.0
		left, right, top    = 50.0, 20.0, 20.0
		bottom, legendSpace = 40.0, 60.0
	)
	plotW, plotH := width-left-right, height-top-bottom-legendSpace
	n := len(r.Completions)
	// A 5-second moving average: the workload's round-robin of kinds makes
	// the raw per-second counts saw-toothed.
	smooth := movingAverage(r.Completions, 5)
	peak := 1
	for _, c := range smooth {
		peak = max(peak, int(c+0.999))
	}
	secs := max(float64(n), 1)
	x := func(s float64) float64 { return left + s/secs*plotW }
	y := func(c float64) float64 { return top + plotH - c/float64(peak)*plotH }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="11">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	kinds := map[FaultKind]bool{}
	for _, f := range r.Faults {
		x0, x1 := x(f.At.Sub(r.Started).Seconds()), x(f.Healed.Sub(r.Started).Seconds())
		if x1-x0 < 2 {
			x1 = x0 + 2
		}
		kinds[f.Kind] = true
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s" opacity="0.25"><title>%s %s</title></rect>`+"\n",
			x0, top, x1-x0, plotH, faultColors[f.Kind], html.EscapeString(string(f.Kind)), html.EscapeString(strings.Join(f.Targets, ",")))
	}
	var pts []string
	for i, c := range smooth {
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(float64(i)+0.5), y(c)))
	}
	fmt.Fprintf(&b, `<polyline fill="none" stroke="#222" stroke-width="1.2" points="%s"/>`+"\n", strings.Join(pts, " "))
	// Axes and labels.
	fmt.Fprintf(&b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="#444"/>`+"\n", left, top+plotH, left+plotW, top+plotH)
	fmt.Fprintf(&b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="#444"/>`+"\n", left, top, left, top+plotH)
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="end">%d</text>`+"\n", left-4, top+8, peak)
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="end">0</text>`+"\n", left-4, top+plotH)
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" transform="rotate(-90 12 %.0f)" text-anchor="middle">tasks completed / s (5 s mean)</text>`+"\n", 12.0, top+plotH/2, top+plotH/2)
	step := 600
	for _, st := range []int{5, 10, 15, 30, 60, 120, 300, 600} {
		if secs/float64(st) <= 12 {
			step = st
			break
		}
	}
	for s := 0; s <= int(secs); s += step {
		fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" text-anchor="middle">%ds</text>`+"\n", x(float64(s)), top+plotH+14, s)
	}
	var legend []FaultKind
	for k := range kinds {
		legend = append(legend, k)
	}
	sort.Slice(legend, func(i, j int) bool { return legend[i] < legend[j] })
	for i, k := range legend {
		lx, ly := left+float64(i%5)*185, top+plotH+bottom+float64(i/5)*16
		fmt.Fprintf(&b, `<rect x="%.0f" y="%.0f" width="12" height="10" fill="%s" opacity="0.5"/><text x="%.0f" y="%.0f">%s</text>`+"\n",
			lx, ly-9, faultColors[k], lx+16, ly, html.EscapeString(string(k)))
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// movingAverage is the mean of each value and the window-1 before it.
func movingAverage(xs []int, window int) []float64 {
	out := make([]float64, len(xs))
	sum := 0
	for i, v := range xs {
		sum += v
		if i >= window {
			sum -= xs[i-window]
		}
		out[i] = float64(sum) / float64(min(i+1, window))
	}
	return out
}
