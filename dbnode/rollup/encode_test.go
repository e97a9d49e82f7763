package rollup

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// sameWindows compares windows bit for bit (NaN == NaN, -0 != +0), as a
// digest of the bytes would.
func sameWindows(t require.TestingT, want, got []Window) {
	require.Equal(t, len(want), len(got))
	bitsOf := func(w Window) [6]uint64 {
		return [6]uint64{math.Float64bits(w.First.V), math.Float64bits(w.Last.V), math.Float64bits(w.Min),
			math.Float64bits(w.Max), math.Float64bits(w.Sum), math.Float64bits(w.Resets)}
	}
	for i := range want {
		require.Equal(t, bitsOf(want[i]), bitsOf(got[i]), "window %d values", i)
		a, b := want[i], got[i]
		a.First.V, a.Last.V, a.Min, a.Max, a.Sum, a.Resets = 0, 0, 0, 0, 0, 0
		b.First.V, b.Last.V, b.Min, b.Max, b.Sum, b.Resets = 0, 0, 0, 0, 0, 0
		require.Equal(t, a, b, "window %d", i)
	}
}

func TestEncodeRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		res := rapid.Int64Range(1, 10_000).Draw(t, "res")
		ws, err := Compute(genSeries(t, res), res)
		require.NoError(t, err)
		b, err := Encode(nil, res, ws)
		require.NoError(t, err)
		gotRes, got, err := Decode(b)
		require.NoError(t, err)
		require.Equal(t, res, gotRes)
		sameWindows(t, ws, got)
		again, err := Encode(nil, gotRes, got)
		require.NoError(t, err)
		require.Equal(t, b, again, "one encoding per series: replicas compare digests")
	})
}

// Odd float values (NaN, infinities, -0, a count-1 window whose sum is +0
// for a -0 sample) round-trip bit for bit.
func TestEncodeOddFloats(t *testing.T) {
	ws, err := Compute([]Sample{
		{1, math.Copysign(0, -1)}, {11, math.NaN()}, {12, math.Inf(1)}, {13, math.Inf(-1)},
		{21, 5}, {22, 3}, {23, math.MaxFloat64}, {31, math.SmallestNonzeroFloat64},
	}, 10)
	require.NoError(t, err)
	b, err := Encode(nil, 10, ws)
	require.NoError(t, err)
	_, got, err := Decode(b)
	require.NoError(t, err)
	sameWindows(t, ws, got)
}

// TestEncodeSize: a 30-day-old counter scraped every 30 s rolled up to
// 5m costs few bytes per window; the figure is logged, the bound is loose
// so that a change of format that doubles it fails.
func TestEncodeSize(t *testing.T) {
	const res = 300_000
	rng := rand.New(rand.NewPCG(26, 2))
	var samples []Sample
	v := 0.0
	for ts := int64(1); ts <= 24*3600_000; ts += 30_000 {
		v += float64(rng.IntN(1000))
		samples = append(samples, Sample{ts, v})
	}
	ws, err := Compute(samples, res)
	require.NoError(t, err)
	b, err := Encode(nil, res, ws)
	require.NoError(t, err)
	perWindow := float64(len(b)) / float64(len(ws))
	t.Logf("counter, 30s scrape, 5m windows: %d windows, %d bytes, %.1f bytes/window", len(ws), len(b), perWindow)
	require.Less(t, perWindow, 30.0)
}

func TestEncodeRefusesWhatDecodeWould(t *testing.T) {
	for _, tc := range []struct {
		name string
		ws   []Window
		want string
	}{
		{"unaligned", []Window{{End: 15, Count: 1, First: Sample{T: 12}, Last: Sample{T: 12}}}, "not a multiple"},
		{"empty", []Window{{End: 10}}, "never emitted"},
		{"sample outside", []Window{{End: 10, Count: 1, First: Sample{T: 0}, Last: Sample{T: 0}}}, "outside the window"},
		{"out of order", []Window{{End: 20, Stale: true}, {End: 10, Stale: true}}, "not after"},
		{"too many samples", []Window{{End: 10, Count: 5, First: Sample{T: 8}, Last: Sample{T: 9}}}, "do not fit"},
	} {
		_, err := Encode(nil, 10, tc.ws)
		require.ErrorContains(t, err, tc.want, tc.name)
	}
}

