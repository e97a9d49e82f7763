package rpc

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/dbnode/commitlog"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
)

// A fill-only write (a hint replay) keeps the values the node holds at
// the same series and timestamp and adds the rest; a plain write of the
// same samples overwrites (the later write wins).
func TestWriteFillOnlyKeepsHeldValues(t *testing.T) {
	db := openStorage(t, commitlog.ModeSync)
	c := serve(t, db, nil, ServerOptions{NodeID: "node1"}, ClientOptions{})
	ctx := context.Background()
	a, b := seriesID("cpu", "host", "a"), seriesID("cpu", "host", "b")
	t0 := time.Now().Add(-time.Minute).UnixMilli()
	smp := func(id []byte, dt int64, v float64) storage.Sample {
		return storage.Sample{ID: id, Shard: shardOf(id), T: t0 + dt, V: v}
	}
	_, err := c.WriteBatch(ctx, testNS, []storage.Sample{smp(a, 0, 1), smp(a, 1000, 2)})
	require.NoError(t, err)

	res, err := c.WriteBatchFill(ctx, testNS, []storage.Sample{
		smp(a, 0, 100), smp(a, 1000, 200), smp(a, 2000, 300), // two held, one new
		smp(b, 0, 7), // a series the node does not have
	})
	require.NoError(t, err)
	require.Equal(t, WriteResult{Written: 4}, res, "held samples count as written")
	read := func(id []byte) map[int64]float64 {
		fr, err := c.Fetch(ctx, &FetchRequest{Namespace: testNS, IDs: [][]byte{id}, Start: t0 - 1, End: t0 + 10_000})
		require.NoError(t, err)
		out := map[int64]float64{}
		for _, s := range decodeStream(t, fr.Series[0].Stream) {
			out[s.T-t0] = s.V
		}
		return out
	}
	require.Equal(t, map[int64]float64{0: 1, 1000: 2, 2000: 300}, read(a))
	require.Equal(t, map[int64]float64{0: 7}, read(b))

	// Without fill_only the later write wins.
	_, err = c.WriteBatch(ctx, testNS, []storage.Sample{smp(a, 0, math.Pi)})
	require.NoError(t, err)
	require.Equal(t, math.Pi, read(a)[0])
}

// A fill-only histogram write keeps the histograms the node holds at the
// same series and timestamp and adds the rest, as for floats.
func TestWriteHistogramsFillOnlyKeepsHeld(t *testing.T) {
	db := openStorage(t, commitlog.ModeSync)
	c := serve(t, db, nil, ServerOptions{NodeID: "node1"}, ClientOptions{})
	ctx := context.Background()
	a, b := seriesID("lat", "host", "a"), seriesID("lat", "host", "b")
	t0 := time.Now().Add(-time.Minute).UnixMilli()
	smp := func(id []byte, dt int64, i int) storage.HistogramSample {
		return storage.HistogramSample{ID: id, Shard: shardOf(id), T: t0 + dt, H: rpcHist(i)}
	}
	_, err := c.WriteHistograms(ctx, testNS, []storage.HistogramSample{smp(a, 0, 1), smp(a, 1000, 2)})
	require.NoError(t, err)
	res, err := c.WriteFill(ctx, testNS, storage.Batch{Histograms: []storage.HistogramSample{
		smp(a, 0, 10), smp(a, 1000, 20), smp(a, 2000, 30), smp(b, 0, 7),
	}})
	require.NoError(t, err)
	require.Equal(t, WriteResult{Written: 4}, res, "held samples count as written")
	read := func(id []byte) map[int64]uint64 {
		it, err := db.ReadHistograms(testNS, id, t0-1, t0+10_000)
		require.NoError(t, err)
		out := map[int64]uint64{}
		for it.Next() {
			tt, h := it.AtHistogram(nil)
			out[tt-t0] = h.Count
		}
		require.NoError(t, it.Err())
		return out
	}
	require.Equal(t, map[int64]uint64{0: rpcHist(1).Count, 1000: rpcHist(2).Count, 2000: rpcHist(30).Count}, read(a))
	require.Equal(t, map[int64]uint64{0: rpcHist(7).Count}, read(b))
}

// A hint replay interleaves its series (one sample of each of many series
// per record): the fill-only check reads each series once over its
// samples' range, not once per sample, and keeps the batch's order.
func TestDropHeldReadsEachSeriesOnce(t *testing.T) {
	type smp struct {
		id string
		t  int64
	}
	var batch []smp
	for k := int64(0); k < 4; k++ {
		batch = append(batch, smp{"a", k}, smp{"b", k}, smp{"c", k})
	}
	held := map[string]map[int64]bool{"a": {1: true, 3: true}, "c": {0: true}}
	reads := map[string][2]int64{}
	kept, err := dropHeld(batch, func(x *smp) ([]byte, int64) { return []byte(x.id), x.t },
		func(id []byte, lo, hi int64, out map[int64]struct{}) error {
			_, again := reads[string(id)]
			require.False(t, again, "series %s read twice", id)
			reads[string(id)] = [2]int64{lo, hi}
			for ts := range held[string(id)] {
				if ts >= lo && ts <= hi {
					out[ts] = struct{}{}
				}
			}
			return nil
		})
	require.NoError(t, err)
	require.Equal(t, map[string][2]int64{"a": {0, 3}, "b": {0, 3}, "c": {0, 3}}, reads)
	require.Equal(t, []smp{{"a", 0}, {"b", 0}, {"b", 1}, {"c", 1}, {"a", 2}, {"b", 2}, {"c", 2}, {"b", 3}, {"c", 3}}, kept)
}
