package rpc

import (
	"bytes"
	"encoding/hex"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/dbnode/rpc/nodepb"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
	"google.golang.org/protobuf/proto"
	"pgregory.net/rapid"
)

// Generators of arbitrary messages, NaN payloads and extreme timestamps
// included.
var (
	genID    = rapid.SliceOfN(rapid.Byte(), 0, 40)
	genFloat = rapid.OneOf(
		rapid.Float64(),
		rapid.Map(rapid.Uint64(), math.Float64frombits),
		rapid.SampledFrom([]float64{0, math.Copysign(0, -1), math.Inf(1), math.Inf(-1), math.NaN(), 1.5}),
	)
	genTime = rapid.OneOf(
		rapid.Int64(),
		rapid.Int64Range(1_700_000_000_000, 1_700_000_100_000),
		rapid.SampledFrom([]int64{math.MinInt64, math.MaxInt64, 0, -1}),
	)
	genSample = rapid.Custom(func(t *rapid.T) Sample {
		return Sample{T: genTime.Draw(t, "t"), V: genFloat.Draw(t, "v")}
	})
	// genBatch draws write batches whose series come in runs (as a
	// coordinator sends them) and sometimes repeat later, unsorted.
	genBatch = rapid.Custom(func(t *rapid.T) []storage.Sample {
		ids := rapid.SliceOfN(genID, 1, 5).Draw(t, "ids")
		var out []storage.Sample
		for range rapid.IntRange(0, 8).Draw(t, "runs") {
			id := ids[rapid.IntRange(0, len(ids)-1).Draw(t, "which")]
			shard := rapid.Uint32().Draw(t, "shard")
			for _, s := range rapid.SliceOfN(genSample, 1, 10).Draw(t, "samples") {
				out = append(out, storage.Sample{ID: id, Shard: shard, T: s.T, V: s.V})
			}
		}
		return out
	})
	genFetchTagged = rapid.Custom(func(t *rapid.T) *FetchTaggedRequest {
		return &FetchTaggedRequest{
			Namespace: rapid.String().Draw(t, "ns"),
			Matchers: rapid.SliceOfN(rapid.Custom(func(t *rapid.T) Matcher {
				return Matcher{Type: rapid.Uint8().Draw(t, "type"), Name: rapid.String().Draw(t, "name"), Value: rapid.String().Draw(t, "value")}
			}), 0, 5).Draw(t, "matchers"),
			Start:  genTime.Draw(t, "start"),
			End:    genTime.Draw(t, "end"),
			Shards: rapid.SliceOfN(rapid.Uint32(), 0, 20).Draw(t, "shards"),
		}
	})
	genFetch = rapid.Custom(func(t *rapid.T) *FetchRequest {
		return &FetchRequest{
			Namespace: rapid.String().Draw(t, "ns"),
			IDs:       rapid.SliceOfN(genID, 0, 10).Draw(t, "ids"),
			Start:     genTime.Draw(t, "start"),
			End:       genTime.Draw(t, "end"),
		}
	})
	genFetchResponse = rapid.Custom(func(t *rapid.T) *FetchResponse {
		return &FetchResponse{Series: rapid.SliceOfN(rapid.Custom(func(t *rapid.T) FetchedSeries {
			return FetchedSeries{ID: genID.Draw(t, "id"), Shard: rapid.Uint32().Draw(t, "shard"), Stream: rapid.SliceOfN(rapid.Byte(), 0, 100).Draw(t, "stream")}
		}), 0, 10).Draw(t, "series")}
	})
	genWriteResult = rapid.Custom(func(t *rapid.T) WriteResult {
		return WriteResult{Written: rapid.IntRange(0, math.MaxInt32).Draw(t, "w"), Rejected: rapid.IntRange(0, math.MaxInt32).Draw(t, "r"), RejectMsg: rapid.String().Draw(t, "msg")}
	})
	genHealth = rapid.Custom(func(t *rapid.T) *HealthResponse {
		return &HealthResponse{NodeID: rapid.String().Draw(t, "id"), Ready: rapid.Bool().Draw(t, "ready"), Message: rapid.String().Draw(t, "msg")}
	})
)

