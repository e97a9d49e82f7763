package node

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"go.etcd.io/etcd/server/v3/storage/wal"
	"golang.org/x/sys/unix"
)

// etcdDiskHeadroom is what a new embedded etcd member needs besides its
// WAL segments: its bbolt database and snapshots while the placement is
// small.
const etcdDiskHeadroom = 16 << 20

// etcdDiskNeeded is the free space the embedded etcd member in dir needs
// to start, and what it is for.
//
// A new member writes its first WAL segment and, in the background,
// preallocates the next one (wal.SegmentSizeBytes each, 64 MB), and it
// panics when either allocation fails; it also creates its database.
//
// A member whose WAL exists (a restart) appends to its last segment,
// already allocated, and opens its existing database; what it allocates
// at once is the next segment, in the background, as <wal>/0.tmp (and
// on failure it runs until the current segment is full, then exits). A
// clean stop deletes that file, freeing the space the restart takes back;
// a crash leaves it, and the restart reuses its blocks. So a restart needs
// one segment less what 0.tmp already holds: asking it for two fresh
// segments and headroom kept a node whose disk had filled from starting
// again at all (issue 32).
func etcdDiskNeeded(dir string) (need uint64, what string, err error) {
	walDir := filepath.Join(dir, "member", "wal")
	if !wal.Exist(walDir) {
		return uint64(2*wal.SegmentSizeBytes) + etcdDiskHeadroom,
			fmt.Sprintf("a new member: two %d-byte WAL segments and %d bytes for its database", wal.SegmentSizeBytes, etcdDiskHeadroom), nil
	}
	held, err := allocatedBytes(filepath.Join(walDir, "0.tmp"))
	if err != nil {
		return 0, "", err
	}
	need = uint64(wal.SegmentSizeBytes) - min(held, uint64(wal.SegmentSizeBytes))
	return need, fmt.Sprintf("a restart: the next %d-byte WAL segment, of which %s already holds %d bytes", wal.SegmentSizeBytes, filepath.Join(walDir, "0.tmp"), held), nil
}

// allocatedBytes is the disk space path's blocks take (0 if it does not
// exist): a preallocated file takes its size before it is written.
func allocatedBytes(path string) (uint64, error) {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Blocks) * 512, nil
	}
	return 0, nil
}

// freeBytes reports the bytes an unprivileged writer can still use on the
// file system holding dir.
func freeBytes(dir string) (uint64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return st.Bavail * uint64(st.Bsize), nil
}

// checkEtcdDisk refuses to start the embedded etcd member in dir when the
// file system has less free space than it needs (etcdDiskNeeded): etcd
// would otherwise panic with a stack trace. free is freeBytes outside
// tests. dir is created if missing, so the check looks at the file system
// it will use.
func checkEtcdDisk(dir string, free func(string) (uint64, error)) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("embedded etcd: create data directory %s: %w", dir, err)
	}
	have, err := free(dir)
	if err != nil {
		return fmt.Errorf("embedded etcd: free space in %s: %w", dir, err)
	}
	need, what, err := etcdDiskNeeded(dir)
	if err != nil {
		return fmt.Errorf("embedded etcd: space needed in %s: %w", dir, err)
	}
	if have < need {
		return fmt.Errorf("embedded etcd: not enough free disk space in %s: %d bytes (%.1f MiB) free, %d bytes (%.1f MiB) needed "+
			"(%s); free some space or move dataDir",
			dir, have, float64(have)/(1<<20), need, float64(need)/(1<<20), what)
	}
	return nil
}
