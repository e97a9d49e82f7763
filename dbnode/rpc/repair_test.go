package rpc

import (
	"context"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
)

// TestRepairDigestsAndChecksums: BlockDigests and SeriesChecksums over the
// real server answer what storage computes, checksums page by page, and
// refuse bad requests with the reason.
func TestRepairDigestsAndChecksums(t *testing.T) {
	f := newPeerFixture(t, 40, 10)
	c := serve(t, f.db, nil, ServerOptions{}, ClientOptions{})
	ctx := context.Background()
	seen := 0
	for sh := uint32(0); sh < peerShards; sh++ {
		want, err := f.db.BlockDigests(testNS, sh, 0, math.MaxInt64)
		require.NoError(t, err)
		got, err := c.BlockDigests(ctx, &BlockDigestsRequest{Namespace: testNS, Shard: sh, Start: 0, End: math.MaxInt64})
		require.NoError(t, err)
		require.Len(t, got.Blocks, len(want))
		for i, d := range want {
			require.Equal(t, BlockDigest{BlockStart: d.BlockStart, Series: uint32(d.Series), Samples: uint64(d.Samples), Digest: d.Digest}, got.Blocks[i])
		}
		if len(want) == 0 {
			continue
		}
		bs := blockT0.UnixMilli()
		sums, err := f.db.SeriesChecksums(testNS, sh, bs, 0, math.MaxInt64)
		require.NoError(t, err)
		var paged []SeriesChecksum
		var after []byte
		pages := 0
		for {
			resp, err := c.SeriesChecksums(ctx, &SeriesChecksumsRequest{Namespace: testNS, Shard: sh, BlockStart: bs,
				Start: 0, End: math.MaxInt64, After: after, MaxSeries: 3})
			require.NoError(t, err)
			pages++
			paged = append(paged, resp.Series...)
			if !resp.More {
				break
			}
			after = resp.Series[len(resp.Series)-1].ID
		}
		require.Len(t, paged, len(sums))
		for i, s := range sums {
			require.Equal(t, SeriesChecksum{ID: s.ID, Checksum: s.Checksum, Samples: uint32(s.Samples)}, paged[i])
		}
		require.Equal(t, (len(sums)+2)/3, pages, "pages of 3 series, the last one says no more")
		seen += len(sums)
	}
	require.Equal(t, 40, seen, "every flushed series checksummed once")

	// A range that ends before the block sees nothing.
	got, err := c.BlockDigests(ctx, &BlockDigestsRequest{Namespace: testNS, Shard: 0, Start: 0, End: blockT0.UnixMilli()})
	require.NoError(t, err)
	require.Empty(t, got.Blocks)

	for _, tc := range []struct {
		name string
		call func() error
		msg  string
	}{
		{"digests unknown namespace", func() error {
			_, err := c.BlockDigests(ctx, &BlockDigestsRequest{Namespace: "nope", Shard: 0, End: 1})
			return err
		}, "unknown namespace"},
		{"digests shard out of range", func() error {
			_, err := c.BlockDigests(ctx, &BlockDigestsRequest{Namespace: testNS, Shard: 99, End: 1})
			return err
		}, "out of range"},
		{"digests start after end", func() error {
			_, err := c.BlockDigests(ctx, &BlockDigestsRequest{Namespace: testNS, Shard: 0, Start: 5, End: 1})
			return err
		}, "start 5 after end 1"},
		{"checksums unaligned block", func() error {
			_, err := c.SeriesChecksums(ctx, &SeriesChecksumsRequest{Namespace: testNS, Shard: 0, BlockStart: 17, End: 1})
			return err
		}, "not a multiple of the block size"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			require.Equal(t, codes.InvalidArgument, Code(err), "%v", err)
			require.ErrorContains(t, err, tc.msg)
		})
	}
	_, err = serve(t, f.db, ownsOnly(1), ServerOptions{}, ClientOptions{}).BlockDigests(ctx, &BlockDigestsRequest{Namespace: testNS, Shard: 0, End: 1})
	require.Equal(t, codes.FailedPrecondition, Code(err))
}
