package rpc

import (
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

var (
	genBlockMetadataRequest = rapid.Custom(func(t *rapid.T) *BlockMetadataRequest {
		return &BlockMetadataRequest{Namespace: rapid.String().Draw(t, "ns"), Shards: rapid.SliceOfN(rapid.Uint32(), 0, 20).Draw(t, "shards")}
	})
	genBlockMetadataResponse = rapid.Custom(func(t *rapid.T) *BlockMetadataResponse {
		return &BlockMetadataResponse{Shards: rapid.SliceOfN(rapid.Custom(func(t *rapid.T) ShardBlocks {
			return ShardBlocks{Shard: rapid.Uint32().Draw(t, "shard"), Blocks: rapid.SliceOfN(rapid.Custom(func(t *rapid.T) BlockMeta {
				return BlockMeta{BlockStart: genTime.Draw(t, "start"), Volume: rapid.Uint32().Draw(t, "vol"),
					Series: rapid.Uint32().Draw(t, "series"), Samples: rapid.Uint32().Draw(t, "samples"), Digest: rapid.Uint64().Draw(t, "digest")}
			}), 0, 5).Draw(t, "blocks")}
		}), 0, 5).Draw(t, "shards")}
	})
	genFetchBlockRequest = rapid.Custom(func(t *rapid.T) *FetchBlockRequest {
		return &FetchBlockRequest{Namespace: rapid.String().Draw(t, "ns"), Shard: rapid.Uint32().Draw(t, "shard"),
			BlockStart: genTime.Draw(t, "start"), After: genID.Draw(t, "after"), MaxBytes: rapid.Uint32().Draw(t, "max")}
	})
	genFetchBlockResponse = rapid.Custom(func(t *rapid.T) *FetchBlockResponse {
		return &FetchBlockResponse{Series: rapid.SliceOfN(rapid.Custom(func(t *rapid.T) BlockSeries {
			return BlockSeries{ID: genID.Draw(t, "id"), Data: rapid.SliceOfN(rapid.Byte(), 0, 100).Draw(t, "data"), Samples: rapid.Uint32().Draw(t, "n")}
		}), 0, 10).Draw(t, "series"), More: rapid.Bool().Draw(t, "more")}
	})
	genFetchUnflushedRequest = rapid.Custom(func(t *rapid.T) *FetchUnflushedRequest {
		return &FetchUnflushedRequest{Namespace: rapid.String().Draw(t, "ns"), Shard: rapid.Uint32().Draw(t, "shard"),
			After: genID.Draw(t, "after"), MaxBytes: rapid.Uint32().Draw(t, "max")}
	})
	genFetchUnflushedResponse = rapid.Custom(func(t *rapid.T) *FetchUnflushedResponse {
		return &FetchUnflushedResponse{Series: genFetchResponse.Draw(t, "r").Series, More: rapid.Bool().Draw(t, "more")}
	})
)

func TestPeerCodecRoundTripProperty(t *testing.T) {
	cases := map[string]func(*rapid.T) (Message, Message){
		"BlockMetadataRequest": func(t *rapid.T) (Message, Message) {
			return genBlockMetadataRequest.Draw(t, "m"), &BlockMetadataRequest{}
		},
		"BlockMetadataResponse": func(t *rapid.T) (Message, Message) {
			return genBlockMetadataResponse.Draw(t, "m"), &BlockMetadataResponse{}
		},
		"FetchBlockRequest":  func(t *rapid.T) (Message, Message) { return genFetchBlockRequest.Draw(t, "m"), &FetchBlockRequest{} },
		"FetchBlockResponse": func(t *rapid.T) (Message, Message) { return genFetchBlockResponse.Draw(t, "m"), &FetchBlockResponse{} },
		"FetchUnflushedRequest": func(t *rapid.T) (Message, Message) {
			return genFetchUnflushedRequest.Draw(t, "m"), &FetchUnflushedRequest{}
		},
		"FetchUnflushedResponse": func(t *rapid.T) (Message, Message) {
			return genFetchUnflushedResponse.Draw(t, "m"), &FetchUnflushedResponse{}
		},
	}
	for name, gen := range cases {
		t.Run(name, func(t *testing.T) {
			rapid.Check(t, func(t *rapid.T) {
				m, out := gen(t)
				roundTrip(t, m, out)
			})
		})
	}
}

// TestPeerMessageFields checks decoded fields directly, which the
// canonical-bytes check alone would not catch for a symmetric bug.
func TestPeerMessageFields(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := genBlockMetadataResponse.Draw(t, "meta")
		var out BlockMetadataResponse
		require.NoError(t, out.Unmarshal(m.MarshalAppend(nil)))
		require.Len(t, out.Shards, len(m.Shards))
		for i, s := range m.Shards {
			require.Equal(t, s.Shard, out.Shards[i].Shard)
			require.Equal(t, len(s.Blocks), len(out.Shards[i].Blocks))
			for j, b := range s.Blocks {
				require.Equal(t, b, out.Shards[i].Blocks[j])
			}
		}

		r := genFetchBlockRequest.Draw(t, "req")
		var rout FetchBlockRequest
		require.NoError(t, rout.Unmarshal(r.MarshalAppend(nil)))
		require.Equal(t, r.Namespace, rout.Namespace)
		require.Equal(t, r.Shard, rout.Shard)
		require.Equal(t, r.BlockStart, rout.BlockStart)
		require.Equal(t, string(r.After), string(rout.After))
		require.Equal(t, r.MaxBytes, rout.MaxBytes)

		b := genFetchBlockResponse.Draw(t, "block")
		var bout FetchBlockResponse
		require.NoError(t, bout.Unmarshal(b.MarshalAppend(nil)))
		require.Equal(t, b.More, bout.More)
		require.Len(t, bout.Series, len(b.Series))
		for i, s := range b.Series {
			require.Equal(t, string(s.ID), string(bout.Series[i].ID))
			require.Equal(t, string(s.Data), string(bout.Series[i].Data))
			require.Equal(t, s.Samples, bout.Series[i].Samples)
		}
	})
}

