package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/dbnode/fileset"
	"github.com/tessera-tsdb/tessera/dbnode/vfs"
	"github.com/tessera-tsdb/tessera/ident"
	"github.com/tessera-tsdb/tessera/placement"
	"github.com/tessera-tsdb/tessera/repair"
)

// Repair tests run three real tessera binaries (RF 3, 16 shards, 1m
// blocks, 10s bufferPast, a tick a second, repair every 2s, reads at level
// one) over an etcd in the test process.
const (
	repairShards     = 16
	repairBlock      = time.Minute
	repairSeriesN    = 50
	repairSamplesPer = 60
)

// repairCluster starts three binaries sharing one placement and returns
// them with their RPC endpoints.
func repairCluster(t *testing.T) []*binaryNode {
	e := startEtcd(t)
	c := etcdClient(t, e.client)
	var nodes []*binaryNode
	var ins []placement.Instance
	for i := 1; i <= 3; i++ {
		id, group := fmt.Sprintf("node%d", i), fmt.Sprintf("rack%d", i)
		dir := t.TempDir()
		b := &binaryNode{t: t, bin: tesseraBinary(t), dir: dir, http: freePort(t)}
		rpcAddr := freePort(t)
		conf := fmt.Sprintf(`id: %s
isolationGroup: %s
dataDir: %s
http:
  listen: %s
rpc:
  listen: %s
etcd:
  endpoints: [%s]
storage:
  tickInterval: 1s
namespaces:
  - name: default
    blockSize: 1m
    bufferPast: 10s
cluster:
  numShards: %d
  readConsistency: one
  healthCheckInterval: 200ms
  requestTimeout: 2s
hints:
  enabled: false # repair alone must converge the replicas here
repair:
  every: 2s
  settleMargin: 1s
  maxBytesPerSecond: 0
`, id, group, filepath.Join(dir, "data"), b.http, rpcAddr, e.client, repairShards)
		b.conf = filepath.Join(dir, "node.yml")
		require.NoError(t, os.WriteFile(b.conf, []byte(conf), 0o644))
		host, port, _ := strings.Cut(rpcAddr, ":")
		p, _ := strconv.Atoi(port)
		ins = append(ins, placement.Instance{ID: id, IsolationGroup: group, Zone: "z", Weight: 1,
			Endpoint: rpcAddr, HTTPEndpoint: b.http, Hostname: host, Port: uint32(p)})
		nodes = append(nodes, b)
	}
	p, err := placement.Init(ins, repairShards, 3)
	require.NoError(t, err)
	putPlacement(t, c, p)
	for _, b := range nodes {
		b.start()
	}
	return nodes
}

func (b *binaryNode) url() string { return "http://" + b.http }

// repairStatus is the node's repair status over HTTP.
func repairStatus(b *binaryNode) (repair.Status, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return repair.FetchStatus(ctx, http.DefaultClient, b.url())
}

// waitRepaired waits until node b's repair has written at least n samples
// since it started.
func waitRepaired(t *testing.T, b *binaryNode, n int64) repair.Status {
	var st repair.Status
	eventually(t, 60*time.Second, "repair on "+b.http, func() error {
		var err error
		if st, err = repairStatus(b); err != nil {
			return err
		}
		if st.Total.SamplesRepaired < n {
			return fmt.Errorf("%d samples repaired, want %d (pass %d, %d errors)", st.Total.SamplesRepaired, n, st.Pass.Number, st.Total.Errors)
		}
		return nil
	})
	return st
}

// datasetShards is the shards the dataset's series hash to.
func datasetShards(n int) map[uint32]bool {
	out := map[uint32]bool{}
	for i := 0; i < n; i++ {
		id := ident.FromLabels(labels.FromStrings("__name__", "it_metric", "job", "it", "series", strconv.Itoa(i)))
		out[ident.Shard(id, repairShards)] = true
	}
	return out
}

