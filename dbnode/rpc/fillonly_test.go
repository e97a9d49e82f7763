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
	res, err := c.WriteHistogramsFill(ctx, testNS, []storage.HistogramSample{
		smp(a, 0, 10), smp(a, 1000, 20), smp(a, 2000, 30), smp(b, 0, 7),
	})
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