// TestFetchBlockResponseGolden pins the layout documented in
// docs/format/rpc.md.
func TestPeerGolden(t *testing.T) {
	meta := &BlockMetadataResponse{Shards: []ShardBlocks{{Shard: 3, Blocks: []BlockMeta{{BlockStart: 1000, Volume: 1, Series: 2, Samples: 300, Digest: 0x0102030405060708}}}}}
	require.Equal(t, "01"+"01"+"03"+"01"+ // version, 1 shard, shard 3, 1 block
		"d00f"+"01"+"02"+"ac02"+ // start 1000 (zigzag 2000), volume 1, 2 series, 300 samples
		"0807060504030201", // digest, little-endian
		hex.EncodeToString(meta.MarshalAppend(nil)))
	blk := &FetchBlockResponse{Series: []BlockSeries{{ID: []byte("a"), Data: []byte{0xee}, Samples: 1}}, More: true}
	require.Equal(t, "01"+"01"+"0161"+"01ee"+"01"+"01", hex.EncodeToString(blk.MarshalAppend(nil)))
	req := &FetchBlockRequest{Namespace: "ns", Shard: 2, BlockStart: -1, After: []byte("a"), MaxBytes: 128}
	require.Equal(t, "01"+"026e73"+"02"+"01"+"0161"+"8001", hex.EncodeToString(req.MarshalAppend(nil)))
}

// TestPeerDecodeRejectsDamage: every proper prefix, every extension, a
// bad version and a more byte other than 0 or 1 fail with ErrMalformed.
func TestPeerDecodeRejectsDamage(t *testing.T) {
	msgs := []struct {
		m   Message
		new func() Message
	}{
		{&BlockMetadataRequest{Namespace: "default", Shards: []uint32{1, 500}}, func() Message { return &BlockMetadataRequest{} }},
		{&BlockMetadataResponse{Shards: []ShardBlocks{{Shard: 1, Blocks: []BlockMeta{{BlockStart: 7, Volume: 1, Series: 2, Samples: 3, Digest: 99}}}}}, func() Message { return &BlockMetadataResponse{} }},
		{&FetchBlockRequest{Namespace: "default", Shard: 3, BlockStart: 7, After: []byte("x"), MaxBytes: 9}, func() Message { return &FetchBlockRequest{} }},
		{&FetchBlockResponse{Series: []BlockSeries{{ID: []byte("x"), Data: []byte{1, 2}, Samples: 2}}, More: true}, func() Message { return &FetchBlockResponse{} }},
		{&FetchUnflushedRequest{Namespace: "default", Shard: 3, After: []byte("x"), MaxBytes: 9}, func() Message { return &FetchUnflushedRequest{} }},
		{&FetchUnflushedResponse{Series: []FetchedSeries{{ID: []byte("x"), Shard: 3, Stream: []byte{1}}}}, func() Message { return &FetchUnflushedResponse{} }},
	}
	for _, tc := range msgs {
		b := tc.m.MarshalAppend(nil)
		require.NoError(t, tc.new().Unmarshal(b))
		for i := 0; i < len(b); i++ {
			require.ErrorIs(t, tc.new().Unmarshal(b[:i]), ErrMalformed, "%T prefix %d", tc.m, i)
		}
		require.ErrorIs(t, tc.new().Unmarshal(append(b, 0)), ErrMalformed, "%T trailing byte", tc.m)
		bad := append([]byte{}, b...)
		bad[0] = 2
		require.ErrorContains(t, tc.new().Unmarshal(bad), "unknown version 2")
	}
	for _, m := range []Message{&FetchBlockResponse{More: true}, &FetchUnflushedResponse{More: true}} {
		b := m.MarshalAppend(nil)
		b[len(b)-1] = 2
		require.ErrorContains(t, m.Unmarshal(b), "neither 0 nor 1")
	}
	// A block count far beyond what the bytes can hold is refused before
	// allocating.
	b := []byte{wireVersion, 1, 0, 0xff, 0xff, 0xff, 0xff, 0x0f}
	require.ErrorContains(t, (&BlockMetadataResponse{}).Unmarshal(b), "cannot fit")
}
