package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"
	"github.com/stretchr/testify/require"

	"github.com/tessera-tsdb/tessera/backup"
	"github.com/tessera-tsdb/tessera/config"
	"github.com/tessera-tsdb/tessera/ident"
	"github.com/tessera-tsdb/tessera/placement"
)

// frozen copies the acknowledged samples so far: what a backup started
// afterwards must hold.
func (d *dataset) frozen() *dataset {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := newDataset()
	for k, v := range d.series {
		out.series[k] = slices.Clone(v)
	}
	return out
}

// without copies d minus the samples in [lo, hi) of the series drop
// names (by their "series" label).
func (d *dataset) without(drop func(series int) bool, lo, hi int64) *dataset {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := newDataset()
	for k, v := range d.series {
		i, _ := strconv.Atoi(k)
		for _, smp := range v {
			if drop(i) && smp.Timestamp >= lo && smp.Timestamp < hi {
				continue
			}
			out.series[k] = append(out.series[k], smp)
		}
	}
	return out
}

func promLabels(ls []prompb.Label) labels.Labels {
	b := labels.NewScratchBuilder(len(ls))
	for _, l := range ls {
		b.Add(l.Name, l.Value)
	}
	b.Sort()
	return b.Labels()
}

// restoreCluster starts n fresh nodes restoring backup id from the bucket
// with an RF rf placement of numShards shards, and waits until every
// shard is AVAILABLE.
func restoreCluster(t *testing.T, n, rf int, numShards uint32, bucketFile, id string) []*tnode {
	t.Helper()
	e := startEtcd(t)
	var nodes []*tnode
	for i := 1; i <= n; i++ {
		cfg := nodeConfig(t, fmt.Sprintf("r%d", i), fmt.Sprintf("rack%d", i), e.client)
		cfg.Cluster.NumShards = int(numShards)
		cfg.Bootstrap.Restore = config.Restore{BucketConfigFile: bucketFile, Backup: id}
		require.NoError(t, cfg.Validate())
		nodes = append(nodes, startNode(t, cfg))
	}
	var ins []placement.Instance
	for _, tn := range nodes {
		ins = append(ins, tn.instance())
	}
	p, err := placement.Init(ins, numShards, rf)
	require.NoError(t, err)
	putPlacement(t, etcdClient(t, e.client), p)
	for _, tn := range nodes {
		eventually(t, 90*time.Second, tn.cfg.ID+" ready", tn.ready)
	}
	return nodes
}