// filesetFiles lists node b's fileset files of block bs ending in kind:
// the block's volumes, which hold every shard (docs/format/fileset.md).
func filesetFiles(t *testing.T, b *binaryNode, bs int64, kind string) []string {
	dir := filepath.Join(b.dir, "data", "data", "default")
	ents, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	var out []string
	for _, e := range ents {
		if !e.IsDir() && strings.HasPrefix(e.Name(), "fileset-"+strconv.FormatInt(bs, 10)+"-") && strings.HasSuffix(e.Name(), kind) {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	return out
}

// blockFlushed reports whether every shard of the dataset has block bs
// flushed on node b: a complete volume holding each of them.
func blockFlushed(t *testing.T, b *binaryNode, shards map[uint32]bool, bs int64) error {
	root := filepath.Join(b.dir, "data", "data")
	ids, err := fileset.ListBlocks(vfs.OS(), root, "default")
	if err != nil {
		return err
	}
	have := map[uint32]bool{}
	for _, id := range ids {
		if id.BlockStart != bs {
			continue
		}
		v, err := fileset.OpenBlock(vfs.OS(), root, id, fileset.OpenOptions{})
		if err != nil {
			return err // a volume being removed: look again
		}
		for _, s := range v.Shards() {
			have[s] = true
		}
		_ = v.Close()
	}
	n := 0
	for s := range shards {
		if have[s] {
			n++
		}
	}
	if n < len(shards) {
		return fmt.Errorf("%d of %d shards flushed", n, len(shards))
	}
	return nil
}

// TestRepairBringsBackDeletedFileset: a flushed block's fileset deleted
// from a stopped replica comes back through repair after its restart,
// indexed: a label-matcher query on that node alone, the two others
// stopped, finds every series and every sample.
func TestRepairBringsBackDeletedFileset(t *testing.T) {
	nodes := repairCluster(t)
	// A block two blocks back: already past end + bufferPast, so the cold
	// writes into it are flushed at the next tick.
	bs := time.Now().Truncate(repairBlock).Add(-2 * repairBlock).UnixMilli()
	d := newDataset()
	for k := 0; k < repairSamplesPer; k++ {
		require.NoError(t, d.write(nodes[0].url(), 0, repairSeriesN, bs+int64(k)*1000))
	}
	shards := datasetShards(repairSeriesN)
	for _, b := range nodes {
		eventually(t, 30*time.Second, "block flushed on "+b.http, func() error { return blockFlushed(t, b, shards, bs) })
	}
	// Every replica agrees before the damage.
	for _, b := range nodes {
		eventually(t, 15*time.Second, "replica "+b.http+" holds the block", func() error { return d.check(b.url(), bs, bs+repairBlock.Milliseconds()) })
	}

	n3 := nodes[2]
	n3.kill9()
	files := filesetFiles(t, n3, bs, "")
	require.NotEmpty(t, files)
	for _, f := range files {
		require.NoError(t, os.Remove(f))
	}
	// The commit log may still hold the block's samples until a later tick
	// deletes it; remove it too, as on a node whose commit log was already
	// cleaned up (no other data is unflushed on it).
	require.NoError(t, os.RemoveAll(filepath.Join(n3.dir, "data", "commitlog")))
	n3.start()
	// Repair starts at once and may already be pulling: what proves the
	// block came back through it is the count of samples it wrote.

	want := int64(repairSeriesN * repairSamplesPer)
	st := waitRepaired(t, n3, want)
	require.Equal(t, want, st.Total.SamplesRepaired, "every sample of the block came back through repair")
	t.Logf("node3 repair: pass %d, %d blocks differing, %d series repaired, %d samples, %d bytes",
		st.Pass.Number, st.Total.BlocksDiffering, st.Total.SeriesRepaired, st.Total.SamplesRepaired, st.Total.Bytes)
	// The CLI shows it, for people and machines; a bad flag is an error.
	bin := tesseraBinary(t)
	out, err := exec.Command(bin, "repair", "status", "--url", n3.url(), "-v").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "SERIES DIFFERING")
	require.Equal(t, repairShards+5, strings.Count(string(out), "\n"), "%s", out)
	out, err = exec.Command(bin, "repair", "status", "--url", n3.url(), "-o", "json").Output()
	require.NoError(t, err)
	var cli repair.Status
	require.NoError(t, json.Unmarshal(out, &cli))
	require.Equal(t, want, cli.Total.SamplesRepaired)
	out, err = exec.Command(bin, "repair", "status", "--url", n3.url(), "-o", "yaml").CombinedOutput()
	require.Error(t, err)
	require.Contains(t, string(out), `-o "yaml": want table or json`)

	// The repaired block is flushed to a fileset again.
	eventually(t, 30*time.Second, "block flushed again on node3", func() error { return blockFlushed(t, n3, shards, bs) })

	nodes[0].kill9()
	nodes[1].kill9()
	eventually(t, 15*time.Second, "node3 alone answers every sample", func() error {
		return d.check(n3.url(), 0, math.MaxInt64)
	})
	got, err := remoteRead(n3.url(), 0, math.MaxInt64)
	require.NoError(t, err)
	require.Len(t, got, repairSeriesN)
}

// TestRepairFillsMissedInMemorySamples: writes acknowledged at majority
// while one replica was down reach it through repair while still in
// memory (hinted handoff is off in repairCluster: hints would otherwise
// deliver them first, leaving repair nothing to show).
func TestRepairFillsMissedInMemorySamples(t *testing.T) {
	nodes := repairCluster(t)
	n3 := nodes[2]
	d := newDataset()
	now := time.Now().UnixMilli()
	require.NoError(t, d.write(nodes[0].url(), 0, repairSeriesN, now-2000))
	eventually(t, 15*time.Second, "node3 holds the first write", func() error { return d.check(n3.url(), 0, math.MaxInt64) })
	n3.kill9()
	// node3 misses these: written at majority to nodes 1 and 2 only.
	missed := 0
	for k := 0; k < 20; k++ {
		require.NoError(t, d.write(nodes[k%2].url(), 0, repairSeriesN, now-1000+int64(k)*10))
		missed += repairSeriesN
	}
	// A replica write outlives its request by up to cluster.requestTimeout
	// (the fan-out keeps delivering to late replicas under a context
	// detached from the caller's): only once that has run out is node3
	// sure to have missed them.
	lastWrite := time.Now()
	eventually(t, 30*time.Second, "replica writes to node3 expired", func() error {
		if d := time.Since(lastWrite); d < 2*2*time.Second {
			return fmt.Errorf("%v since the last write", d)
		}
		return nil
	})
	n3.start()

	// Every missed sample came back through repair (it wrote them).
	st := waitRepaired(t, n3, int64(missed))
	require.Equal(t, int64(missed), st.Total.SamplesRepaired)
	t.Logf("node3 repair: pass %d, %d series repaired, %d samples, %d bytes",
		st.Pass.Number, st.Total.SeriesRepaired, st.Total.SamplesRepaired, st.Total.Bytes)
	nodes[0].kill9()
	nodes[1].kill9()
	eventually(t, 15*time.Second, "node3 alone answers every sample", func() error {
		return d.check(n3.url(), 0, math.MaxInt64)
	})
}
