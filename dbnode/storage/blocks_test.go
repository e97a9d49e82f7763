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
	other, err := sealSeries(ids[0], encoding.NewIterator(enc.Bytes()), nil, nil)
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

// QueueStreams puts the samples in memory before their commit log record
// is durable and leaves the wait to the caller; what it refuses (out of
// retention, too far in the future) is counted out, the rest is taken,
// and after Wait the samples are replayed from the commit log.
func TestQueueStreamsWaitMakesDurable(t *testing.T) {
	clk := &clock{t: t0.Add(30 * time.Minute)}
	dstOpts := testOpts(t.TempDir(), clk)
	dst := openDB(t, dstOpts)
	base := ms(t0)
	id := sid("q", "i", "0")
	enc := encoding.NewEncoder()
	old := base - (72 * time.Hour).Milliseconds() // past the 48h retention
	future := ms(clk.Now()) + (time.Hour).Milliseconds()
	for _, ts := range []int64{old, base + 1000, base + 2000, base + 3000, future} {
		require.NoError(t, enc.Append(ts, float64(ts)/1000))
	}
	n, q, err := dst.QueueStreams("default", dst.Shard(id), []SeriesStream{{ID: id, Stream: enc.Bytes()}})
	var rej *RejectedError
	require.ErrorAs(t, err, &rej)
	require.Equal(t, 2, rej.Total, "the sample out of retention and the one too far ahead")
	require.Equal(t, 3, n)
	require.Equal(t, []tv{{base + 1000, float64(base+1000) / 1000}, {base + 2000, float64(base+2000) / 1000}, {base + 3000, float64(base+3000) / 1000}},
		readAll(t, dst, id, base, base+10_000), "in memory before the wait")
	require.NoError(t, q.Wait())
	require.NoError(t, q.Wait(), "a second wait is a no-op")
	var none *Queued
	require.NoError(t, none.Wait())
	require.NoError(t, dst.Close())
	dst = openDB(t, dstOpts)
	require.Len(t, readAll(t, dst, id, base, base+10_000), 3, "replayed from the commit log")
}

// ReadUnflushed sends a series held in one stream of one bucket as it is
// (no decode and re-encode): the bytes equal what re-encoding gives, and
// a series written out of order (several streams) or over two blocks
// still reads back merged.
func TestReadUnflushedSoleStreamAsReencoded(t *testing.T) {
	clk := &clock{t: t0.Add(150 * time.Minute)}
	src := openDB(t, testOpts(t.TempDir(), clk))
	base := ms(t0)
	inOrder, outOfOrder, twoBlocks := sid("u", "k", "in"), sid("u", "k", "ooo"), sid("u", "k", "two")
	require.NoError(t, src.WriteBatch("default", samples(src, inOrder, base+1000, base+2000, base+3500)))
	require.NoError(t, src.WriteBatch("default", samples(src, outOfOrder, base+3000, base+1000, base+2000)))
	require.NoError(t, src.WriteBatch("default", samples(src, twoBlocks, base+1000, base+(2*time.Hour).Milliseconds()+1000)))
	got := map[string]SeriesStream{}
	for sh := uint32(0); sh < src.NumShards(); sh++ {
		mem, _, err := src.ReadUnflushed("default", sh, nil, 1<<20)
		require.NoError(t, err)
		for _, s := range mem {
			got[string(s.ID)] = s
		}
	}
	for _, id := range [][]byte{inOrder, outOfOrder, twoBlocks} {
		s, ok := got[string(id)]
		require.True(t, ok, "%s", id)
		want, _, err := encoding.Encode(mergeAll(mustIterators(t, src, id)))
		require.NoError(t, err)
		require.Equal(t, want, s.Stream, "%s", id)
	}
	require.Equal(t, 3, encoding.StreamLen(got[string(outOfOrder)].Stream))
}

func mustIterators(t *testing.T, db *Database, id []byte) []encoding.Iterator {
	t.Helper()
	return storedSeries(t, db, id).iterators(-1<<62, 1<<62)
}

// storedSeries is the series id of namespace "default", which must exist.
func storedSeries(t *testing.T, db *Database, id []byte) *Series {
	t.Helper()
	ns, err := db.namespace("default")
	require.NoError(t, err)
	sh := ns.existingShard(db.Shard(id))
	sh.mu.RLock()
	se := sh.series.get(hashID(id), id)
	sh.mu.RUnlock()
	require.NotNil(t, se)
	return se
}
