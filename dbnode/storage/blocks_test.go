package storage

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/dbnode/encoding"
	"github.com/tessera-tsdb/tessera/dbnode/fileset"
	"github.com/tessera-tsdb/tessera/ident"
	"strconv"
)

func TestStreamBlocksAsStoredBetweenDatabases(t *testing.T) {
	clk := &clock{t: t0.Add(30 * time.Minute)}
	opts := testOpts(t.TempDir(), clk)
	opts.NumShards = 1 // every series in shard 0
	src := openDB(t, opts)
	base := ms(t0)
	var ids [][]byte
	for i := 0; i < 50; i++ {
		id := ident.FromLabels(labels.FromStrings("__name__", "m", "i", strconv.Itoa(i)))
		ids = append(ids, id)
		require.NoError(t, src.WriteBatch("default", samples(src, id, base+1000, base+2000, base+3000)))
	}
	clk.Add(2 * time.Hour)
	require.NoError(t, src.Tick()) // block t0 flushed
	// New samples in the next block stay in memory.
	require.NoError(t, src.WriteBatch("default", samples(src, ids[0], ms(clk.Now()))))

	metas, err := src.FlushedBlocks("default", 0)
	require.NoError(t, err)
	require.Len(t, metas, 1)
	require.Equal(t, base, metas[0].BlockStart)
	require.Equal(t, 50, metas[0].Series)
	require.Equal(t, 150, metas[0].Samples)

	// Page through it with a tiny budget: every series once, in order.
	var all []fileset.Series
	var after []byte
	for pages := 0; ; pages++ {
		page, more, err := src.ReadBlock("default", 0, base, after, 64)
		require.NoError(t, err)
		require.NotEmpty(t, page)
		all = append(all, page...)
		after = page[len(page)-1].ID
		if !more {
			require.Greater(t, pages, 3)
			break
		}
	}
	require.Len(t, all, 50)

	dstOpts := testOpts(t.TempDir(), clk)
	dstOpts.NumShards = 1
	dst := openDB(t, dstOpts)
	require.NoError(t, dst.LoadBlock("default", 0, base, all))
	dm, err := dst.FlushedBlocks("default", 0)
	require.NoError(t, err)
	require.Equal(t, metas[0].Digest, dm[0].Digest, "loaded as stored")
	for _, id := range ids {
		require.Equal(t, readAll(t, src, id, base, base+10_000), readAll(t, dst, id, base, base+10_000))
	}

	// Loading again over a local block merges into a new volume; local
	// samples win on equal timestamps.
	require.NoError(t, dst.LoadBatch("default", []Sample{{ID: ids[1], Shard: 0, T: base + 1500, V: 7}}))
	clk.Add(time.Minute)
	require.NoError(t, dst.Tick())
	require.NoError(t, dst.LoadBlock("default", 0, base, all[:2]))
	got := readAll(t, dst, ids[1], base, base+10_000)
	require.Len(t, got, 4)
	require.Equal(t, tv{base + 1500, 7}, got[1])

	mem, more, err := src.ReadUnflushed("default", 0, nil, 1<<20)
	require.NoError(t, err)
	require.False(t, more)
	require.Len(t, mem, 1)
	require.Equal(t, ids[0], mem[0].ID)
}

