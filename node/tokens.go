package node

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/robonet/robonet/internal/access"
	"github.com/robonet/robonet/internal/clock"
)

// tokenPollInterval is how often a node looks at its token file for a
// change: a token revoked in the file is refused within this much (and at
// once on SIGHUP).
const tokenPollInterval = 250 * time.Millisecond

// tokenKeeper holds a node's API tokens, and re-reads their file when it
// changes: tokens are added and revoked without a restart. A file that no
// longer parses leaves the tokens as they were (and says why).
type tokenKeeper struct {
	file string // "" for tokens given in code (Config.APITokens)
	cur  atomic.Pointer[access.Tokens]
	log  *zap.Logger
	// onReload is told of each reload's outcome (the audit trail).
	onReload func(names []string, err error)

	mu   sync.Mutex // serializes reloads
	last []byte     // the contents last read
}

// newTokenKeeper reads cfg's tokens: the file's, or the ones given in
// code; nil when there are none.
func newTokenKeeper(cfg Config, log *zap.Logger) (*tokenKeeper, error) {
	k := &tokenKeeper{file: cfg.APITokenFile, log: log.Named("tokens")}
	switch {
	case cfg.APITokenFile != "":
		data, err := os.ReadFile(cfg.APITokenFile)
		if err != nil {
			return nil, fmt.Errorf("%w: api-token-file: %w", ErrConfig, err)
		}
		t, warnings, err := access.ParseTokenFile(cfg.APITokenFile, data)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrConfig, err)
		}
		for _, w := range warnings {
			k.log.Warn(w)
		}
		k.cur.Store(t)
		k.last = data
	case len(cfg.APITokens) > 0:
		t, err := access.AdminTokens(cfg.APITokens)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrConfig, err)
		}
		k.cur.Store(t)
	default:
		return nil, nil
	}
	return k, nil
}

// lookup returns the principal of token.
func (k *tokenKeeper) lookup(token string) (*access.Principal, bool) {
	return k.cur.Load().Lookup(token)
}

// reload re-reads the file when its contents changed (always when force
// is set); it reports whether the tokens changed.
func (k *tokenKeeper) reload(force bool) (bool, error) {
	if k.file == "" {
		return false, nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	data, err := os.ReadFile(k.file)
	if err == nil && !force && bytes.Equal(data, k.last) {
		return false, nil
	}
	var t *access.Tokens
	var warnings []string
	if err == nil {
		t, warnings, err = access.ParseTokenFile(k.file, data)
	}
	if err != nil {
		if !force && data != nil {
			k.last = data // said once per change, not every poll
		}
		k.log.Error("re-reading the API token file: keeping the tokens as they were", zap.String("file", k.file), zap.Error(err))
		if k.onReload != nil {
			k.onReload(nil, err)
		}
		return false, err
	}
	for _, w := range warnings {
		k.log.Warn(w)
	}
	k.last = data
	k.cur.Store(t)
	k.log.Info("API tokens reloaded", zap.String("file", k.file), zap.Strings("names", t.Names()))
	if k.onReload != nil {
		k.onReload(t.Names(), nil)
	}
	return true, nil
}

// watch re-reads the file every tokenPollInterval until ctx ends.
func (k *tokenKeeper) watch(ctx context.Context, clk clock.Clock) {
	if k.file == "" {
		return
	}
	clock.Every(ctx, clk, tokenPollInterval, func() { _, _ = k.reload(false) }) // logged by reload
}

// ReloadTokens re-reads the API token file now (SIGHUP); the node also
// re-reads it by itself within tokenPollInterval of a change. A file that
// does not parse leaves the tokens as they were, and the error says why
// (file and line). Without a token file it does nothing.
func (n *Node) ReloadTokens() error {
	if n.tokens == nil {
		return nil
	}
	_, err := n.tokens.reload(true)
	return err
}
