package rollup

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/value"
	"github.com/stretchr/testify/require"
)

// histWindows computes the windows of a histogram counter with resets,
// stale markers and a custom-bucket tail, for the tests and fuzz seeds.
func histWindows(t testing.TB, seed uint64, res int64, n int) []HWindow {
	rng := rand.New(rand.NewPCG(26, seed))
	var samples []HSample
	var b [4]float64
	ts := int64(-3 * res)
	for i := 0; i < n; i++ {
		switch {
		case rng.IntN(15) == 0:
			samples = append(samples, HSample{ts, &histogram.FloatHistogram{Sum: math.Float64frombits(value.StaleNaN)}})
		case rng.IntN(10) == 0:
			b = [4]float64{}
			samples = append(samples, HSample{ts, counterHistogram(b, 0, 0)})
		default:
			b[rng.IntN(4)] += float64(1 + rng.IntN(3))
			h := counterHistogram(b, float64(rng.IntN(2)), rng.Float64()*100)
			samples = append(samples, HSample{ts, h})
		}
		ts += 1 + rng.Int64N(res)
	}
	ws, err := ComputeHistograms(samples, res)
	require.NoError(t, err)
	return ws
}

func TestHistogramEncodeRoundTrip(t *testing.T) {
	for seed := uint64(0); seed < 20; seed++ {
		res := []int64{1, 10, 300_000}[seed%3]
		ws := histWindows(t, seed, res, 200)
		b, err := EncodeHistograms(nil, res, ws)
		require.NoError(t, err)
		gotRes, got, err := DecodeHistograms(b)
		require.NoError(t, err)
		require.Equal(t, res, gotRes)
		require.Len(t, got, len(ws))
		for i := range ws {
			w, g := ws[i], got[i]
			require.Equal(t, w.End, g.End, "window %d", i)
			require.Equal(t, w.Count, g.Count)
			require.Equal(t, w.Stale, g.Stale)
			if w.Count == 0 {
				continue
			}
			require.Equal(t, w.First.T, g.First.T)
			require.Equal(t, w.Last.T, g.Last.T)
			require.Equal(t, histBytes(w.First.H), histBytes(g.First.H))
			require.Equal(t, histBytes(w.Last.H), histBytes(g.Last.H))
			require.Equal(t, histBytes(w.Sum), histBytes(g.Sum))
			require.Equal(t, w.Resets == nil, g.Resets == nil)
			if w.Resets != nil {
				require.Equal(t, histBytes(w.Resets), histBytes(g.Resets))
			}
		}
		again, err := EncodeHistograms(nil, gotRes, got)
		require.NoError(t, err)
		require.Equal(t, b, again)
	}
}

func TestHistogramDecodeNamesTheFault(t *testing.T) {
	good, err := EncodeHistograms(nil, 10, histWindows(t, 1, 10, 200))
	require.NoError(t, err)
	requireFaults(t, DecodeHistograms, []fault{
		{"float version", append([]byte{Version}, good[1:]...), "version 0x1"},
		{"truncated", good[:len(good)/2], "rollup: corrupt encoding"},
		{"trailing", append(bytes.Clone(good), 0), "bytes after the last window"},
		{"bad hint", []byte{HistogramVersion, 10, 1, 2, hflagSingle, 1, 0, 9}, "counter reset hint 9"},
		{"bad schema", []byte{HistogramVersion, 10, 1, 2, hflagSingle, 1, 0, 0, 40, 0, 0, 0, 0, 0, 0, 0}, "first"},
	})
}

// FuzzDecodeRollupHistograms: as FuzzDecodeRollup, for histogram windows.
// The seeds are small: the fuzzer minimizes every new input it finds, and
// at 20 KB that minimizing stalls it.
func FuzzDecodeRollupHistograms(f *testing.F) {
	for seed := uint64(0); seed < 3; seed++ {
		res := []int64{1, 10, 300_000}[seed]
		b, err := EncodeHistograms(nil, res, histWindows(f, seed, res, 12))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) { decodesToItsEncoding(t, b, DecodeHistograms, EncodeHistograms) })
}