func TestDecodeNamesTheFault(t *testing.T) {
	ws, err := Compute([]Sample{{1, 1}, {2, 5}, {11, 2}, {12, staleNaN}}, 10)
	require.NoError(t, err)
	good, err := Encode(nil, 10, ws)
	require.NoError(t, err)
	requireFaults(t, Decode, []fault{
		{"empty", nil, "version: truncated"},
		{"version", append([]byte{9}, good[1:]...), "version 9"},
		{"truncated", good[:len(good)-1], "1 left"},
		{"trailing", append(bytes.Clone(good), 0), "1 bytes after the last window"},
		{"count too big", []byte{Version, 10, 0xff, 0x01}, "windows announced"},
		{"zero resolution", []byte{Version, 0, 0}, "resolution 0"},
		{"overlong varint", []byte{Version, 0x8a, 0x00, 0}, "needless zero byte"},
		{"unknown flag", []byte{Version, 10, 1, 2, 0x80, 0}, "unknown flags"},
		{"empty not stale", []byte{Version, 10, 1, 2, 0, 0}, "never emitted"},
		{"offset past window", []byte{Version, 10, 1, 2, flagSingle, 1, 10, 0}, "10 ms before the window end"},
		{"bad xor header", []byte{Version, 10, 1, 2, flagSingle, 1, 0, 65}, "XOR header 65"},
		{"non-canonical xor", []byte{Version, 10, 1, 2, flagSingle, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1}, "zero byte"},
	})
}

// fault is bytes a decoder must refuse and what its error must say.
type fault struct {
	name string
	b    []byte
	want string
}

// requireFaults: decode refuses each fault with an error wrapping
// ErrCorrupt that says what it should.
func requireFaults[W any](t *testing.T, decode func([]byte) (int64, []W, error), faults []fault) {
	for _, tc := range faults {
		_, _, err := decode(tc.b)
		require.Error(t, err, tc.name)
		require.True(t, errors.Is(err, ErrCorrupt), "%s: %v", tc.name, err)
		require.ErrorContains(t, err, tc.want, tc.name)
	}
}

// FuzzDecodeRollup: Decode never panics, refuses with ErrCorrupt, and
// what it accepts re-encodes to the same bytes (one encoding per series).
func FuzzDecodeRollup(f *testing.F) {
	rng := rand.New(rand.NewPCG(26, 3))
	for _, res := range []int64{1, 10, 300_000} {
		var samples []Sample
		v := 0.0
		for ts := int64(-5 * res); ts < 20*res; ts += 1 + rng.Int64N(res) {
			switch rng.IntN(8) {
			case 0:
				samples = append(samples, Sample{ts, staleNaN})
			case 1:
				v = 0
				samples = append(samples, Sample{ts, v})
			default:
				v += rng.Float64()
				samples = append(samples, Sample{ts, v})
			}
		}
		ws, err := Compute(samples, res)
		if err != nil {
			f.Fatal(err)
		}
		b, err := Encode(nil, res, ws)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{Version, 10, 0})
	f.Fuzz(func(t *testing.T, b []byte) { decodesToItsEncoding(t, b, Decode, Encode) })
}

// decodesToItsEncoding is both fuzz targets' property: bytes decode only
// to an error wrapping ErrCorrupt, or to windows that encode to the same
// bytes (one encoding per series).
func decodesToItsEncoding[W any](t *testing.T, b []byte,
	decode func([]byte) (int64, []W, error), encode func([]byte, int64, []W) ([]byte, error),
) {
	res, ws, err := decode(b)
	if err != nil {
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("error does not wrap ErrCorrupt: %v", err)
		}
		return
	}
	again, err := encode(nil, res, ws)
	if err != nil {
		t.Fatalf("decoded windows do not encode: %v", err)
	}
	if !bytes.Equal(b, again) {
		t.Fatalf("decoded and re-encoded differs:\n%x\n%x", b, again)
	}
}
