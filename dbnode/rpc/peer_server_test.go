package rpc

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/dbnode/commitlog"
	"github.com/tessera-tsdb/tessera/dbnode/encoding"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
	"google.golang.org/grpc/codes"
)

// testClock is a settable storage clock.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *testClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

const peerShards = 4

// blockT0 is a block boundary for 2h blocks.
var blockT0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

// peerFixture is a database with one flushed block (blockT0) holding
// every series of flushed, and unflushed samples in the current block.
type peerFixture struct {
	db        *storage.Database
	flushed   map[string][]Sample // series ID -> samples in the flushed block
	unflushed map[string][]Sample // series ID -> samples still in memory
}

// newPeerFixture writes nSeries series of perSeries samples at old
// timestamps with LoadBatch, moves the clock past the block's end plus
// bufferPast and ticks so the block flushes, then writes a few current
// samples that stay in memory. Random values keep the payloads large.
func newPeerFixture(t *testing.T, nSeries, perSeries int) *peerFixture {
	t.Helper()
	clk := &testClock{t: blockT0.Add(30 * time.Minute)}
	opts := testStorageOptions(t.TempDir(), commitlog.ModeSync)
	opts.NumShards = peerShards
	opts.Now = clk.Now
	db, err := storage.Open(opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, db.Close()) })

	f := &peerFixture{db: db, flushed: map[string][]Sample{}, unflushed: map[string][]Sample{}}
	rng := rand.New(rand.NewPCG(1, 2))
	base := blockT0.UnixMilli()
	var batch []storage.Sample
	for i := 0; i < nSeries; i++ {
		id := seriesID("peer", "i", fmt.Sprintf("%04d", i))
		for j := 0; j < perSeries; j++ {
			s := Sample{T: base + int64(j)*1000, V: rng.Float64()}
			f.flushed[string(id)] = append(f.flushed[string(id)], s)
			batch = append(batch, storage.Sample{ID: id, Shard: db.Shard(id), T: s.T, V: s.V})
		}
	}
	require.NoError(t, db.LoadBatch(testNS, batch))
	clk.Add(2*time.Hour + 10*time.Minute + time.Second) // past block end + bufferPast
	require.NoError(t, db.Tick())

	now := clk.Now().UnixMilli()
	batch = batch[:0]
	for i := 0; i < nSeries; i += 3 {
		id := seriesID("peer", "i", fmt.Sprintf("%04d", i))
		s := Sample{T: now - 1000, V: float64(i)}
		f.unflushed[string(id)] = []Sample{s}
		batch = append(batch, storage.Sample{ID: id, Shard: db.Shard(id), T: s.T, V: s.V})
	}
	require.NoError(t, db.WriteBatch(testNS, batch))
	return f
}

