package integration

import (
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestBinaryRestartsAfterDiskFull runs the real binary (embedded etcd) on
// a 200 MiB tmpfs, fills the file system, stops the node cleanly and
// starts it again: it starts and serves what it acknowledged. Before,
// the embedded etcd's free-space check asked the restart for two fresh
// WAL segments and headroom (138 MiB) although the member's WAL existed,
// and the node refused to start until space was freed by hand. It needs
// to mount a tmpfs (root); elsewhere it is skipped, and
// TestEmbeddedEtcdRestartNeedsOneSegment (dbnode/node) covers the check
// through its free-space seam.
func TestBinaryRestartsAfterDiskFull(t *testing.T) {
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=200m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("tmpfs not mountable here (%v: %s)", err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() { _ = exec.Command("umount", mnt).Run() })
	b := newBinaryNodeOn(t, filepath.Join(mnt, "data"))
	b.start()
	url := "http://" + b.http
	d := newDataset()
	now := time.Now().UnixMilli()
	for k := range 5 {
		require.NoError(t, d.write(url, 0, 100, now-10_000+int64(k)))
	}

	// The disk fills (another tenant of the file system, say).
	f, err := os.Create(filepath.Join(mnt, "filler"))
	require.NoError(t, err)
	for _, chunk := range []int{1 << 20, 4 << 10} {
		buf := make([]byte, chunk)
		for {
			if _, err := f.Write(buf); err != nil {
				require.True(t, errors.Is(err, syscall.ENOSPC), "fill: %v", err)
				break
			}
		}
	}
	require.NoError(t, f.Close())
	t.Logf("free after filling: %d bytes", statfsFree(t, mnt))

	// A clean stop.
	require.NoError(t, b.cmd.Process.Signal(syscall.SIGTERM))
	done := make(chan error, 1)
	go func() { done <- b.cmd.Wait() }()
	select {
	case err := <-done:
		t.Logf("node stopped: %v", err)
		if err != nil { // say why, from the end of its log
			logs, _ := filepath.Glob(filepath.Join(b.dir, "node-*.log"))
			for _, l := range logs {
				if out, rerr := os.ReadFile(l); rerr == nil {
					lines := strings.Split(strings.TrimSpace(string(out)), "\n")
					t.Logf("%s ends: %s", filepath.Base(l), strings.Join(lines[max(0, len(lines)-3):], "\n"))
				}
			}
		}
	case <-time.After(60 * time.Second):
		t.Fatal("node did not stop on SIGTERM")
	}
	t.Logf("free after the stop: %d bytes", statfsFree(t, mnt))

	// When the fill tore the embedded etcd's last WAL record, etcd repairs
	// the segment at start by copying it (64 MiB): with only what the stop
	// released it fails "failed to read WAL, cannot be repaired: no space
	// left on device" (seen 2026-11-27, most runs on a fresh machine). The
	// operator frees room for that copy, as the test does here; making the
	// node say so itself (or reserve it) is open work.
	fi, err := os.Stat(filepath.Join(mnt, "filler"))
	require.NoError(t, err)
	require.NoError(t, os.Truncate(filepath.Join(mnt, "filler"), max(0, fi.Size()-(64<<20))))
	t.Logf("free after freeing one WAL segment's room: %d bytes", statfsFree(t, mnt))

	b.start()
	require.NoError(t, d.check(url, 0, math.MaxInt64), "acknowledged samples after the restart")
}

func statfsFree(t *testing.T, dir string) uint64 {
	var st unix.Statfs_t
	require.NoError(t, unix.Statfs(dir, &st))
	return st.Bavail * uint64(st.Bsize)
}
