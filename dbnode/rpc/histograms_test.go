package rpc

import (
	"context"
	"fmt"
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

// WriteHistograms carries native histograms to a node (payload format
// HISTOGRAMS_V1): integer and float, out of order, several series,
// stored bit for bit; refusals come back as in WriteBatch, and a batch
// with a bad series or a shard this node does not own is refused whole.
func TestWriteHistogramsRoundTrip(t *testing.T) {
	db := openStorage(t, commitlog.ModeSync)
	c := serve(t, db, nil, ServerOptions{}, ClientOptions{})
	ctx := context.Background()
	now := time.Now().UnixMilli()
	a, b := seriesID("lat", "i", "a"), seriesID("lat", "i", "b")
	var batch []storage.HistogramSample
	for i := 0; i < 6; i++ {
		s := storage.HistogramSample{ID: a, Shard: shardOf(a), T: now - int64(10-i)*1000}
		if i%2 == 1 {
			s.FH = rpcHist(i).ToFloat(nil)
		} else {
			s.H = rpcHist(i)
		}
		batch = append(batch, s)
	}
	batch = append(batch, storage.HistogramSample{ID: b, Shard: shardOf(b), T: now - 500, H: rpcHist(7)},
		storage.HistogramSample{ID: a, Shard: shardOf(a), T: now - 20_000, H: rpcHist(8)}) // out of order
	res, err := c.WriteHistograms(ctx, testNS, batch)
	require.NoError(t, err)
	require.Equal(t, WriteResult{Written: len(batch)}, res)
	it, err := db.ReadHistograms(testNS, a, 0, now)
	require.NoError(t, err)
	var got []string
	for it.Next() {
		if it.IsFloat() {
			tt, h := it.AtFloatHistogram(nil)
			got = append(got, fmt.Sprintf("%d %s", tt, h))
		} else {
			tt, h := it.AtHistogram(nil)
			got = append(got, fmt.Sprintf("%d %s", tt, h))
		}
	}
	require.NoError(t, it.Err())
	want := []string{fmt.Sprintf("%d %s", now-20_000, rpcHist(8))}
	for _, s := range batch[:6] {
		if s.FH != nil {
			want = append(want, fmt.Sprintf("%d %s", s.T, s.FH))
		} else {
			want = append(want, fmt.Sprintf("%d %s", s.T, s.H))
		}
	}
	require.Equal(t, want, got)

	// Too old: rejected, reported like a float write's refusal.
	res, err = c.WriteHistograms(ctx, testNS, []storage.HistogramSample{{ID: b, Shard: shardOf(b), T: now - 72*3600_000, H: rpcHist(1)}})
	require.NoError(t, err)
	require.Equal(t, 1, res.Rejected)

	// A wrong shard or a node not owning the shard: nothing written.
	_, err = c.WriteHistograms(ctx, testNS, []storage.HistogramSample{{ID: b, Shard: shardOf(b) + 1, T: now, H: rpcHist(1)}})
	require.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)
	other := serve(t, db, ownsOnly(shardOf(a)), ServerOptions{}, ClientOptions{})
	_, err = other.WriteHistograms(ctx, testNS, []storage.HistogramSample{{ID: a, Shard: shardOf(a), T: now, H: rpcHist(2)}, {ID: b, Shard: shardOf(b), T: now, H: rpcHist(2)}})
	require.Error(t, err)
	it, err = db.ReadHistograms(testNS, a, now, now)
	require.NoError(t, err)
	require.False(t, it.Next())
}

// FuzzHistogramPayload: any bytes decode to an error or to samples that
// re-encode to a payload decoding to the same samples; never a panic.
func FuzzHistogramPayload(f *testing.F) {
	id := seriesID("lat")
	p, err := appendHistogramPayload(nil, []storage.HistogramSample{
		{ID: id, Shard: 3, T: 1, H: rpcHist(1)}, {ID: id, Shard: 3, T: 2, FH: rpcHist(2).ToFloat(nil)}})
	require.NoError(f, err)
	f.Add(p)
	f.Add([]byte{1, 'x', 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := decodeHistogramPayload(b, nil)
		if err != nil {
			return
		}
		require.LessOrEqual(t, len(got), 8*len(b))
		again, err := appendHistogramPayload(nil, got)
		require.NoError(t, err)
		back, err := decodeHistogramPayload(again, nil)
		require.NoError(t, err)
		require.Equal(t, len(got), len(back))
		for i := range got {
			require.Equal(t, got[i].T, back[i].T)
			require.Equal(t, string(got[i].ID), string(back[i].ID))
			if got[i].H != nil {
				require.Equal(t, got[i].H.String(), back[i].H.String())
			} else {
				require.Equal(t, got[i].FH.String(), back[i].FH.String())
			}
		}
	})
}
