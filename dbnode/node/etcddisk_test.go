package node

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/config"
	"go.etcd.io/etcd/server/v3/storage/wal"
	"golang.org/x/sys/unix"
)

// etcdConfig is a one-member embedded etcd on free loopback ports with
// its data under dataDir.
func etcdConfig(t *testing.T, dataDir string) config.Config {
	port := func() int {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		defer l.Close()
		return l.Addr().(*net.TCPAddr).Port
	}
	var c config.Config
	c.DataDir = dataDir
	c.Cluster.Name = "disktest"
	c.Etcd.Embedded = config.EmbeddedEtcd{
		Enabled:   true,
		Name:      "m1",
		ClientURL: fmt.Sprintf("http://127.0.0.1:%d", port()),
		PeerURL:   fmt.Sprintf("http://127.0.0.1:%d", port()),
	}
	c.Etcd.Embedded.InitialCluster = "m1=" + c.Etcd.Embedded.PeerURL
	return c
}

// TestEmbeddedEtcdRefusesTooLittleDisk: with less free space than the
// member needs, start-up fails with an error naming the directory, the
// bytes free and the bytes needed; the member is never started.
func TestEmbeddedEtcdRefusesTooLittleDisk(t *testing.T) {
	dir := t.TempDir()
	const have = 40 << 20
	var asked string
	_, err := startEmbeddedEtcd(etcdConfig(t, dir), func(d string) (uint64, error) { asked = d; return have, nil }, slog.New(slog.DiscardHandler))
	require.Error(t, err)
	etcdDir := filepath.Join(dir, "etcd")
	require.Equal(t, etcdDir, asked, "the space is measured where etcd writes")
	need, _, nerr := etcdDiskNeeded(etcdDir)
	require.NoError(t, nerr)
	for _, want := range []string{etcdDir, "41943040 bytes", fmt.Sprintf("%d bytes", need), "needed", "a new member"} {
		require.Contains(t, err.Error(), want)
	}
	entries, _ := os.ReadDir(etcdDir)
	require.Empty(t, entries, "etcd was not started")

	// A failing measurement is an error too, not a start on faith.
	_, err = startEmbeddedEtcd(etcdConfig(t, dir), func(string) (uint64, error) { return 0, fmt.Errorf("statfs: boom") }, slog.New(slog.DiscardHandler))
	require.ErrorContains(t, err, "free space in "+etcdDir+": statfs: boom")
}

// TestEmbeddedEtcdOnASmallTmpfs does it for real: a 40 MiB tmpfs as the
// data directory (before the check, etcd panicked here while
// preallocating its WAL), and a large enough one where the member starts.
// It needs to mount file systems (root); elsewhere it is skipped and the
// seam test above stands alone.
func TestEmbeddedEtcdOnASmallTmpfs(t *testing.T) {
	mount := func(size string) string {
		dir := t.TempDir()
		if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
			t.Skipf("cannot mount a tmpfs here (%v: %s)", err, strings.TrimSpace(string(out)))
		}
		t.Cleanup(func() { _ = exec.Command("umount", dir).Run() })
		return dir
	}
	small := mount("40m")
	free, err := freeBytes(small)
	require.NoError(t, err)
	require.LessOrEqual(t, free, uint64(40<<20))
	_, err = startEmbeddedEtcd(etcdConfig(t, small), freeBytes, slog.New(slog.DiscardHandler))
	require.ErrorContains(t, err, "not enough free disk space in "+filepath.Join(small, "etcd"))

	need, _, err := etcdDiskNeeded(filepath.Join(small, "etcd"))
	require.NoError(t, err)
	big := mount(fmt.Sprintf("%dm", need>>20+8))
	e, err := startEmbeddedEtcd(etcdConfig(t, big), freeBytes, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	e.Close()
}

// TestEmbeddedEtcdRestartNeedsOneSegment: a member whose WAL exists
// restarts with one WAL segment free (what it preallocates at once),
// less what a leftover 0.tmp already holds; before, it asked for two
// fresh segments and headroom (138 MiB) and a node whose disk had filled
// could not start again.
func TestEmbeddedEtcdRestartNeedsOneSegment(t *testing.T) {
	dir := t.TempDir()
	cfg := etcdConfig(t, dir)
	plenty := func(string) (uint64, error) { return 1 << 40, nil }
	e, err := startEmbeddedEtcd(cfg, plenty, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	e.Close()

	etcdDir := filepath.Join(dir, "etcd")
	_, err = startEmbeddedEtcd(cfg, func(string) (uint64, error) { return uint64(wal.SegmentSizeBytes - 1), nil }, slog.New(slog.DiscardHandler))
	require.ErrorContains(t, err, "not enough free disk space in "+etcdDir)
	require.ErrorContains(t, err, fmt.Sprintf("%d bytes (61.0 MiB) needed (a restart", wal.SegmentSizeBytes))
	e, err = startEmbeddedEtcd(cfg, func(string) (uint64, error) { return uint64(wal.SegmentSizeBytes), nil }, slog.New(slog.DiscardHandler))
	require.NoError(t, err, "one segment is what a restart needs")
	e.Close()

	// A crash leaves the preallocated next segment, which the restart
	// reuses: its blocks count.
	f, err := os.Create(filepath.Join(etcdDir, "member", "wal", "0.tmp"))
	require.NoError(t, err)
	require.NoError(t, unix.Fallocate(int(f.Fd()), 0, 0, 1<<20))
	require.NoError(t, f.Close())
	need, what, err := etcdDiskNeeded(etcdDir)
	require.NoError(t, err)
	require.Equal(t, uint64(wal.SegmentSizeBytes-1<<20), need, what)
}
