package wag

import (
	"fmt"
	"sync/atomic"

	"github.com/robonet/robonet/engine/port"
)

// termFence remembers the newest leadership term seen in dispatches and
// cancels and refuses older ones: once a new engine leader has spoken, a
// deposed one can neither start attempts nor cancel the new one's.
type termFence struct{ newest atomic.Uint64 }

// admit accepts term when it is at least the newest seen (adopting it),
// and otherwise returns an error wrapping port.ErrStaleTerm.
func (f *termFence) admit(term uint64) error {
	for {
		cur := f.newest.Load()
		if term < cur {
			return fmt.Errorf("%w: term %d, but term %d leads", port.ErrStaleTerm, term, cur)
		}
		if term == cur || f.newest.CompareAndSwap(cur, term) {
			return nil
		}
	}
}