// TestBackupRestoreIntoAnyPlacement backs up a three-node RF 3 cluster
// under write load (flushed blocks and memory) to a filesystem bucket,
// restores it into a one-node and a four-node cluster and reads every
// sample acknowledged before the backup started back, bit for bit,
// through each; a second backup after more writes uploads only the
// changed parts.
func TestBackupRestoreIntoAnyPlacement(t *testing.T) {
	_, nodes, _ := clusterNWith(t, 3, func(c *config.Config) {
		c.Cluster.WriteConsistency = "all" // every acknowledged sample is on the replica backed up
		c.Storage.TickInterval = 500 * time.Millisecond
	})
	d := newDataset()
	now := time.Now().UnixMilli()
	// History in a sealed block (cold writes, flushed at the next tick),
	// then recent samples that stay in memory.
	old := now - 3*3600_000
	for j := range 5 {
		require.NoError(t, d.write(nodes[j%3].url(), 0, 200, old+int64(j)*10_000))
	}
	// Every replica holds all 1,000 history samples in its flushed blocks
	// before the first backup: a replica still to flush some would write
	// a new volume of the sealed block between the two backups, and the
	// second would rightly upload it again.
	eventually(t, 30*time.Second, "history flushed on every replica", func() error {
		for _, tn := range nodes {
			samples := 0
			for sh := range uint32(4096) {
				bl, err := tn.n.DB().FlushedBlocks("default", sh)
				if err != nil {
					return err
				}
				for _, b := range bl {
					samples += b.Samples
				}
			}
			if samples != 5*200 {
				return fmt.Errorf("%s: %d of %d history samples flushed", tn.cfg.ID, samples, 5*200)
			}
		}
		return nil
	})
	for j := range 5 {
		require.NoError(t, d.write(nodes[j%3].url(), 0, 200, now-int64(5-j)*1000))
	}

	// Writes go on during the backup.
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Go(func() {
		for j := 0; !stop.Load(); j++ {
			_ = d.write(nodes[j%3].url(), 200, 50, now+int64(j)*1000)
		}
	})
	defer func() { stop.Store(true); wg.Wait() }()
	want := d.frozen()

	dir := t.TempDir()
	conf := fmt.Appendf(nil, "type: FILESYSTEM\nconfig:\n  directory: %s\n", filepath.Join(dir, "bucket"))
	bucketFile := filepath.Join(dir, "bucket.yml")
	require.NoError(t, os.WriteFile(bucketFile, conf, 0o600))
	b, err := backup.NewBucket(conf)
	require.NoError(t, err)
	defer b.Close()
	ctx := context.Background()
	p, err := backup.FetchPlacement(ctx, nil, nodes[0].url())
	require.NoError(t, err)
	m1, err := backup.Create(ctx, b, backup.CreateOptions{ID: "b1", BucketConfig: conf, Placement: p})
	require.NoError(t, err)
	require.Equal(t, m1.Totals.Objects, m1.Totals.UploadedObjects)
	// Each shard once, spread over the three replicas.
	sources := map[string]int{}
	blocks := 0
	for _, s := range m1.Shards {
		sources[s.Source]++
		for _, o := range s.Objects {
			if o.Kind == backup.KindBlock {
				blocks++
			}
		}
	}
	require.Len(t, m1.Shards, 4096)
	require.Len(t, sources, 3, "shards from every replica: %v", sources)
	require.Positive(t, blocks)

	// A second backup after more writes to the open block: the sealed
	// blocks' parts are referenced, not uploaded again.
	require.NoError(t, d.write(nodes[0].url(), 0, 200, now+1))
	m2, err := backup.Create(ctx, b, backup.CreateOptions{ID: "b2", BucketConfig: conf, Placement: p})
	require.NoError(t, err)
	require.LessOrEqual(t, m2.Totals.UploadedObjects, m2.Totals.Objects-blocks, "no block part uploaded again")
	require.Equal(t, "b1", m2.Previous)
	require.Positive(t, m2.Totals.ReusedObjects, "sealed blocks referenced from b1 without reading them")
	t.Logf("first backup %d parts %d bytes; second uploaded %d of %d parts, %d bytes",
		m1.Totals.Objects, m1.Totals.UploadedBytes, m2.Totals.UploadedObjects, m2.Totals.Objects, m2.Totals.UploadedBytes)
	stop.Store(true)
	wg.Wait()

	res, err := backup.Verify(ctx, b, m1, backup.VerifyOptions{Fraction: 1})
	require.NoError(t, err)
	require.Empty(t, res.Damaged)

	one := restoreCluster(t, 1, 1, 4096, bucketFile, "b1")
	require.NoError(t, want.check(one[0].url(), old-1, now+1), "restored into one node")

	// One flipped byte in the flushed block part of one shard: verify
	// names the object, and the four-node restore loses that block only.
	var bad backup.ObjectRef
	var badShard uint32
	for _, s := range m1.Shards {
		for _, o := range s.Objects {
			if o.Kind == backup.KindBlock && bad.Key == "" {
				bad, badShard = o, s.Shard
			}
		}
	}
	path := filepath.Join(dir, "bucket", bad.Key)
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	raw[len(raw)/2] ^= 0x10
	require.NoError(t, os.WriteFile(path, raw, 0o644))
	res, err = backup.Verify(ctx, b, m1, backup.VerifyOptions{Fraction: 1})
	require.NoError(t, err)
	require.Len(t, res.Damaged, 1)
	require.Equal(t, bad.Key, res.Damaged[0].Key)

	four := restoreCluster(t, 4, 3, 4096, bucketFile, "b1")
	fp, err := backup.FetchPlacement(ctx, nil, four[0].url())
	require.NoError(t, err)
	reported := 0
	for _, st := range backup.FetchRestoreStatus(ctx, nil, "http", fp) {
		require.Empty(t, st.Err)
		for _, d := range st.Report.Damaged {
			require.Equal(t, bad.Key, d.Key)
			require.Equal(t, badShard, d.Shard)
			reported++
		}
	}
	// Each new replica of the shard that loaded it from the bucket reports
	// it (one that came up later may have streamed from a peer instead).
	require.Positive(t, reported, "the damaged object is reported")
	lost := want.without(func(series int) bool {
		return ident.Shard(ident.FromLabels(promLabels(seriesLabels(series))), 4096) == badShard
	},
		bad.BlockStart, bad.BlockStart+bad.BlockSize)
	for _, tn := range four {
		require.NoError(t, lost.check(tn.url(), old-1, now+1), "restored into four nodes, read through %s", tn.cfg.ID)
	}
}

