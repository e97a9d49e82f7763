package vfs

import (
	"fmt"
	"io"
	"path/filepath"
)

// ReadFile reads a whole file through fs.
func ReadFile(fs FS, name string) ([]byte, error) {
	f, err := fs.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// WriteFileAtomic replaces name with data so that a crash at any point
// leaves either the old file or the new one, never a torn mix: the bytes
// go to a temporary file beside it, which is fsynced, renamed over name,
// and the directory fsynced. Small state files (the cached placement)
// are written this way.
func WriteFileAtomic(fs FS, name string, data []byte) error {
	dir := filepath.Dir(name)
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	tmp := name + ".tmp"
	f, err := fs.Create(tmp)
	if err != nil {
		return fmt.Errorf("create %s: %w", tmp, err)
	}
	_, werr := f.Write(data)
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		_ = fs.Remove(tmp)
		return fmt.Errorf("write %s: %w", tmp, werr)
	}
	if err := fs.Rename(tmp, name); err != nil {
		_ = fs.Remove(tmp)
		return fmt.Errorf("rename %s: %w", tmp, err)
	}
	if err := fs.SyncDir(dir); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
