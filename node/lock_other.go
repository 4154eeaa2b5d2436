//go:build !unix

package node

// dirLock does nothing where flock is unavailable: run one node per data
// directory.
type dirLock struct{}

func lockDir(string) (*dirLock, error) { return &dirLock{}, nil }

func (*dirLock) unlock() error { return nil }
