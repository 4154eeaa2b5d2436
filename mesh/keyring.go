package mesh

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hashicorp/memberlist"
	"go.uber.org/zap"
)

// The gossip keyring: memberlist encrypts with its primary key and accepts
// every key of the ring, so a mesh rotates its key without a restart —
// install the new key on every node, make it primary everywhere, remove
// the old one. The ring is kept in DataDir/keyring.json (mode 0600,
// primary first); once that file exists it wins over Config.GossipKey,
// which only seeds it, so a restart keeps a rotated key.

// KeyringOp is a change of the gossip keyring.
type KeyringOp int

// Keyring operations.
const (
	// KeyInstall adds a key the node accepts; the primary stays.
	KeyInstall KeyringOp = iota + 1
	// KeyUse makes an installed key the primary, which encrypts.
	KeyUse
	// KeyRemove removes a key that is not the primary.
	KeyRemove
)

// ErrNotEncrypted is returned by keyring changes of a mesh started without
// a gossip key: memberlist cannot begin encrypting at runtime.
var ErrNotEncrypted = errors.New("gossip is not encrypted on this node (it started without --gossip-key): " +
	"its keyring cannot be changed at runtime; restart every node with --gossip-key")

const keyringFile = "keyring.json"

type keyringJSON struct {
	Keys []string `json:"keys"` // base64, primary first
}

// Fingerprint names a key without revealing it: "sha256:" and the first
// 16 hex digits of its SHA-256.
func Fingerprint(key []byte) string {
	sum := sha256.Sum256(key)
	return "sha256:" + hex.EncodeToString(sum[:8])
}

// loadKeys reads the keyring file in dir; nil, nil when there is none.
func loadKeys(dir string) ([][]byte, error) {
	if dir == "" {
		return nil, nil
	}
	b, err := os.ReadFile(filepath.Join(dir, keyringFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the gossip keyring: %w", err)
	}
	var kj keyringJSON
	if err := json.Unmarshal(b, &kj); err != nil {
		return nil, fmt.Errorf("the gossip keyring %s is corrupt: %w", filepath.Join(dir, keyringFile), err)
	}
	keys := make([][]byte, 0, len(kj.Keys))
	for i, k := range kj.Keys {
		key, err := base64.StdEncoding.DecodeString(k)
		if err == nil {
			err = checkKey(key)
		}
		if err != nil {
			return nil, fmt.Errorf("the gossip keyring %s, key %d: %w", filepath.Join(dir, keyringFile), i+1, err)
		}
		keys = append(keys, key)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("the gossip keyring %s holds no key", filepath.Join(dir, keyringFile))
	}
	return keys, nil
}

// saveKeys writes keys (primary first) to dir's keyring file, atomically.
func saveKeys(dir string, keys [][]byte) error {
	if dir == "" {
		return nil
	}
	kj := keyringJSON{Keys: make([]string, len(keys))}
	for i, k := range keys {
		kj.Keys[i] = base64.StdEncoding.EncodeToString(k)
	}
	b, err := json.Marshal(kj)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("saving the gossip keyring: %w", err)
	}
	tmp := filepath.Join(dir, keyringFile+".tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("saving the gossip keyring: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, keyringFile)); err != nil {
		return fmt.Errorf("saving the gossip keyring: %w", err)
	}
	return nil
}

func checkKey(key []byte) error {
	switch len(key) {
	case 16, 24, 32:
		return nil
	}
	return fmt.Errorf("a gossip key is 16, 24 or 32 bytes, not %d", len(key))
}

// initialKeys decides the keys memberlist starts with: the keyring file's
// if there is one (Config.GossipKey is then only checked against it),
// else Config.GossipKey, saved as the file. None: gossip in the clear.
func (m *Mesh) initialKeys() ([][]byte, error) {
	cfg := m.cfg
	keys, err := loadKeys(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	if keys != nil {
		if len(cfg.GossipKey) > 0 && !bytes.Equal(keys[0], cfg.GossipKey) {
			m.log.Warn("the gossip keyring in the data directory wins over --gossip-key (rotated since?)",
				zap.String("keyring_primary", Fingerprint(keys[0])), zap.String("gossip_key", Fingerprint(cfg.GossipKey)))
		}
		return keys, nil
	}
	if len(cfg.GossipKey) == 0 {
		return nil, nil
	}
	keys = [][]byte{cfg.GossipKey}
	return keys, saveKeys(cfg.DataDir, keys)
}

// newKeyring builds memberlist's keyring of keys (primary first).
func newKeyring(keys [][]byte) (*memberlist.Keyring, error) {
	return memberlist.NewKeyring(keys, keys[0])
}

// GossipKeys returns the keys gossip accepts, primary first; nil when
// gossip is not encrypted.
func (m *Mesh) GossipKeys() [][]byte {
	m.mu.Lock()
	kr := m.keyring
	m.mu.Unlock()
	if kr == nil {
		return nil
	}
	primary := kr.GetPrimaryKey()
	out := [][]byte{primary}
	for _, k := range kr.GetKeys() {
		if !bytes.Equal(k, primary) {
			out = append(out, k)
		}
	}
	return out
}

// ChangeKeyring installs, uses or removes key, and saves the ring.
func (m *Mesh) ChangeKeyring(op KeyringOp, key []byte) error {
	if err := checkKey(key); err != nil {
		return err
	}
	m.keyMu.Lock()
	defer m.keyMu.Unlock()
	m.mu.Lock()
	kr, started := m.keyring, m.ml != nil
	m.mu.Unlock()
	if !started {
		return ErrNotRunning
	}
	if kr == nil {
		return ErrNotEncrypted
	}
	var err error
	switch op {
	case KeyInstall:
		err = kr.AddKey(key)
	case KeyUse:
		if !containsKey(kr.GetKeys(), key) {
			return fmt.Errorf("key %s is not installed on this node: install it first", Fingerprint(key))
		}
		err = kr.UseKey(key)
	case KeyRemove:
		if bytes.Equal(kr.GetPrimaryKey(), key) {
			return fmt.Errorf("key %s is this node's primary: use another key first", Fingerprint(key))
		}
		if !containsKey(kr.GetKeys(), key) {
			return nil // removed already: the operation is idempotent
		}
		err = kr.RemoveKey(key)
	default:
		return fmt.Errorf("unknown keyring operation %d", op)
	}
	if err != nil {
		return fmt.Errorf("changing the gossip keyring: %w", err)
	}
	keys := m.GossipKeys()
	m.log.Info("gossip keyring changed", zap.Int("op", int(op)), zap.String("key", Fingerprint(key)),
		zap.String("primary", Fingerprint(keys[0])), zap.Int("keys", len(keys)))
	return saveKeys(m.cfg.DataDir, keys)
}

func containsKey(keys [][]byte, key []byte) bool {
	for _, k := range keys {
		if bytes.Equal(k, key) {
			return true
		}
	}
	return false
}
