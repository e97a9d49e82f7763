package rollup

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// fastDecode accepts what Encode writes and reads it as the checked
// decoder does: a 5m and a 1h day of a jittered counter, a reset, a
// single-sample window and a stale one.
func TestFastDecodeMatchesChecked(t *testing.T) {
	samples := benchSeries()
	samples[100].V = 3 // a reset
	samples = append(samples[:200], samples[201:]...)
	ws5, err := Compute(samples, 300_000)
	require.NoError(t, err)
	ws5 = append(ws5, Window{End: ws5[len(ws5)-1].End + 600_000, Stale: true})
	ws1h, err := Coarsen(ws5, 3600_000)
	require.NoError(t, err)
	one := []Window{{End: 300_000, Count: 1, Sum: 2, Min: 2, Max: 2, First: Sample{1, 2}, Last: Sample{1, 2}}}
	for _, c := range []struct {
		res int64
		ws  []Window
	}{{300_000, ws5}, {3600_000, ws1h}, {300_000, one}} {
		enc, err := Encode(nil, c.res, c.ws)
		require.NoError(t, err)
		res, fast, ok := fastDecode(nil, enc)
		require.True(t, ok, "fastDecode gave up on Encode's output")
		var prev valueState
		cres, checked, err := decodeWindows(nil, enc, floatCodec, flagsKnown, func(r *reader, h head, res int64) (Window, error) {
			return decodeWindow(r, h, res, &prev)
		})
		require.NoError(t, err)
		require.Equal(t, cres, res)
		require.Equal(t, checked, fast)
		require.Equal(t, c.ws, fast)

		// Every one-byte change (of the short encodings: the day of 5m
		// windows repeats the 1h one's shapes): fastDecode never accepts
		// what the checked decoder refuses, nor reads it differently.
		if len(enc) > 1000 {
			continue
		}
		for i := range enc {
			for _, v := range []byte{0, 1, 0x7f, 0x80, 0xff, enc[i] ^ 1, enc[i] ^ 0x10} {
				bad := append([]byte(nil), enc...)
				bad[i] = v
				_, fast, ok := fastDecode(nil, bad)
				if !ok {
					continue
				}
				_, checked, err := Decode(bad)
				require.NoError(t, err, "byte %d = %#x: fastDecode accepted what Decode refuses", i, v)
				require.Equal(t, windowBits(checked), windowBits(fast), "byte %d = %#x", i, v)
			}
		}
	}
}

// windowBits is ws with every float as its bits, so NaNs compare.
func windowBits(ws []Window) [][11]uint64 {
	out := make([][11]uint64, len(ws))
	for i, w := range ws {
		b := math.Float64bits
		stale := uint64(0)
		if w.Stale {
			stale = 1
		}
		out[i] = [11]uint64{uint64(w.End), w.Count, b(w.Sum), b(w.Min), b(w.Max),
			uint64(w.First.T), b(w.First.V), uint64(w.Last.T), b(w.Last.V), b(w.Resets), stale}
	}
	return out
}

// AppendPayload encodes the float part in place; its bytes are the
// format's: PayloadKind, uvarint(len F), F (short and long F).
func TestAppendPayloadLayout(t *testing.T) {
	ws, err := Compute(benchSeries(), 300_000)
	require.NoError(t, err)
	for _, n := range []int{0, 1, 5, 288} {
		f, err := Encode(nil, 300_000, ws[:n])
		require.NoError(t, err)
		if n == 0 {
			f = nil
		}
		want := append(binary.AppendUvarint([]byte{PayloadKind}, uint64(len(f))), f...)
		got, err := AppendPayload([]byte("x"), 300_000, ws[:n], nil)
		require.NoError(t, err)
		require.Equal(t, append([]byte("x"), want...), got, "%d windows", n)
		_, back, _, err := DecodePayload(got[1:])
		require.NoError(t, err)
		require.Equal(t, windowBits(ws[:n]), windowBits(back))
	}
}
