package graph

import (
	"math"
	"strconv"
	"time"
)

// RetryDelay returns the delay before retrying after attempt n (1-based) of
// ref failed:
//
//	base  = min(initial * factor^(n-1), max)    (no cap when max is 0)
//	delay = base * (1 + jitter*u), at least 0
//
// where u in [-1, 1) is JitterUnit(instanceID, task name, ref.Index, n). The
// delay is a pure function of its arguments, so retries are reproducible
// after Restore and in tests.
func (p *Plan) RetryDelay(instanceID string, ref TaskRef, attempt uint32) time.Duration {
	if ref.Node < 0 || int(ref.Node) >= len(p.nodes) {
		return 0
	}
	nd := &p.nodes[ref.Node]
	return nd.retryDelay(instanceID, ref.Index, attempt)
}

func (nd *node) retryDelay(instanceID string, index int32, attempt uint32) time.Duration {
	d := float64(nd.initial)
	if attempt > 1 && nd.factor != 1 {
		d *= math.Pow(nd.factor, float64(attempt-1))
	}
	if nd.maxDelay > 0 && d > float64(nd.maxDelay) {
		d = float64(nd.maxDelay)
	}
	if nd.jitter > 0 {
		d *= 1 + nd.jitter*JitterUnit(instanceID, nd.name, index, attempt)
	}
	switch {
	case d <= 0 || math.IsNaN(d):
		return 0
	case d >= math.MaxInt64:
		return math.MaxInt64
	}
	return time.Duration(d)
}

// JitterUnit maps (instanceID, task, index, attempt) to a number in [-1, 1):
// h is the 64-bit FNV-1a hash of
//
//	instanceID, 0x00, task, 0x00, index as 4 bytes big-endian (two's
//	complement, -1 for a task that is not a spread instance), attempt as 4
//	bytes big-endian
//
// and u = (h>>11) / 2^53 * 2 - 1.
func JitterUnit(instanceID, task string, index int32, attempt uint32) float64 {
	const (
		offset64 = 14695981039346656037
		prime64  = 1099511628211
	)
	h := uint64(offset64)
	for i := 0; i < len(instanceID); i++ {
		h = (h ^ uint64(instanceID[i])) * prime64
	}
	h *= prime64 // the 0x00 separator: h ^ 0 == h
	for i := 0; i < len(task); i++ {
		h = (h ^ uint64(task[i])) * prime64
	}
	h *= prime64 // the 0x00 separator: h ^ 0 == h
	for _, w := range [2]uint32{uint32(index), attempt} {
		for shift := 24; shift >= 0; shift -= 8 {
			h = (h ^ uint64(byte(w>>shift))) * prime64
		}
	}
	return float64(h>>11)/(1<<53)*2 - 1
}

// ExecutionID is the idempotency key of one attempt:
// "<instanceID>/<task>#<attempt>", "<instanceID>/<task>[<index>]#<attempt>"
// for a spread instance, or "<instanceID>/<task>#<iteration>#<attempt>" for
// an iteration of a loop. Workers and the action history deduplicate by it.
func ExecutionID(instanceID string, p *Plan, ref TaskRef, attempt uint32) string {
	name, loop := "?", false
	if ref.Node >= 0 && int(ref.Node) < len(p.nodes) {
		name, loop = p.nodes[ref.Node].name, p.nodes[ref.Node].loop != nil
	}
	b := make([]byte, 0, len(instanceID)+len(name)+24)
	b = append(b, instanceID...)
	b = append(b, '/')
	b = append(b, name...)
	if ref.Index >= 0 && loop {
		b = append(b, '#')
		b = strconv.AppendInt(b, int64(ref.Index), 10)
	} else if ref.Index >= 0 {
		b = append(b, '[')
		b = strconv.AppendInt(b, int64(ref.Index), 10)
		b = append(b, ']')
	}
	b = append(b, '#')
	b = strconv.AppendUint(b, uint64(attempt), 10)
	return string(b)
}
