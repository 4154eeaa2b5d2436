// Package loggate stops logging for good at a moment its owner chooses: a
// library that may still log after it was shut down (memberlist's probes
// in flight), or a test's logger once the test has finished, must not
// write into a logger whose owner is gone. Once Close returns, no write is
// in progress and none starts.
package loggate

import "sync"

// Gate lets writes through until it is closed. The zero Gate is open.
type Gate struct {
	mu     sync.RWMutex
	closed bool
}

// Close closes the gate, after any write in progress has finished.
func (g *Gate) Close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
}

// Pass runs write while the gate is open, and holds Close back until it
// returns; once the gate is closed it runs nothing and reports false.
func (g *Gate) Pass(write func()) bool {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.closed {
		return false
	}
	write()
	return true
}