// wire sends m through the proto wire form, as gRPC does: marshal, then
// unmarshal into a fresh message of the same type.
func wire[M proto.Message](t require.TestingT, m M) M {
	b, err := proto.Marshal(m)
	require.NoError(t, err)
	out := m.ProtoReflect().New().Interface().(M)
	require.NoError(t, proto.Unmarshal(b, out))
	return out
}

// requireSame compares structs field by field, nil and empty slices alike
// (proto3 does not tell them apart); floats are compared by bits elsewhere.
func requireSame(t require.TestingT, want, got any) {
	if d := cmp.Diff(want, got, cmpopts.EquateEmpty()); d != "" {
		require.Fail(t, "conversion round trip differs (-want +got)", d)
	}
}

// TestConvertRoundTrip converts every message to its generated form,
// through the wire and back: what the caller sent is what the server sees,
// and what the server answered is what the caller gets.
func TestConvertRoundTrip(t *testing.T) {
	cases := map[string]func(*rapid.T){
		"WriteResult": func(t *rapid.T) {
			m := genWriteResult.Draw(t, "m")
			requireSame(t, m, writeResultFromPB(wire(t, m.toPB())))
		},
		"FetchTaggedRequest": func(t *rapid.T) {
			m := genFetchTagged.Draw(t, "m")
			requireSame(t, m, fetchTaggedFromPB(wire(t, m.toPB())))
		},
		"FetchRequest": func(t *rapid.T) {
			m := genFetch.Draw(t, "m")
			requireSame(t, m, fetchFromPB(wire(t, m.toPB())))
		},
		"FetchResponse": func(t *rapid.T) {
			m := genFetchResponse.Draw(t, "m")
			requireSame(t, m, fetchResponseFromPB(wire(t, m.toPB())))
		},
		"HealthResponse": func(t *rapid.T) {
			m := genHealth.Draw(t, "m")
			requireSame(t, m, healthFromPB(wire(t, m.toPB())))
		},
		"BlockMetadataRequest": func(t *rapid.T) {
			m := genBlockMetadataRequest.Draw(t, "m")
			requireSame(t, m, blockMetadataRequestFromPB(wire(t, m.toPB())))
		},
		"BlockMetadataResponse": func(t *rapid.T) {
			m := genBlockMetadataResponse.Draw(t, "m")
			requireSame(t, m, blockMetadataResponseFromPB(wire(t, m.toPB())))
		},
		"FetchBlockRequest": func(t *rapid.T) {
			m := genFetchBlockRequest.Draw(t, "m")
			requireSame(t, m, fetchBlockRequestFromPB(wire(t, m.toPB())))
		},
		"FetchBlockResponse": func(t *rapid.T) {
			m := genFetchBlockResponse.Draw(t, "m")
			requireSame(t, m, fetchBlockResponseFromPB(wire(t, m.toPB())))
		},
		"FetchUnflushedRequest": func(t *rapid.T) {
			m := genFetchUnflushedRequest.Draw(t, "m")
			requireSame(t, m, fetchUnflushedRequestFromPB(wire(t, m.toPB())))
		},
		"FetchUnflushedResponse": func(t *rapid.T) {
			m := genFetchUnflushedResponse.Draw(t, "m")
			requireSame(t, m, fetchUnflushedResponseFromPB(wire(t, m.toPB())))
		},
	}
	for name, check := range cases {
		t.Run(name, func(t *testing.T) { rapid.Check(t, check) })
	}
}

// TestMatcherTypeOutOfRange: a matcher type no uint8 holds must not wrap
// around to a valid type.
func TestMatcherTypeOutOfRange(t *testing.T) {
	for _, typ := range []nodepb.MatchType{256 + 2, -1} {
		got := matchersFromPB([]*nodepb.Matcher{{Type: typ, Name: "a", Value: "b"}})
		require.Equal(t, uint8(math.MaxUint8), got[0].Type)
	}
}

// requireSamples compares decoded samples with sent ones, float bits and
// all (Ref is not carried).
func requireSamples(t require.TestingT, want, got []storage.Sample) {
	require.Len(t, got, len(want))
	for i := range want {
		w, g := want[i], got[i]
		require.True(t, bytes.Equal(w.ID, g.ID), "sample %d: ID %q, got %q", i, w.ID, g.ID)
		require.Equal(t, w.Shard, g.Shard, "sample %d", i)
		require.Equal(t, w.T, g.T, "sample %d", i)
		require.Equal(t, math.Float64bits(w.V), math.Float64bits(g.V), "sample %d", i)
	}
}

func TestPayloadRoundTripProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		batch := genBatch.Draw(t, "batch")
		b := appendPayload([]byte{0xAA}, batch) // appends after existing bytes
		require.Equal(t, byte(0xAA), b[0])
		n, _ := payloadLen(batch)
		require.Equal(t, n, len(b)-1, "payloadLen is exact")
		prefix := []storage.Sample{{T: 42}}
		got, err := decodePayload(b[1:], prefix)
		require.NoError(t, err)
		require.Equal(t, int64(42), got[0].T, "decode appends after existing samples")
		requireSamples(t, batch, got[1:])
	})
}

// TestPayloadRunsShareEntries: consecutive samples of one series are one
// entry (the ID is sent once), whether or not their ID slices are shared.
func TestPayloadRunsShareEntries(t *testing.T) {
	a1, a2 := []byte("series-a"), []byte("series-a")
	b := []byte("series-b")
	batch := []storage.Sample{{ID: a1, T: 1}, {ID: a2, T: 2}, {ID: b, T: 3}, {ID: a1, T: 4}}
	enc := appendPayload(nil, batch)
	_, entries, _, err := payloadHeader(enc)
	require.NoError(t, err)
	require.Equal(t, 3, entries)
	require.Equal(t, 2, bytes.Count(enc, a1))
}

// TestPayloadGolden pins the layout documented in docs/format/rpc.md.
func TestPayloadGolden(t *testing.T) {
	batch := []storage.Sample{
		{ID: []byte("a"), Shard: 5, T: 1000, V: 1},
		{ID: []byte("a"), Shard: 5, T: 1010, V: 2},
		{ID: []byte("b"), Shard: 300, T: 1001, V: 0.5},
	}
	want := "03" + "02" + // 3 samples, 2 entries
		"0161" + "05" + "02" + // "a", shard 5, 2 samples
		"d00f" + "000000000000f03f" + // T 1000 (zigzag 2000), 1.0
		"14" + "0000000000000040" + // +10, 2.0
		"0162" + "ac02" + "01" + // "b", shard 300, 1 sample
		"02" + "000000000000e03f" // +1 from the previous entry's first T, 0.5
	require.Equal(t, want, hex.EncodeToString(appendPayload(nil, batch)))
}

// TestPayloadRejectsDamage truncates and extends a valid payload: every
// proper prefix and every extension must fail with ErrMalformed.
func TestPayloadRejectsDamage(t *testing.T) {
	batch := []storage.Sample{{ID: []byte("id"), Shard: 3, T: 1, V: 2}, {ID: []byte("id"), Shard: 3, T: 3, V: 4}, {ID: []byte("x"), T: 9}}
	b := appendPayload(nil, batch)
	_, err := decodePayload(b, nil)
	require.NoError(t, err)
	for i := 0; i < len(b); i++ {
		_, err := decodePayload(b[:i], nil)
		require.ErrorIs(t, err, ErrMalformed, "prefix %d", i)
	}
	_, err = decodePayload(append(b, 0), nil)
	require.ErrorContains(t, err, "1 trailing bytes")
}

// TestPayloadBoundsAllocations feeds counts far larger than the payload:
// the decoder must refuse them before allocating.
func TestPayloadBoundsAllocations(t *testing.T) {
	cases := map[string][]byte{
		"samples":             {0xff, 0xff, 0xff, 0xff, 0x0f, 1, 0, 0, 0},
		"entries":             {1, 0xff, 0xff, 0xff, 0x0f, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
		"entry samples":       {1, 1, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f, 0, 0, 0, 0, 0, 0, 0, 0, 0},
		"id length":           {1, 1, 0xff, 0xff, 0xff, 0xff, 0x0f, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
		"bad varint":          {0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01},
		"shard beyond u32":    {1, 1, 0, 0x80, 0x80, 0x80, 0x80, 0x10, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0},
		"entries w/o samples": {0, 1, 0, 0, 0},
	}
	for name, b := range cases {
		_, err := decodePayload(b, nil)
		require.ErrorIs(t, err, ErrMalformed, name)
	}
}

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