// LoadBlocks writes blocks of many shards at once; a block named twice
// (two replicas' differing copies) is merged, and every block is durable
// and readable after a reopen.
func TestLoadBlocksManyShardsAndADuplicate(t *testing.T) {
	clk := &clock{t: t0.Add(30 * time.Minute)}
	opts := testOpts(t.TempDir(), clk)
	opts.NumShards = 64
	src := openDB(t, opts)
	base := ms(t0)
	var ids [][]byte
	for i := 0; i < 300; i++ {
		id := ident.FromLabels(labels.FromStrings("__name__", "m", "i", strconv.Itoa(i)))
		ids = append(ids, id)
		require.NoError(t, src.WriteBatch("default", samples(src, id, base+1000, base+2000, base+3000)))
	}
	clk.Add(2 * time.Hour)
	require.NoError(t, src.Tick())

	var blocks []StreamedBlock
	digests := map[uint32]uint64{}
	for sh := uint32(0); sh < opts.NumShards; sh++ {
		metas, err := src.FlushedBlocks("default", sh)
		require.NoError(t, err)
		if len(metas) == 0 {
			continue
		}
		series, more, err := src.ReadBlock("default", sh, base, nil, 1<<20)
		require.NoError(t, err)
		require.False(t, more)
		blocks = append(blocks, StreamedBlock{Shard: sh, BlockStart: base, Series: series})
		digests[sh] = metas[0].Digest
	}
	require.Greater(t, len(blocks), 16, "many shards of one block")
	// A second replica's copy of ids[0]'s block holds one more sample.
	dupShard := src.Shard(ids[0])
	enc := encoding.NewEncoder()
	for _, ts := range []int64{base + 1000, base + 2000, base + 2500, base + 3000} {
		require.NoError(t, enc.Append(ts, float64(ts)/1000))
	}
	other, err := sealSeries(ids[0], encoding.NewIterator(enc.Bytes()), nil)
	require.NoError(t, err)
	blocks = append(blocks, StreamedBlock{Shard: dupShard, BlockStart: base, Series: []fileset.Series{other}})

	dstOpts := testOpts(t.TempDir(), clk)
	dstOpts.NumShards = opts.NumShards
	dst := openDB(t, dstOpts)
	require.NoError(t, dst.LoadBlocks("default", blocks))
	datas, err := filepath.Glob(filepath.Join(dstOpts.Dir, "data", "default", "fileset-*-data.db"))
	require.NoError(t, err)
	require.Len(t, datas, 2, "one volume for the block's %d shards, one for the second copy", len(blocks)-1)
	require.NoError(t, dst.Close())
	dst = openDB(t, dstOpts) // durable: read back from disk

	for sh, d := range digests {
		metas, err := dst.FlushedBlocks("default", sh)
		require.NoError(t, err)
		require.Len(t, metas, 1, "shard %d", sh)
		if sh != dupShard {
			require.Equal(t, d, metas[0].Digest, "shard %d loaded as stored", sh)
		}
	}
	for _, id := range ids[1:] {
		require.Equal(t, readAll(t, src, id, base, base+10_000), readAll(t, dst, id, base, base+10_000))
	}
	require.Len(t, readAll(t, dst, ids[0], base, base+10_000), 4, "both copies merged")

	err = dst.LoadBlocks("default", []StreamedBlock{{Shard: 0, BlockStart: base + 7, Series: blocks[0].Series}})
	require.ErrorContains(t, err, "not aligned")
	err = dst.LoadBlocks("default", []StreamedBlock{{Shard: 64, BlockStart: base, Series: blocks[0].Series}})
	require.ErrorContains(t, err, "shard 64: shard out of range")
}

// LoadStreams loads a peer's unflushed series through the commit log: the
// samples read back the same, also after a restart (replay), and a stream
// that does not decode fails the call naming the series.
func TestLoadStreamsFromUnflushed(t *testing.T) {
	clk := &clock{t: t0.Add(30 * time.Minute)}
	opts := testOpts(t.TempDir(), clk)
	src := openDB(t, opts)
	base := ms(t0)
	var ids [][]byte
	for i := 0; i < 40; i++ {
		id := ident.FromLabels(labels.FromStrings("__name__", "m", "i", strconv.Itoa(i)))
		ids = append(ids, id)
		require.NoError(t, src.WriteBatch("default", samples(src, id, base+1000, base+2000, base+3000)))
	}
	dstOpts := testOpts(t.TempDir(), clk)
	dst := openDB(t, dstOpts)
	total := 0
	for sh := uint32(0); sh < opts.NumShards; sh++ {
		mem, more, err := src.ReadUnflushed("default", sh, nil, 1<<20)
		require.NoError(t, err)
		require.False(t, more)
		n, err := dst.LoadStreams("default", sh, mem)
		require.NoError(t, err)
		total += n
	}
	require.Equal(t, 120, total)
	require.NoError(t, dst.Close())
	dst = openDB(t, dstOpts) // from the commit log
	for _, id := range ids {
		require.Equal(t, readAll(t, src, id, base, base+10_000), readAll(t, dst, id, base, base+10_000))
	}

	bad := []SeriesStream{{ID: ids[0], Stream: []byte{0xff, 0xff, 0xff}}}
	_, err := dst.LoadStreams("default", dst.Shard(ids[0]), bad)
	require.ErrorContains(t, err, "decode streamed series")
	_, err = dst.LoadStreams("default", 64, nil)
	require.ErrorContains(t, err, "shard 64 out of range")
}
