package bench

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"
)

// Tolerance is how far below its baseline a ratio may fall before Check
// fails: 20%.
const Tolerance = 0.2

// Baseline is the committed ratios a regression check compares against:
// each scenario's tasks/s over the COPY reference ("spread/copy") and each
// mesh scenario's over its single-node twin ("mesh-spread/one-node"), both
// measured in one run, so they hold on a machine whose speed varies.
type Baseline struct {
	Date    time.Time          `json:"date"`
	Command string             `json:"command"`
	Ratios  map[string]float64 `json:"ratios"`
}

// ratios are the run's ratios under their baseline keys: over several
// rounds, each ratio's median (summarise).
func ratios(rep *Report) map[string]float64 {
	out := map[string]float64{}
	for _, m := range summarise(rep.Results) {
		if m.Rate > 0 {
			continue // latency runs are paced: their throughput is the rate
		}
		if m.OfCopy.Median > 0 {
			out[m.Scenario+"/copy"] = m.OfCopy.Median
		}
		if m.OfSingle.Median > 0 {
			out[m.Scenario+"/one-node"] = m.OfSingle.Median
		}
	}
	return out
}

// SaveBaseline writes the run's ratios to path.
func SaveBaseline(path string, rep *Report) error {
	b := Baseline{Date: rep.Date, Command: rep.Command, Ratios: ratios(rep)}
	if len(b.Ratios) == 0 {
		return errors.New("this run has no ratios to save: run with --postgres (the COPY reference) or a mesh scenario")
	}
	data, err := json.MarshalIndent(b, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

// Check compares the run's ratios with the baseline at path: one line per
// ratio the two share, and an error naming those that fell more than
// Tolerance below their baseline (or when they share none).
func Check(path string, rep *Report) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the baseline: %w", err)
	}
	var b Baseline
	if err := json.Unmarshal(data, &b); err != nil {
		return nil, fmt.Errorf("baseline %s: %w", path, err)
	}
	now := ratios(rep)
	var keys []string
	for k := range b.Ratios {
		if _, ok := now[k]; ok {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("baseline %s shares no ratio with this run (it has %d; run the scenarios it names, on the same store)", path, len(b.Ratios))
	}
	slices.Sort(keys)
	var lines, worse []string
	for _, k := range keys {
		base, cur := b.Ratios[k], now[k]
		verdict := "ok"
		if cur < base*(1-Tolerance) {
			verdict = "REGRESSION"
			worse = append(worse, k)
		}
		lines = append(lines, fmt.Sprintf("%-24s baseline %.3f  now %.3f  (%+.0f%%)  %s", k, base, cur, 100*(cur/base-1), verdict))
	}
	if len(worse) > 0 {
		return lines, fmt.Errorf("%d of %d ratios fell more than %.0f%% below the baseline: %v", len(worse), len(keys), 100*Tolerance, worse)
	}
	return lines, nil
}
