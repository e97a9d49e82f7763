package fileset

import (
	"fmt"
	"io"

	"github.com/tessera-tsdb/tessera/dbnode/vfs"
)

// maxSmallFile bounds the info, digest and checkpoint files, which are a few
// dozen bytes plus the namespace; anything bigger is corrupt and is not
// read into memory.
const maxSmallFile = 1 << 20

// readFile reads a whole file of at most limit bytes.
func readFile(fsys vfs.FS, path string, limit int64) ([]byte, error) {
	f, err := fsys.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() > limit {
		return nil, fmt.Errorf("%s: %w: %d bytes, expected at most %d", path, ErrCorrupt, st.Size(), limit)
	}
	b := make([]byte, st.Size())
	if _, err := io.ReadFull(f, b); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return b, nil
}

// readCheckpoint reads and validates the checkpoint of id. A checkpoint that
// does not decode, or names another fileset, is ErrCorrupt.
func readCheckpoint(fsys vfs.FS, path string, id ID) (checkpoint, error) {
	b, err := readFile(fsys, path, maxSmallFile)
	if err != nil {
		return checkpoint{}, err
	}
	cp, err := decodeCheckpoint(path, b)
	if err != nil {
		return checkpoint{}, err
	}
	if cp.id != id {
		return checkpoint{}, fmt.Errorf("%s: %w: checkpoint is for fileset %v", path, ErrCorrupt, cp.id)
	}
	return cp, nil
}

// checkSum compares a file's bytes with the size and checksum the digest or
// checkpoint recorded for it.
func checkSum(path string, b []byte, want fileSum) error {
	if int64(len(b)) != want.size {
		return fmt.Errorf("%s: %w: %d bytes, digest says %d", path, ErrCorrupt, len(b), want.size)
	}
	if got := crc32c(b); got != want.crc {
		return fmt.Errorf("%s: %w: checksum mismatch (computed %08x, digest says %08x)", path, ErrCorrupt, got, want.crc)
	}
	return nil
}
