package node

import (
	"fmt"
	"os"

	"go.etcd.io/etcd/server/v3/storage/wal"
	"golang.org/x/sys/unix"
)

// etcdDiskHeadroom is what the embedded etcd member needs besides its
// WAL segments: its bbolt database and snapshots while the placement is
// small.
const etcdDiskHeadroom = 16 << 20

// etcdDiskNeeded is the free space the embedded etcd member needs to
// start: it preallocates one WAL segment to write and, in the background,
// the next one (wal.SegmentSizeBytes each, 64 MB), and it panics when
// either allocation fails.
func etcdDiskNeeded() uint64 { return uint64(2*wal.SegmentSizeBytes) + etcdDiskHeadroom }

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
// file system has less free space than it needs: etcd would otherwise
// panic with a stack trace. free is freeBytes outside tests. dir is
// created if missing, so the check looks at the file system it will use.
func checkEtcdDisk(dir string, free func(string) (uint64, error)) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("embedded etcd: create data directory %s: %w", dir, err)
	}
	have, err := free(dir)
	if err != nil {
		return fmt.Errorf("embedded etcd: free space in %s: %w", dir, err)
	}
	if need := etcdDiskNeeded(); have < need {
		return fmt.Errorf("embedded etcd: not enough free disk space in %s: %d bytes (%.1f MiB) free, %d bytes (%.1f MiB) needed "+
			"(two %d-byte WAL segments and %d bytes for its database); free some space or move dataDir",
			dir, have, float64(have)/(1<<20), need, float64(need)/(1<<20), wal.SegmentSizeBytes, etcdDiskHeadroom)
	}
	return nil
}
