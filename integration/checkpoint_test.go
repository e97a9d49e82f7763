package integration

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestBinaryKeepsVolumeWithoutCheckpoint is issue 32's case 3 on the real
// binary: 600 samples flushed into a volume, the node stopped, the
// volume's checkpoint deleted, the node started again. The volume's data
// and index are moved aside as *.corrupt and the damage is listed on
// /ready; before, they were deleted as an "incomplete volume" with one
// WARN and /ready listed nothing. Series outside the block are all
// served.
func TestBinaryKeepsVolumeWithoutCheckpoint(t *testing.T) {
	b := newBinaryNode(t)
	f, err := os.OpenFile(b.conf, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString(`storage:
  tickInterval: 1s
namespaces:
  - name: default
    blockSize: 1m
    bufferPast: 10s
`)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	b.start()
	url := "http://" + b.http

	// A block two blocks back, flushed at the next tick: 100 series x 6.
	bs := time.Now().Truncate(time.Minute).Add(-2 * time.Minute).UnixMilli()
	cold := newDataset()
	for k := range 6 {
		require.NoError(t, cold.write(url, 0, 100, bs+int64(k)*1000))
	}
	hot := newDataset()
	require.NoError(t, hot.write(url, 1000, 50, time.Now().UnixMilli()))
	eventually(t, 30*time.Second, "block flushed", func() error {
		if len(filesetFiles(t, b, bs, "-checkpoint.db")) == 0 {
			return fmt.Errorf("no complete volume of block %d yet", bs)
		}
		return nil
	})

	require.NoError(t, b.cmd.Process.Signal(syscall.SIGTERM))
	done := make(chan error, 1)
	go func() { done <- b.cmd.Wait() }()
	select {
	case err := <-done:
		require.NoError(t, err, "clean stop")
	case <-time.After(60 * time.Second):
		t.Fatal("node did not stop on SIGTERM")
	}
	cps := filesetFiles(t, b, bs, "-checkpoint.db")
	require.NotEmpty(t, cps)
	// The files the volume had, by identity: the commit log still holds
	// the block's samples (its file also holds the hot ones), so the
	// restarted node replays them and may flush the block again, under
	// the same names, before the checks below run.
	orig := map[string]os.FileInfo{}
	for _, p := range cps {
		base := strings.TrimSuffix(p, "-checkpoint.db")
		for _, kind := range []string{"-data.db", "-index.db"} {
			fi, err := os.Stat(base + kind)
			require.NoError(t, err)
			orig[base+kind] = fi
		}
		require.NoError(t, os.Remove(p))
	}

	b.start()
	resp, err := http.Get(url + "/ready")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Contains(t, string(body), "checkpoint missing", "the damage is listed on /ready: %s", body)
	for p, fi := range orig {
		moved, err := os.Stat(p + ".corrupt")
		require.NoError(t, err, "kept, not deleted")
		require.True(t, os.SameFile(fi, moved), "%s.corrupt is the volume's own file", p)
		if now, err := os.Stat(p); err == nil {
			require.False(t, os.SameFile(fi, now), "%s moved aside (what is there now is a new flush of the replayed block)", p)
		}
	}
	require.NoError(t, hot.check(url, 0, math.MaxInt64), "nothing else lost")
	t.Logf("/ready: %s", body)
}
