//go:build unix

package node

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// dirLock is an exclusive advisory lock on a data directory: two nodes on
// one directory would share the SQLite file and the term counter. The
// kernel releases it when the process dies, even under kill -9.
type dirLock struct{ f *os.File }

func lockDir(dir string) (*dirLock, error) {
	path := filepath.Join(dir, "lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening the data directory lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("data directory %s is in use by another robonode", dir)
		}
		return nil, fmt.Errorf("locking the data directory: %w", err)
	}
	return &dirLock{f: f}, nil
}

func (l *dirLock) unlock() error {
	return l.f.Close() // closing the descriptor releases the flock
}
