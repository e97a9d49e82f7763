package snapshot

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tessera-tsdb/tessera/dbnode/fileset"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
)

func TestBlockPartRoundTripAndEveryFlipDetected(t *testing.T) {
	h := PartHeader{Namespace: "default", Shard: 3, NumShards: 8, BlockStart: 7_200_000, BlockSize: 7_200_000}
	series := []fileset.Series{{ID: []byte("a"), Data: []byte{2, 1, 2, 3}, Samples: 3}, {ID: []byte("b"), Data: []byte{2, 9}, Samples: 1}}
	b := EncodeBlock(h, series)
	gh, got, err := DecodeBlock(b)
	require.NoError(t, err)
	require.Equal(t, h, gh)
	require.Equal(t, series, got)
	require.Equal(t, b, EncodeBlock(h, series), "deterministic: the same block makes the same part")
	for i := range b {
		for bit := range 8 {
			c := append([]byte(nil), b...)
			c[i] ^= 1 << bit
			_, _, err := DecodeBlock(c)
			require.True(t, errors.Is(err, ErrCorrupt), "flip of bit %d of byte %d not detected", bit, i)
		}
	}
	_, _, err = DecodeBlock(b[:len(b)-1])
	require.ErrorIs(t, err, ErrCorrupt)
	_, _, err = DecodeUnflushed(b)
	require.ErrorIs(t, err, ErrCorrupt, "a block part is not an unflushed one")
}

func TestUnflushedPartRoundTrip(t *testing.T) {
	h := PartHeader{Namespace: "default", Shard: 1, NumShards: 4}
	series := []storage.SeriesStream{
		{ID: []byte("a"), Stream: []byte{1, 2, 3}},
		{ID: []byte("b"), Histograms: [][]byte{{4, 5}, {6}}},
	}
	b := EncodeUnflushed(h, series)
	gh, got, err := DecodeUnflushed(b)
	require.NoError(t, err)
	require.Equal(t, h, gh)
	require.Equal(t, series, got)
	for i := range b {
		c := append([]byte(nil), b...)
		c[i] ^= 0x80
		_, _, err := DecodeUnflushed(c)
		require.ErrorIs(t, err, ErrCorrupt, "flip of byte %d", i)
	}
}

func TestValidID(t *testing.T) {
	for _, ok := range []string{"a", "20261127T140000Z", "b-1.x_y"} {
		require.NoError(t, ValidID(ok), ok)
	}
	for _, bad := range []string{"", ".", "..", "../x", "a/b", "-x", "a b", string(make([]byte, 200))} {
		require.Error(t, ValidID(bad), "%q", bad)
	}
}
