package integration

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/dbnode/rpc"
	"github.com/tessera-tsdb/tessera/placement"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Hinted handoff with the real binary (docs/internals/write.md, Hints): a replica
// that misses writes acknowledged at majority gets them from the
// coordinator's hint queue once it answers again, without any other
// repair, and every replica then returns every acknowledged sample bit
// for bit.

// hintStatus reads a node's /api/v1/status/hints: the records queued for
// target.
func hintStatus(base, target string) (int, error) {
	resp, err := http.Get(base + "/api/v1/status/hints")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var out struct {
		Enabled bool `json:"enabled"`
		Targets []struct {
			Target  string `json:"target"`
			Records int    `json:"records"`
		} `json:"targets"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return 0, fmt.Errorf("hint status: %d: %w", resp.StatusCode, err)
	}
	if !out.Enabled {
		return 0, errors.New("hinted handoff is off")
	}
	for _, t := range out.Targets {
		if t.Target == target {
			return t.Records, nil
		}
	}
	return 0, nil
}

// waitHinted waits until base holds hints for target.
func waitHinted(t *testing.T, base, target string) {
	t.Helper()
	eventually(t, 30*time.Second, "hints queued for "+target, func() error {
		n, err := hintStatus(base, target)
		if err == nil && n == 0 {
			err = errors.New("no hints yet")
		}
		return err
	})
}

// restartBinary starts a stopped process of startBinaryReplica again with
// the same command line (config, data directory and ports).
func restartBinary(t *testing.T, old *exec.Cmd) *exec.Cmd {
	cmd := exec.Command(old.Path, old.Args[1:]...)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd
}

// waitFor waits, without sleeping, until d has passed since start.
func waitFor(t *testing.T, start time.Time, d time.Duration, what string, also func() error) {
	t.Helper()
	eventually(t, d+30*time.Second, what, func() error {
		if el := time.Since(start); el < d {
			return fmt.Errorf("%v of %v", el.Round(time.Second), d)
		}
		if also != nil {
			return also()
		}
		return nil
	})
}

// hintCluster starts node1 (the coordinator every write goes through:
// in process, or the real binary when binary1), node2 (in process) and
// node3 (the real binary) at RF 3. cmd1 is nil for an in-process node1.
func hintCluster(t *testing.T, binary1 bool) (n1, n2, n3 *tnode, cmd1, cmd3 *exec.Cmd, c *clientv3.Client) {
	e := startEtcd(t)
	if binary1 {
		n1, cmd1 = startBinaryReplica(t, "node1", "rack1", e.client)
	} else {
		n1 = startNode(t, nodeConfig(t, "node1", "rack1", e.client))
	}
	n2 = startNode(t, nodeConfig(t, "node2", "rack2", e.client))
	n3, cmd3 = startBinaryReplica(t, "node3", "rack3", e.client)
	c = etcdClient(t, e.client)
	p, err := placement.Init([]placement.Instance{n1.instance(), n2.instance(), n3.instance()}, 4096, 3)
	require.NoError(t, err)
	putPlacement(t, c, p)
	for _, n := range []*tnode{n1, n2, n3} {
		eventually(t, 60*time.Second, n.cfg.ID+" ready", n.ready)
	}
	return n1, n2, n3, cmd1, cmd3, c
}

// converged waits (at most within) until every replica alone holds every
// acknowledged sample of its shards, bit for bit, read from that replica's
// own storage over its RPC; it returns how long that took.
func converged(t *testing.T, c *clientv3.Client, d *dataset, within time.Duration) time.Duration {
	t.Helper()
	p := getPlacement(t, c)
	start := time.Now()
	eventually(t, within, "every replica holds every acknowledged sample", func() error {
		for _, in := range p.Instances {
			if _, err := replicaHolds(rpc.ClientOptions{}, in, p.NumShards, d); err != nil {
				return err
			}
		}
		return nil
	})
	took := time.Since(start)
	for _, in := range p.Instances {
		n, err := replicaHolds(rpc.ClientOptions{}, in, p.NumShards, d)
		require.NoError(t, err)
		t.Logf("%s alone: %d acknowledged samples of its shards, bit for bit", in.ID, n)
	}
	return took
}

// instanceOf returns the placement's instance id.
func instanceOf(t *testing.T, c *clientv3.Client, id string) placement.Instance {
	for _, in := range getPlacement(t, c).Instances {
		if in.ID == id {
			return in
		}
	}
	t.Fatalf("no instance %s", id)
	return placement.Instance{}
}

// TestHintsFrozenReplicaCatchesUp freezes node3 (SIGSTOP) for 15 s while
// writes at majority go on through node1, then resumes it: node1's hints
// bring it every sample it missed within 60 s, and with node1 and node2
// stopped it still holds all of them.
func TestHintsFrozenReplicaCatchesUp(t *testing.T) {
	n1, n2, _, _, cmd3, c := hintCluster(t, false)
	d := newDataset()
	l := startLoad(t, d, func() []string { return []string{n1.url()} }, 100)
	d.waitSamples(t, 1000)

	require.NoError(t, cmd3.Process.Signal(syscall.SIGSTOP))
	frozenAt := time.Now()
	waitHinted(t, n1.url(), "node3")
	atFreeze := d.total()
	waitFor(t, frozenAt, 15*time.Second, "node3 frozen 15 s under load", nil)
	require.NoError(t, cmd3.Process.Signal(syscall.SIGCONT))
	missed := d.total() - atFreeze
	// The premise: node3 missed writes; without hints it would not have them.
	require.Positive(t, missed)
	_, missing := replicaHolds(rpc.ClientOptions{}, instanceOf(t, c, "node3"), 4096, d)
	t.Logf("node3 resumed after %v; %d samples acknowledged while it was frozen; right after resuming: %v",
		time.Since(frozenAt).Round(time.Millisecond), missed, missing)

	l.finish()
	writes, errs := l.failures()
	require.Empty(t, errs, "of %d writes at majority", writes)
	took := converged(t, c, d, 60*time.Second)
	t.Logf("converged %v after the load stopped", took)
	eventually(t, 30*time.Second, "node1's queue for node3 empty", func() error {
		n, err := hintStatus(n1.url(), "node3")
		if err == nil && n > 0 {
			err = fmt.Errorf("%d records left", n)
		}
		return err
	})

	// node3 alone: the two others stopped.
	n1.stop()
	n2.stop()
	_, err := replicaHolds(rpc.ClientOptions{}, instanceOf(t, c, "node3"), 4096, d)
	require.NoError(t, err)
}

// TestHintsKilledReplicaCatchesUp kills node3 (-9) while writes go on and
// restarts it 30 s later: its own commit log gives back what it had
// acknowledged, node1's hints what it missed.
func TestHintsKilledReplicaCatchesUp(t *testing.T) {
	n1, n2, n3, _, cmd3, c := hintCluster(t, false)
	d := newDataset()
	l := startLoad(t, d, func() []string { return []string{n1.url()} }, 100)
	d.waitSamples(t, 1000)

	require.NoError(t, cmd3.Process.Signal(syscall.SIGKILL))
	_ = cmd3.Wait()
	killedAt := time.Now()
	waitHinted(t, n1.url(), "node3")
	atKill := d.total()
	waitFor(t, killedAt, 30*time.Second, "node3 down 30 s under load", nil)
	require.Positive(t, d.total()-atKill)
	restartBinary(t, cmd3)
	eventually(t, 60*time.Second, "node3 ready again", n3.ready)

	l.finish()
	writes, errs := l.failures()
	require.Empty(t, errs, "of %d writes at majority", writes)
	took := converged(t, c, d, 60*time.Second)
	t.Logf("converged %v after the load stopped (%d samples acknowledged while node3 was down)", took, d.total()-atKill)
	n1.stop()
	n2.stop()
	_, err := replicaHolds(rpc.ClientOptions{}, instanceOf(t, c, "node3"), 4096, d)
	require.NoError(t, err)
}

// TestHintsCoordinatorKilledWithHintsQueued: node1 (the real binary this
// time) coordinates writes while node3 is frozen, so it queues hints; it
// is killed -9 with them on disk, node3 resumes, and once node1 is back
// it replays them: node3 ends up with every acknowledged sample. Without
// the replay nothing would bring them (no repair runs here).
func TestHintsCoordinatorKilledWithHintsQueued(t *testing.T) {
	n1, _, n3, cmd1, cmd3, c := hintCluster(t, true)
	d := newDataset()
	l := startLoad(t, d, func() []string { return []string{n1.url()} }, 100)
	d.waitSamples(t, 500)
	require.NoError(t, cmd3.Process.Signal(syscall.SIGSTOP))
	waitHinted(t, n1.url(), "node3")
	// Keep writing a while after node3 is known down: those writes fail
	// on it at once, so their hints are durable before they are
	// acknowledged.
	hinted := d.total()
	eventually(t, 30*time.Second, "writes acknowledged with node3 down", func() error {
		if d.total() < hinted+2000 {
			return fmt.Errorf("%d of %d", d.total()-hinted, 2000)
		}
		return nil
	})
	l.finish()
	writes, errs := l.failures()
	require.Empty(t, errs, "of %d writes at majority", writes)
	queued, err := hintStatus(n1.url(), "node3")
	require.NoError(t, err)
	require.NoError(t, cmd1.Process.Signal(syscall.SIGKILL))
	_ = cmd1.Wait()
	require.NoError(t, cmd3.Process.Signal(syscall.SIGCONT))
	eventually(t, 30*time.Second, "node3 answers again", n3.ready)
	// The premise: node3 lacks acknowledged samples that only node1's
	// hints can give it.
	_, missing := replicaHolds(rpc.ClientOptions{}, instanceOf(t, c, "node3"), 4096, d)
	require.Error(t, missing)
	t.Logf("node1 killed with %d hint records for node3; node3 before node1's restart: %v", queued, missing)

	restartBinary(t, cmd1)
	restarted := time.Now()
	eventually(t, 60*time.Second, "node1 ready again", n1.ready)
	took := converged(t, c, d, 60*time.Second)
	t.Logf("node3 caught up %v after node1's restart (%v after it was ready)", time.Since(restarted).Round(time.Millisecond), took)
	eventually(t, 30*time.Second, "node1's queue for node3 empty", func() error {
		n, err := hintStatus(n1.url(), "node3")
		if err == nil && n > 0 {
			err = fmt.Errorf("%d records left", n)
		}
		return err
	})
}
