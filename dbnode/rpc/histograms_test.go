package rpc

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/dbnode/commitlog"
	"github.com/tessera-tsdb/tessera/dbnode/encoding"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func rpcHist(i int) *histogram.Histogram {
	return &histogram.Histogram{Count: uint64(2 * (i + 1)), Sum: float64(i), PositiveSpans: []histogram.Span{{Length: 2}},
		PositiveBuckets: []int64{int64(i + 1), 0}}
}

// histCount decodes a fetched series' histogram streams and counts them.
func histCount(t *testing.T, s FetchedSeries) int {
	t.Helper()
	it := s.HistogramIterator()
	if it == nil {
		return 0
	}
	n := 0
	for it.Next() {
		n++
	}
	require.NoError(t, it.Err())
	return n
}

// A node holding native histograms hands them to a requester that says
// it reads them (Fetch, FetchTagged, FetchUnflushed, FetchBlock), and
// refuses a requester that does not (an older node, which would drop the
// field unseen) with FailedPrecondition, never floats alone passed off as
// the series.
func TestFetchesCarryHistogramsOnlyToWhoReadsThem(t *testing.T) {
	clk := &testClock{t: blockT0.Add(30 * time.Minute)}
	opts := testStorageOptions(t.TempDir(), commitlog.ModeSync)
	opts.NumShards = peerShards
	opts.Now = clk.Now
	db, err := storage.Open(opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, db.Close()) })
	c := serve(t, db, nil, ServerOptions{}, ClientOptions{})
	ctx := context.Background()

	base := blockT0.UnixMilli()
	hid, fid := seriesID("lat"), seriesID("up")
	var hs []storage.HistogramSample
	for i := 0; i < 5; i++ {
		hs = append(hs, storage.HistogramSample{ID: hid, Shard: db.Shard(hid), T: base + int64(i)*1000, H: rpcHist(i)})
	}
	require.NoError(t, db.LoadHistograms(testNS, hs))
	require.NoError(t, db.LoadBatch(testNS, []storage.Sample{{ID: fid, Shard: db.Shard(fid), T: base, V: 1}, {ID: hid, Shard: db.Shard(hid), T: base + 500, V: 2}}))
	// Flush the block, then write more into memory.
	clk.Add(2*time.Hour + 10*time.Minute + time.Second)
	require.NoError(t, db.Tick())
	now := clk.Now().UnixMilli()
	require.NoError(t, db.WriteHistograms(testNS, []storage.HistogramSample{{ID: hid, Shard: db.Shard(hid), T: now - 1000, FH: rpcHist(9).ToFloat(nil)}}))

	end := now
	isRefused := func(err error) {
		t.Helper()
		require.Equal(t, codes.FailedPrecondition, status.Code(err), "%v", err)
		require.Contains(t, err.Error(), "native histograms")
	}

	// Fetch by ID.
	_, err = c.Fetch(ctx, &FetchRequest{Namespace: testNS, IDs: [][]byte{fid, hid}, Start: base, End: end})
	isRefused(err)
	resp, err := c.Fetch(ctx, &FetchRequest{Namespace: testNS, IDs: [][]byte{fid, hid}, Start: base, End: end, AcceptHistograms: true})
	require.NoError(t, err)
	require.Zero(t, histCount(t, resp.Series[0]))
	require.Equal(t, 6, histCount(t, resp.Series[1]))
	require.Len(t, decodeStream(t, resp.Series[1].Stream), 1)

	// By tags: the float-only series alone is still answered to anyone.
	_, err = c.FetchTagged(ctx, &FetchTaggedRequest{Namespace: testNS, Start: base, End: end,
		Matchers: []Matcher{{Type: 2, Name: "__name__", Value: ".+"}}})
	isRefused(err)
	resp, err = c.FetchTagged(ctx, &FetchTaggedRequest{Namespace: testNS, Start: base, End: end,
		Matchers: []Matcher{{Type: 0, Name: "__name__", Value: "up"}}})
	require.NoError(t, err)
	require.Len(t, resp.Series, 1)
	resp, err = c.FetchTagged(ctx, &FetchTaggedRequest{Namespace: testNS, Start: base, End: end, AcceptHistograms: true,
		Matchers: []Matcher{{Type: 0, Name: "__name__", Value: "lat"}}})
	require.NoError(t, err)
	require.Len(t, resp.Series, 1)
	require.Equal(t, 6, histCount(t, resp.Series[0]))

	// Peer streaming: memory and the flushed block.
	sh := db.Shard(hid)
	_, err = c.FetchUnflushed(ctx, &FetchUnflushedRequest{Namespace: testNS, Shard: sh})
	isRefused(err)
	un, err := c.FetchUnflushed(ctx, &FetchUnflushedRequest{Namespace: testNS, Shard: sh, AcceptHistograms: true})
	require.NoError(t, err)
	require.Len(t, un.Series, 1)
	require.Equal(t, 1, histCount(t, un.Series[0]))
	_, err = c.FetchBlock(ctx, &FetchBlockRequest{Namespace: testNS, Shard: sh, BlockStart: base})
	isRefused(err)
	blk, err := c.FetchBlock(ctx, &FetchBlockRequest{Namespace: testNS, Shard: sh, BlockStart: base, AcceptHistograms: true})
	require.NoError(t, err)
	var found bool
	for _, s := range blk.Series {
		if string(s.ID) == string(hid) {
			found = true
			require.True(t, encoding.IsPayloadContainer(s.Data))
			require.EqualValues(t, 6, s.Samples)
		}
	}
	require.True(t, found)
}
