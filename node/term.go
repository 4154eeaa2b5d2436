package node

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// termFile is the name of the fencing term counter in the data directory.
const termFile = "term"

// nextTerm increments the fencing term persisted in dir and returns the new
// value. On a single node the term plays the role the Raft term plays in a
// mesh: every start gets a term higher than any earlier start on this data
// directory, so after a crash (kill -9) the restarted engine takes over the
// leases its previous incarnation still holds at once instead of waiting
// for them to expire.
//
// The file is replaced atomically (write a temporary file, fsync, rename,
// fsync the directory), so a crash leaves either the old or the new value,
// never a torn one.
func nextTerm(dir string) (uint64, error) {
	path := filepath.Join(dir, termFile)
	var cur uint64
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
		cur, err = strconv.ParseUint(strings.TrimSpace(string(data)), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("term file %s is corrupt (%q): %w", path, data, err)
		}
	case errors.Is(err, fs.ErrNotExist):
	default:
		return 0, fmt.Errorf("reading the term file: %w", err)
	}
	next := cur + 1
	if err := writeFileAtomic(path, []byte(strconv.FormatUint(next, 10)+"\n")); err != nil {
		return 0, fmt.Errorf("writing the term file: %w", err)
	}
	return next, nil
}

// writeFileAtomic replaces path with data so that a crash at any point
// leaves either the old content or the new one.
func writeFileAtomic(path string, data []byte) (err error) {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer func() { _ = d.Close() }()
	return d.Sync()
}
