package backup

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/thanos-io/objstore"

	"github.com/tessera-tsdb/tessera/dbnode/storage/storagetest"
	"github.com/tessera-tsdb/tessera/ident"
)

// countingBucket records the keys read from a bucket.
type countingBucket struct {
	objstore.Bucket
	mu   sync.Mutex
	gets []string
}

func (c *countingBucket) Get(ctx context.Context, name string) (io.ReadCloser, error) {
	c.mu.Lock()
	c.gets = append(c.gets, name)
	c.mu.Unlock()
	return c.Bucket.Get(ctx, name)
}

func shardRange(n uint32) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = uint32(i)
	}
	return out
}

func TestSourceShards(t *testing.T) {
	require.Equal(t, []uint32{1, 5}, sourceShards(8, 4, []uint32{1}))          // 4 divides 8
	require.Equal(t, []uint32{1, 3, 5, 7}, sourceShards(8, 2, []uint32{1}))    // 2 divides 8
	require.Equal(t, []uint32{3}, sourceShards(8, 16, []uint32{3, 11}))        // 8 divides 16
	require.Equal(t, shardRange(8), sourceShards(8, 3, []uint32{0}))           // neither: all
	require.Equal(t, []uint32{0, 2}, sourceShards(4, 64, []uint32{0, 32, 34})) // 4 divides 64
	// The rule holds for every ID: its source shard is among those listed.
	for i := range 500 {
		id := seriesID(i)
		for _, c := range [][2]uint32{{8, 4}, {8, 16}, {64, 32}, {4096, 256}, {256, 4096}, {8, 3}} {
			src, dst := c[0], c[1]
			require.Contains(t, sourceShards(src, dst, []uint32{ident.Shard(id, dst)}), ident.Shard(id, src), "%v", c)
		}
	}
}

// TestRestoreIntoAnotherShardCount backs an 8-shard database up (flushed
// blocks and memory) and restores it into databases of 3, 4 and 16
// shards: every sample comes back bit for bit, each series in the shard
// its ID hashes to with the new count, durable across a restart. A shard
// of a count dividing the backup's downloads only the source shards that
// can hold its series. A flipped byte in one block part costs exactly the
// samples of that source shard's block, named with its source shard.
func TestRestoreIntoAnotherShardCount(t *testing.T) {
	ctx := context.Background()
	clk := storagetest.NewClock(t0.Add(5*time.Hour + 30*time.Minute))
	src, dir := openDB(t, clk)
	const n = 60
	base := t0.UnixMilli()
	var ts []int64
	for x := base; x < clk.Now().UnixMilli(); x += 10 * 60_000 {
		ts = append(ts, x)
	}
	write(t, src, n, ts...)
	require.NoError(t, src.Tick()) // flushes the blocks at t0 and t0+2h
	write(t, src, n, clk.Now().UnixMilli()+1000)
	b, bdir := fsBucket(t)
	m, _ := backupDB(t, src, dir, b, "b")
	want := readAllSeries(t, src, n)

	for _, dst := range []uint32{3, 4, 16} {
		ddir := t.TempDir()
		db := openDBAt(t, clk, ddir, dst)
		r, err := NewRestorer(b, m, dst, db, nil)
		require.NoError(t, err)
		require.True(t, r.Resharded())
		require.Equal(t, 8%dst != 0, r.WholeBatch())
		all := shardRange(dst)
		// In two calls, as the bootstrapper's batches would.
		require.NoError(t, r.Restore(ctx, all[:len(all)/2]))
		require.NoError(t, r.Restore(ctx, all[len(all)/2:]))
		rep := r.Report()
		require.Empty(t, rep.Damaged)
		require.Equal(t, int(dst), rep.ShardsDone)
		require.Equal(t, want, readAllSeries(t, db, n), "into %d shards", dst)
		flushed := 0
		for sh := range dst {
			bl, err := db.FlushedBlocks("default", sh)
			require.NoError(t, err)
			flushed += len(bl)
		}
		require.Positive(t, flushed, "blocks installed as volumes")
		require.NoError(t, db.Close())
		require.Equal(t, want, readAllSeries(t, openDBAt(t, clk, ddir, dst), n), "into %d shards, after a restart", dst)
	}

	// Shard 1 of 4 reads source shards 1 and 5 only.
	cb := &countingBucket{Bucket: b}
	one := openDBAt(t, clk, t.TempDir(), 4)
	r, err := NewRestorer(cb, m, 4, one, nil)
	require.NoError(t, err)
	require.NoError(t, r.Restore(ctx, []uint32{1}))
	var exp []string
	for _, s := range []uint32{1, 5} {
		e, _ := m.Shard(s)
		for _, o := range e.Objects {
			exp = append(exp, o.Key)
		}
	}
	slices.Sort(exp)
	slices.Sort(cb.gets)
	require.Equal(t, exp, cb.gets)
	got := readAllSeries(t, one, n)
	for i := range n {
		if ident.Shard(seriesID(i), 4) == 1 {
			require.Equal(t, want[i], got[i], "series %d", i)
		} else {
			require.Empty(t, got[i], "series %d is not in shard 1", i)
		}
	}

	// One flipped byte in a block part of one source shard.
	var bad ObjectRef
	var badShard uint32
	for _, s := range m.Shards {
		for _, o := range s.Objects {
			if o.Kind == KindBlock && bad.Key == "" {
				bad, badShard = o, s.Shard
			}
		}
	}
	path := filepath.Join(bdir, bad.Key)
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	raw[len(raw)/2] ^= 0x01
	require.NoError(t, os.WriteFile(path, raw, 0o644))
	db := openDBAt(t, clk, t.TempDir(), 3)
	r, err = NewRestorer(b, m, 3, db, nil)
	require.NoError(t, err)
	require.NoError(t, r.Restore(ctx, shardRange(3)))
	rep := r.Report()
	require.Len(t, rep.Damaged, 1)
	require.Equal(t, bad.Key, rep.Damaged[0].Key)
	require.Equal(t, badShard, rep.Damaged[0].Shard)
	require.Equal(t, uint32(testShards), rep.Damaged[0].SourceNumShards)
	require.Contains(t, rep.Damaged[0].String(), bad.Key)
	after := readAllSeries(t, db, n)
	lo, hi := bad.BlockStart, bad.BlockStart+bad.BlockSize
	for i := range n {
		var e []point
		for _, p := range want[i] {
			if ident.Shard(seriesID(i), testShards) == badShard && p.T >= lo && p.T < hi {
				continue // the damaged block's samples are lost
			}
			e = append(e, p)
		}
		require.Equal(t, e, after[i], "series %d", i)
	}
}