// idsOfShard returns the fixture's IDs of shard in ID order.
func (f *peerFixture) idsOfShard(m map[string][]Sample, shard uint32) []string {
	var out []string
	for id := range m {
		if f.db.Shard([]byte(id)) == shard {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

func decodeSealed(t *testing.T, data []byte) []Sample {
	t.Helper()
	var out []Sample
	it := encoding.NewSealedIterator(data)
	for it.Next() {
		ts, v := it.At()
		out = append(out, Sample{T: ts, V: v})
	}
	require.NoError(t, it.Err())
	return out
}

// pageBlock pages through one block and checks every page is in ID order
// after the previous one; it returns the series and the page count.
func pageBlock(t *testing.T, c *Client, shard uint32, start int64, maxBytes uint32) ([]BlockSeries, int) {
	t.Helper()
	var all []BlockSeries
	var after []byte
	for pages := 1; ; pages++ {
		resp, err := c.FetchBlock(context.Background(), &FetchBlockRequest{Namespace: testNS, Shard: shard, BlockStart: start, After: after, MaxBytes: maxBytes})
		require.NoError(t, err)
		require.NotEmpty(t, resp.Series, "a page has at least one series")
		for _, s := range resp.Series {
			require.Positive(t, bytes.Compare(s.ID, after), "IDs ascend across pages")
			after = s.ID
		}
		all = append(all, resp.Series...)
		if !resp.More {
			return all, pages
		}
	}
}

func TestPeerBlockMetadataAndFetchBlock(t *testing.T) {
	f := newPeerFixture(t, 60, 20)
	c := serve(t, f.db, nil, ServerOptions{}, ClientOptions{})
	ctx := context.Background()

	shards := []uint32{0, 1, 2, 3, 1} // the duplicate is answered once
	meta, err := c.BlockMetadata(ctx, &BlockMetadataRequest{Namespace: testNS, Shards: shards})
	require.NoError(t, err)
	require.Len(t, meta.Shards, peerShards)
	totalSeries := 0
	for i, sb := range meta.Shards {
		require.Equal(t, uint32(i), sb.Shard)
		want, err := f.db.FlushedBlocks(testNS, sb.Shard)
		require.NoError(t, err)
		require.Len(t, sb.Blocks, len(want))
		ids := f.idsOfShard(f.flushed, sb.Shard)
		if len(ids) == 0 {
			require.Empty(t, sb.Blocks)
			continue
		}
		require.Len(t, sb.Blocks, 1)
		b := sb.Blocks[0]
		require.Equal(t, BlockMeta{BlockStart: want[0].BlockStart, Volume: uint32(want[0].Volume), Series: uint32(want[0].Series),
			Samples: uint32(want[0].Samples), Digest: want[0].Digest}, b)
		require.Equal(t, blockT0.UnixMilli(), b.BlockStart)
		require.Equal(t, uint32(len(ids)), b.Series)
		require.Equal(t, uint32(len(ids)*20), b.Samples)
		totalSeries += int(b.Series)

		// One big page is the block as stored.
		whole, pages := pageBlock(t, c, sb.Shard, b.BlockStart, 0)
		require.Equal(t, 1, pages)
		stored, more, err := f.db.ReadBlock(testNS, sb.Shard, b.BlockStart, nil, 1<<30)
		require.NoError(t, err)
		require.False(t, more)
		require.Len(t, whole, len(stored))
		for k := range stored {
			require.Equal(t, stored[k].ID, whole[k].ID)
			require.Equal(t, stored[k].Data, whole[k].Data, "sent as stored, not re-encoded")
			require.Equal(t, uint32(stored[k].Samples), whole[k].Samples)
		}

		// Small pages cover every series exactly once, in ID order.
		paged, pages := pageBlock(t, c, sb.Shard, b.BlockStart, 200)
		require.Greater(t, pages, 2)
		require.Len(t, paged, len(ids))
		for k, s := range paged {
			require.Equal(t, ids[k], string(s.ID))
			require.Equal(t, f.flushed[ids[k]], decodeSealed(t, s.Data))
			require.Equal(t, uint32(20), s.Samples)
		}
	}
	require.Equal(t, 60, totalSeries)
}

func TestPeerFetchUnflushedPages(t *testing.T) {
	f := newPeerFixture(t, 60, 5)
	c := serve(t, f.db, nil, ServerOptions{}, ClientOptions{})
	total := 0
	for shard := uint32(0); shard < peerShards; shard++ {
		ids := f.idsOfShard(f.unflushed, shard)
		var got []FetchedSeries
		var after []byte
		pages := 0
		for {
			resp, err := c.FetchUnflushed(context.Background(), &FetchUnflushedRequest{Namespace: testNS, Shard: shard, After: after, MaxBytes: 1})
			require.NoError(t, err)
			pages++
			got = append(got, resp.Series...)
			if len(resp.Series) > 0 {
				after = resp.Series[len(resp.Series)-1].ID
			}
			if !resp.More {
				break
			}
		}
		require.Len(t, got, len(ids))
		if len(ids) > 1 {
			require.Equal(t, len(ids), pages, "MaxBytes 1: one series per page")
		}
		for k, s := range got {
			require.Equal(t, ids[k], string(s.ID))
			require.Equal(t, shard, s.Shard)
			require.Equal(t, f.unflushed[ids[k]], decodeStream(t, s.Stream))
		}
		total += len(got)
	}
	require.Equal(t, 20, total)
}

func TestPeerOwnershipAndBadRequests(t *testing.T) {
	f := newPeerFixture(t, 8, 2)
	c := serve(t, f.db, ownsOnly(0, 1), ServerOptions{}, ClientOptions{})
	ctx := context.Background()
	start := blockT0.UnixMilli()

	_, err := c.BlockMetadata(ctx, &BlockMetadataRequest{Namespace: testNS, Shards: []uint32{0, 3, 1, 2}})
	require.Equal(t, codes.FailedPrecondition, Code(err))
	require.ErrorContains(t, err, "read refused: shard 3: not owned by node2; shard 2: not owned by node2")
	var e *Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, []uint32{3, 2}, e.Shards)

	_, err = c.FetchBlock(ctx, &FetchBlockRequest{Namespace: testNS, Shard: 2, BlockStart: start})
	require.Equal(t, codes.FailedPrecondition, Code(err))
	require.ErrorContains(t, err, "read refused: shard 2: not owned by node2")
	_, err = c.FetchUnflushed(ctx, &FetchUnflushedRequest{Namespace: testNS, Shard: 3})
	require.Equal(t, codes.FailedPrecondition, Code(err))
	require.ErrorAs(t, err, &e)
	require.Equal(t, []uint32{3}, e.Shards)

	cases := []struct {
		name string
		call func() error
		code codes.Code
		msg  string
	}{
		{"metadata unknown namespace", func() error {
			_, err := c.BlockMetadata(ctx, &BlockMetadataRequest{Namespace: "nope", Shards: []uint32{0}})
			return err
		}, codes.InvalidArgument, "unknown namespace"},
		{"metadata no shards", func() error {
			_, err := c.BlockMetadata(ctx, &BlockMetadataRequest{Namespace: testNS})
			return err
		}, codes.InvalidArgument, "no shards"},
		{"metadata shard out of range", func() error {
			_, err := c.BlockMetadata(ctx, &BlockMetadataRequest{Namespace: testNS, Shards: []uint32{peerShards}})
			return err
		}, codes.InvalidArgument, "out of range"},
		{"block shard out of range", func() error {
			_, err := c.FetchBlock(ctx, &FetchBlockRequest{Namespace: testNS, Shard: 99, BlockStart: start})
			return err
		}, codes.InvalidArgument, "out of range"},
		{"unflushed unknown namespace", func() error {
			_, err := c.FetchUnflushed(ctx, &FetchUnflushedRequest{Namespace: "nope", Shard: 0})
			return err
		}, codes.InvalidArgument, "unknown namespace"},
		{"no such block", func() error {
			_, err := c.FetchBlock(ctx, &FetchBlockRequest{Namespace: testNS, Shard: 0, BlockStart: start - 2*3600_000})
			return err
		}, codes.Unavailable, "no flushed block"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			require.Equal(t, tc.code, Code(err), "%v", err)
			require.ErrorContains(t, err, tc.msg)
		})
	}
}

// TestPeerFetchBlockRateLimited streams over 200 KB at 100 KB/s: it must
// take at least 1.5 s (2 s in theory), and not absurdly longer.
func TestPeerFetchBlockRateLimited(t *testing.T) {
	f := newPeerFixture(t, 40, 800) // random values: ~6 KB per series
	const rate = 100_000
	c := serve(t, f.db, nil, ServerOptions{MaxStreamBytesPerSecond: rate}, ClientOptions{})
	start := time.Now()
	sent := 0
	for shard := uint32(0); shard < peerShards; shard++ {
		if len(f.idsOfShard(f.flushed, shard)) == 0 {
			continue
		}
		series, _ := pageBlock(t, c, shard, blockT0.UnixMilli(), 50_000)
		for _, s := range series {
			sent += len(s.Data) + len(s.ID)
		}
	}
	elapsed := time.Since(start)
	require.Greater(t, sent, 200_000, "enough data to measure")
	require.GreaterOrEqual(t, elapsed, time.Duration(float64(sent)/rate*0.75*float64(time.Second)), "sent %d bytes", sent)
	require.GreaterOrEqual(t, elapsed, 1500*time.Millisecond)
	require.Less(t, elapsed, time.Duration(float64(sent)/rate*float64(time.Second))+20*time.Second)
}

// TestPeerRateLimitHonoursDeadline: a reply the pacer holds back for
// seconds fails with the caller's deadline, promptly.
func TestPeerRateLimitHonoursDeadline(t *testing.T) {
	f := newPeerFixture(t, 40, 800)
	c := serve(t, f.db, nil, ServerOptions{MaxStreamBytesPerSecond: 1000}, ClientOptions{})
	shard := f.db.Shard([]byte(seriesID("peer", "i", "0000")))
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.FetchBlock(ctx, &FetchBlockRequest{Namespace: testNS, Shard: shard, BlockStart: blockT0.UnixMilli()})
	require.Equal(t, codes.DeadlineExceeded, Code(err), "%v", err)
	require.Less(t, time.Since(start), 5*time.Second)
}
