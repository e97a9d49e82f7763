package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/dbnode/rpc"
	"github.com/tessera-tsdb/tessera/placement"
)

// hintQueue reads base's /api/v1/status/hints: the bytes and records
// queued for target.
func hintQueue(base, target string) (bytes int64, records int, err error) {
	resp, err := http.Get(base + "/api/v1/status/hints")
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	var out struct {
		Targets []struct {
			Target  string `json:"target"`
			Bytes   int64  `json:"bytes"`
			Records int    `json:"records"`
		} `json:"targets"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return 0, 0, fmt.Errorf("hint status: %d: %w", resp.StatusCode, err)
	}
	for _, t := range out.Targets {
		if t.Target == target {
			return t.Bytes, t.Records, nil
		}
	}
	return 0, 0, nil
}

// writeRange writes series [0, series) at every timestamp of [from, to)
// through url, with a few writers at once; every write must be
// acknowledged.
func (d *dataset) writeRange(t *testing.T, url string, series int, from, to int64) {
	t.Helper()
	const writers = 4
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ts := from + int64(w); ts < to; ts += writers {
				if err := d.write(url, 0, series, ts); err != nil {
					errs <- fmt.Errorf("write at %d: %w", ts, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

// TestHintsDrainAtConfiguredRate is the stopped replica of issue 32 with
// the coordinator killed as well, on real processes: node1 (the binary,
// replaying at hints.replayBytesPerSecond = 4 MiB/s) takes writes while
// node3 is stopped (SIGSTOP) until it holds ~10 MB of hints for node3;
// node1 is then killed -9 and restarted with them on disk, and node3
// resumed (SIGCONT). Asserted:
// the backlog drains at no less than half the configured rate, and node3
// alone holds every acknowledged sample within 60 s of its return.
//
// Before the fix, a replay sent 16384-sample writes of one sample per
// series per record, and the target's fill-only check read each sample's
// series once per sample (decoding its block up to that point), with the
// pacing sleep added after each write: ~1 MB/s here against 4 MiB/s.
func TestHintsDrainAtConfiguredRate(t *testing.T) {
	const (
		rate    = 4 << 20
		series  = 500
		backlog = 10 << 20
	)
	e := startEtcd(t)
	n1, cmd1 := startBinaryReplicaWith(t, "node1", "rack1", e.client, fmt.Sprintf("hints:\n  replayBytesPerSecond: %d\n", rate))
	n2 := startNode(t, nodeConfig(t, "node2", "rack2", e.client))
	n3, cmd3 := startBinaryReplica(t, "node3", "rack3", e.client)
	c := etcdClient(t, e.client)
	p, err := placement.Init([]placement.Instance{n1.instance(), n2.instance(), n3.instance()}, 4096, 3)
	require.NoError(t, err)
	putPlacement(t, c, p)
	for _, n := range []*tnode{n1, n2, n3} {
		eventually(t, 60*time.Second, n.cfg.ID+" ready", n.ready)
	}

	d := newDataset()
	start := time.Now().UnixMilli() - 120_000
	// Every series has a history on node3 before it goes down: the fill-only
	// check of a replay reads it.
	d.writeRange(t, n1.url(), series, start, start+200)

	// node3 stops answering: the writes in flight to it are hinted when
	// node1 marks it down (cancelled), and every write after that fails
	// on it at once, so its hint is fsynced before the write is
	// acknowledged. Hints appear only after that, and the backlog takes
	// seconds more to write: node1 is killed with no straggler pending.
	require.NoError(t, cmd3.Process.Signal(syscall.SIGSTOP))
	stopped := time.Now()
	ts := start + 200
	for {
		b, _, err := hintQueue(n1.url(), "node3")
		require.NoError(t, err)
		if b >= backlog {
			break
		}
		d.writeRange(t, n1.url(), series, ts, ts+40)
		ts += 40
	}
	// A write acknowledged at majority before node1 marked node3 down is
	// hinted when its delivery to node3 fails: at the mark (cancelled) or at
	// the latest when cluster.requestTimeout (10 s) passes. Killing node1
	// before then loses that hint (repair is the backstop; see the session
	// note): wait it out, then for the queue to stop growing.
	var queued int64
	var records int
	eventually(t, 2*time.Minute, "no write to node3 still in flight", func() error {
		if since := time.Since(stopped); since < 15*time.Second {
			return fmt.Errorf("node3 stopped only %v ago", since.Round(time.Second))
		}
		b, n, err := hintQueue(n1.url(), "node3")
		if err != nil {
			return err
		}
		if b != queued || n != records {
			queued, records = b, n
			return fmt.Errorf("hint queue still growing: %d bytes, %d records", b, n)
		}
		return nil
	})
	t.Logf("node1 holds %d bytes in %d hint records for node3 (%d samples acknowledged)", queued, records, d.total())

	// The coordinator dies with the hints on disk and comes back while
	// node3 is still down.
	require.NoError(t, cmd1.Process.Signal(syscall.SIGKILL))
	_ = cmd1.Wait()
	restartBinary(t, cmd1)
	eventually(t, 60*time.Second, "node1 ready again", n1.ready)
	require.NoError(t, cmd3.Process.Signal(syscall.SIGCONT))
	returned := time.Now()
	t.Logf("node3 stopped %v", returned.Sub(stopped).Round(time.Millisecond))

	// The drain: from the first consumed record to an empty queue.
	var first time.Time
	var atFirst int64
	var drained time.Time
	eventually(t, 120*time.Second, "node1's queue for node3 empty", func() error {
		b, n, err := hintQueue(n1.url(), "node3")
		if err != nil {
			return err
		}
		if first.IsZero() && b < queued {
			first, atFirst = time.Now(), b
		}
		if n > 0 {
			return fmt.Errorf("%d records, %d bytes left", n, b)
		}
		drained = time.Now()
		return nil
	})
	took := drained.Sub(first)
	got := float64(atFirst) / took.Seconds()
	t.Logf("drained %d bytes in %v after the first record went: %.2f MB/s, configured %.2f MB/s (node3 returned %v before the queue was empty)",
		atFirst, took.Round(time.Millisecond), got/1e6, float64(rate)/1e6, drained.Sub(returned).Round(time.Millisecond))

	eventually(t, 60*time.Second-time.Since(returned), "node3 alone holds every acknowledged sample", func() error {
		_, err := replicaHolds(rpc.ClientOptions{}, instanceOf(t, c, "node3"), 4096, d)
		return err
	})
	t.Logf("node3 converged %v after its return", time.Since(returned).Round(time.Millisecond))
	require.GreaterOrEqual(t, got, float64(rate)/2, "drain rate (bytes/s) against half of hints.replayBytesPerSecond")
}
