package storage

import (
	"context"
	"runtime"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/dbnode/encoding"
	"pgregory.net/rapid"
)

// TestCombineSourcesModel: concatenating blocks and merging only within
// a block returns what the merge of every source in read order returns
// (later sources win equal timestamps), in any order of blocks, and the
// bounds hold every sample.
func TestCombineSourcesModel(t *testing.T) {
	const blockSize = 100
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(1, 7).Draw(rt, "sources")
		var (
			srcs []readSource
			all  []encoding.Iterator
		)
		for i := range n {
			block := int64(rapid.IntRange(-2, 2).Draw(rt, "block")) * blockSize
			ts := rapid.SliceOfDistinct(rapid.Int64Range(block, block+blockSize-1), func(x int64) int64 { return x }).Draw(rt, "ts")
			sort.Slice(ts, func(a, b int) bool { return ts[a] < ts[b] })
			enc := encoding.NewEncoder()
			for j, tt := range ts {
				require.NoError(rt, enc.Append(tt, float64(i*1000+j)))
			}
			stream := append([]byte(nil), enc.Bytes()...)
			lo, hi := block, block+blockSize-1
			if len(ts) > 0 && rapid.Bool().Draw(rt, "tight") {
				lo, hi = ts[0], ts[len(ts)-1]
			}
			srcs = append(srcs, readSource{it: encoding.NewIterator(stream), block: block, lo: lo, hi: hi})
			all = append(all, encoding.NewIterator(stream))
		}
		want := drainAll(rt, encoding.MergeIterators(all...))
		it, lo, hi := combineSources(srcs)
		got := drainAll(rt, it)
		require.Equal(rt, want, got)
		for _, s := range got {
			require.True(rt, s[0] >= float64(lo) && s[0] <= float64(hi), "sample at %v outside [%d, %d]", s[0], lo, hi)
		}
	})
}

func drainAll(t require.TestingT, it encoding.Iterator) [][2]float64 {
	var out [][2]float64
	for it.Next() {
		tt, v := it.At()
		out = append(out, [2]float64{float64(tt), v})
	}
	require.NoError(t, it.Err())
	return out
}

// TestQueryParallelMatchesSequential: a query selecting enough series to
// be read on several goroutines answers exactly what reading them one by
// one does, in the same order, with series in a flushed block, in memory
// in the next block, with cold writes into the flushed one, and a range
// cutting into both blocks.
func TestQueryParallelMatchesSequential(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	clk := &clock{t: t0.Add(90 * time.Minute)}
	db := openDB(t, testOpts(t.TempDir(), clk))
	n := 3*parallelReadMin + 17
	ids := make([][]byte, n)
	base := ms(t0)
	var batch []Sample
	for i := range ids {
		ids[i] = sid("m", "i", strconv.Itoa(i))
		for k := range 4 {
			batch = append(batch, Sample{ID: ids[i], Shard: db.Shard(ids[i]), T: base + 60*60_000 + int64(k)*600_000 + int64(i%7), V: float64(i + k)})
		}
	}
	require.NoError(t, db.WriteBatch("default", batch))
	clk.Add(2 * time.Hour) // the first block flushes
	require.NoError(t, db.Tick())
	batch = batch[:0]
	for i := range ids {
		batch = append(batch, Sample{ID: ids[i], Shard: db.Shard(ids[i]), T: base + 2*3600_000 + 5000 + int64(i%5), V: float64(-i)})
		if i%3 == 0 {
			// A cold write into the flushed block, over a sample there.
			batch = append(batch, Sample{ID: ids[i], Shard: db.Shard(ids[i]), T: base + 60*60_000 + int64(i%7), V: 0.5})
		}
	}
	require.NoError(t, db.WriteBatch("default", batch))

	ns, err := db.namespace("default")
	require.NoError(t, err)
	ms := []*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, "__name__", "m")}
	for _, r := range [][2]int64{{base, base + 4*3600_000}, {base + 60*60_000 + 3, base + 2*3600_000 + 5002}} {
		got, err := db.Query(context.Background(), "default", ms, r[0], r[1], QueryOptions{})
		require.NoError(t, err)
		qids, err := ns.index.Query(ms, r[0], r[1])
		require.NoError(t, err)
		want := db.readIDs(context.Background(), ns, qids, nil, r[0], r[1], QueryOptions{})
		require.NoError(t, want.err)
		require.Len(t, got, len(want.out))
		require.Len(t, got, n)
		for i := range got {
			require.Equal(t, want.out[i].ID, got[i].ID)
			require.Equal(t, drainAll(t, want.out[i].Values), drainAll(t, got[i].Values))
		}
	}
}