// TestBackupRestoreIntoAnotherShardCount backs up a one-node cluster of
// 64 shards (a sealed block and memory) and restores it into a two-node
// cluster of 24 shards (which divides neither way, so each node reads
// every source shard and keeps the series that hash to its own): every
// sample acknowledged before the backup reads back bit for bit through
// each node.
func TestBackupRestoreIntoAnotherShardCount(t *testing.T) {
	e := startEtcd(t)
	cfg := nodeConfig(t, "s1", "rack1", e.client)
	cfg.Cluster.NumShards = 64
	cfg.Storage.TickInterval = 500 * time.Millisecond
	require.NoError(t, cfg.Validate())
	src := startNode(t, cfg)
	p, err := placement.Init([]placement.Instance{src.instance()}, 64, 1)
	require.NoError(t, err)
	putPlacement(t, etcdClient(t, e.client), p)
	eventually(t, 60*time.Second, "s1 ready", src.ready)

	d := newDataset()
	now := time.Now().UnixMilli()
	old := now - 3*3600_000 // a cold write, flushed at the next tick
	for j := range 3 {
		require.NoError(t, d.write(src.url(), 0, 300, old+int64(j)*10_000))
	}
	eventually(t, 30*time.Second, "history flushed", func() error {
		for sh := range uint32(64) {
			if bl, err := src.n.DB().FlushedBlocks("default", sh); err != nil || len(bl) > 0 {
				return err
			}
		}
		return fmt.Errorf("no flushed block yet")
	})
	for j := range 3 {
		require.NoError(t, d.write(src.url(), 0, 300, now-int64(3-j)*1000))
	}

	dir := t.TempDir()
	conf := fmt.Appendf(nil, "type: FILESYSTEM\nconfig:\n  directory: %s\n", filepath.Join(dir, "bucket"))
	bucketFile := filepath.Join(dir, "bucket.yml")
	require.NoError(t, os.WriteFile(bucketFile, conf, 0o600))
	b, err := backup.NewBucket(conf)
	require.NoError(t, err)
	defer b.Close()
	ctx := context.Background()
	bp, err := backup.FetchPlacement(ctx, nil, src.url())
	require.NoError(t, err)
	m, err := backup.Create(ctx, b, backup.CreateOptions{ID: "b64", BucketConfig: conf, Placement: bp})
	require.NoError(t, err)
	require.Equal(t, uint32(64), m.NumShards)
	blocks := 0
	for _, s := range m.Shards {
		for _, o := range s.Objects {
			if o.Kind == backup.KindBlock {
				blocks++
			}
		}
	}
	require.Positive(t, blocks, "the backup holds sealed blocks")

	two := restoreCluster(t, 2, 1, 24, bucketFile, "b64")
	fp, err := backup.FetchPlacement(ctx, nil, two[0].url())
	require.NoError(t, err)
	require.Equal(t, uint32(24), fp.NumShards)
	restored := int64(0)
	for _, st := range backup.FetchRestoreStatus(ctx, nil, "http", fp) {
		require.Empty(t, st.Err)
		require.True(t, st.Enabled)
		require.Empty(t, st.Report.Damaged)
		restored += st.Report.Samples
	}
	require.Positive(t, restored)
	for _, tn := range two {
		require.NoError(t, d.check(tn.url(), old-1, now+1), "restored into 24 shards, read through %s", tn.cfg.ID)
	}
}
