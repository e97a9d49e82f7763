package rpc

import (
	"bytes"
	"encoding/hex"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/mem"
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
	genWriteRequest = rapid.Custom(func(t *rapid.T) *WriteRequest {
		return &WriteRequest{
			Namespace: rapid.String().Draw(t, "ns"),
			Series: rapid.SliceOfN(rapid.Custom(func(t *rapid.T) WriteSeries {
				return WriteSeries{
					ID:      genID.Draw(t, "id"),
					Shard:   rapid.Uint32().Draw(t, "shard"),
					Samples: rapid.SliceOfN(genSample, 0, 20).Draw(t, "samples"),
				}
			}), 0, 10).Draw(t, "series"),
		}
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
	genWriteResponse = rapid.Custom(func(t *rapid.T) *WriteResponse {
		return &WriteResponse{Written: rapid.IntRange(0, math.MaxInt32).Draw(t, "w"), Rejected: rapid.IntRange(0, math.MaxInt32).Draw(t, "r"), RejectMsg: rapid.String().Draw(t, "msg")}
	})
	genHealth = rapid.Custom(func(t *rapid.T) *HealthResponse {
		return &HealthResponse{NodeID: rapid.String().Draw(t, "id"), Ready: rapid.Bool().Draw(t, "ready"), Message: rapid.String().Draw(t, "msg")}
	})
)

// roundTrip marshals m, checks Size, decodes into a fresh out and checks
// that out marshals to the same bytes (our encoding is canonical, so equal
// bytes mean equal messages, float bit patterns included).
func roundTrip(t require.TestingT, m, out Message) {
	b := m.MarshalAppend([]byte{0xAA}) // appends after existing bytes
	require.Equal(t, byte(0xAA), b[0])
	b = b[1:]
	require.Len(t, b, m.Size(), "Size must match MarshalAppend")
	require.NoError(t, out.Unmarshal(b))
	require.Equal(t, hex.EncodeToString(b), hex.EncodeToString(out.MarshalAppend(nil)))
}

func TestCodecRoundTripProperty(t *testing.T) {
	cases := map[string]func(*rapid.T) (Message, Message){
		"WriteRequest":       func(t *rapid.T) (Message, Message) { return genWriteRequest.Draw(t, "m"), &WriteRequest{} },
		"WriteResponse":      func(t *rapid.T) (Message, Message) { return genWriteResponse.Draw(t, "m"), &WriteResponse{} },
		"FetchTaggedRequest": func(t *rapid.T) (Message, Message) { return genFetchTagged.Draw(t, "m"), &FetchTaggedRequest{} },
		"FetchRequest":       func(t *rapid.T) (Message, Message) { return genFetch.Draw(t, "m"), &FetchRequest{} },
		"FetchResponse":      func(t *rapid.T) (Message, Message) { return genFetchResponse.Draw(t, "m"), &FetchResponse{} },
		"HealthResponse":     func(t *rapid.T) (Message, Message) { return genHealth.Draw(t, "m"), &HealthResponse{} },
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

// TestWriteRequestFields checks decoded fields directly, since the
// canonical-bytes check alone would not catch a symmetric bug.
func TestWriteRequestFields(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := genWriteRequest.Draw(t, "m")
		var out WriteRequest
		require.NoError(t, out.Unmarshal(m.MarshalAppend(nil)))
		require.Equal(t, m.Namespace, out.Namespace)
		require.Len(t, out.Series, len(m.Series))
		for i, s := range m.Series {
			o := out.Series[i]
			require.True(t, bytes.Equal(s.ID, o.ID))
			require.Equal(t, s.Shard, o.Shard)
			require.Len(t, o.Samples, len(s.Samples))
			for j, smp := range s.Samples {
				require.Equal(t, smp.T, o.Samples[j].T)
				require.Equal(t, math.Float64bits(smp.V), math.Float64bits(o.Samples[j].V))
			}
		}
		require.Equal(t, m.NumSamples(), out.NumSamples())
	})
}

// TestWriteRequestGolden pins the layout documented in docs/format/rpc.md.
func TestWriteRequestGolden(t *testing.T) {
	m := &WriteRequest{Namespace: "ns", Series: []WriteSeries{
		{ID: []byte("a"), Shard: 5, Samples: []Sample{{T: 1000, V: 1}, {T: 1010, V: 2}}},
		{ID: []byte("b"), Shard: 300, Samples: []Sample{{T: 1001, V: 0.5}}},
	}}
	want := "01" + "026e73" + "02" + "03" + // version, "ns", 2 series, 3 samples
		"0161" + "05" + "02" + // "a", shard 5, 2 samples
		"d00f" + "000000000000f03f" + // T 1000 (zigzag 2000), 1.0
		"14" + "0000000000000040" + // +10, 2.0
		"0162" + "ac02" + "01" + // "b", shard 300, 1 sample
		"02" + "000000000000e03f" // +1 from the previous series' first T, 0.5
	require.Equal(t, want, hex.EncodeToString(m.MarshalAppend(nil)))
}

// TestDecodeRejectsDamage truncates and extends valid messages: every
// proper prefix and every extension must fail with ErrMalformed.
func TestDecodeRejectsDamage(t *testing.T) {
	msgs := []struct {
		m   Message
		new func() Message
	}{
		{&WriteRequest{Namespace: "default", Series: []WriteSeries{{ID: []byte("id"), Shard: 3, Samples: []Sample{{1, 2}, {3, 4}}}}}, func() Message { return &WriteRequest{} }},
		{&WriteResponse{Written: 3, Rejected: 1, RejectMsg: "too old"}, func() Message { return &WriteResponse{} }},
		{&FetchTaggedRequest{Namespace: "default", Matchers: []Matcher{{2, "job", "a.*"}}, Start: 1, End: 2, Shards: []uint32{1, 500}}, func() Message { return &FetchTaggedRequest{} }},
		{&FetchRequest{Namespace: "default", IDs: [][]byte{[]byte("x")}, Start: 1, End: 2}, func() Message { return &FetchRequest{} }},
		{&FetchResponse{Series: []FetchedSeries{{ID: []byte("x"), Shard: 2, Stream: []byte{1, 2, 3}}}}, func() Message { return &FetchResponse{} }},
		{&HealthResponse{NodeID: "n1", Ready: true, Message: "ok"}, func() Message { return &HealthResponse{} }},
		{&HealthRequest{}, func() Message { return &HealthRequest{} }},
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
}

// TestDecodeBoundsAllocations feeds counts far larger than the message:
// the decoder must refuse them before allocating.
func TestDecodeBoundsAllocations(t *testing.T) {
	b := []byte{wireVersion, 0, 0xff, 0xff, 0xff, 0xff, 0x0f, 0}
	require.ErrorContains(t, (&WriteRequest{}).Unmarshal(b), "cannot fit")
	b = []byte{wireVersion, 0, 1, 0xff, 0xff, 0xff, 0xff, 0x0f, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	require.ErrorContains(t, (&WriteRequest{}).Unmarshal(b), "cannot fit")
	b = []byte{wireVersion, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01}
	require.ErrorContains(t, (&FetchResponse{}).Unmarshal(b), "bad varint")
}

func TestCodecMarshalPooledAndSmall(t *testing.T) {
	c := Codec{}
	require.Equal(t, "tessera", c.Name())
	for _, n := range []int{1, 5000} { // below and above the pooling threshold
		m := &FetchResponse{Series: []FetchedSeries{{ID: []byte("id"), Stream: bytes.Repeat([]byte{7}, n)}}}
		bs, err := c.Marshal(m)
		require.NoError(t, err)
		require.Equal(t, m.Size(), bs.Len())
		var out FetchResponse
		require.NoError(t, c.Unmarshal(bs, &out))
		bs.Free()
		require.Equal(t, m.Series[0].Stream, out.Series[0].Stream, "decoded data must not alias the freed buffer")
	}
	_, err := c.Marshal("not a message")
	require.Error(t, err)
	require.Error(t, c.Unmarshal(mem.BufferSlice{mem.SliceBuffer{1}}, 42))
}
