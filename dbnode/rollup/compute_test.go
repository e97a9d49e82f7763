package rollup

import (
	"math"
	"testing"

	"github.com/prometheus/prometheus/model/value"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

var staleNaN = math.Float64frombits(value.StaleNaN)

// genSeries draws a raw series: strictly increasing timestamps (gaps from
// 1 ms to a few resolutions, some exactly on window edges), small integer
// values (so sums and increases are exact in float64 and the properties
// can compare with ==), counter resets, and stale markers.
func genSeries(t *rapid.T, res int64) []Sample {
	n := rapid.IntRange(0, 200).Draw(t, "n")
	ts := rapid.Int64Range(-3*res, 3*res).Draw(t, "start")
	if rapid.Bool().Draw(t, "aligned") {
		ts = windowEnd(ts, res) // a sample exactly on a window edge
	}
	v := float64(rapid.IntRange(0, 100).Draw(t, "v0"))
	out := make([]Sample, 0, n)
	for i := 0; i < n; i++ {
		switch rapid.IntRange(0, 9).Draw(t, "kind") {
		case 0:
			out = append(out, Sample{ts, staleNaN})
		case 1:
			v = float64(rapid.IntRange(0, 50).Draw(t, "reset")) // counter reset
			out = append(out, Sample{ts, v})
		default:
			v += float64(rapid.IntRange(0, 20).Draw(t, "inc"))
			out = append(out, Sample{ts, v})
		}
		ts += rapid.Int64Range(1, 3*res).Draw(t, "gap")
	}
	return out
}

// rawAgg is the reference: the aggregates of the raw samples computed
// directly, as PromQL's range functions would over the same samples.
type rawAgg struct {
	count               uint64
	sum, min, max, incr float64
	first, last         Sample
}

func reference(samples []Sample) rawAgg {
	var a rawAgg
	for _, s := range samples {
		if value.IsStaleNaN(s.V) {
			continue
		}
		if a.count == 0 {
			a.first, a.min, a.max = s, s.V, s.V
		} else {
			if s.V >= a.last.V {
				a.incr += s.V - a.last.V
			} else {
				a.incr += s.V // a reset: the counter restarted from 0
			}
			a.min, a.max = math.Min(a.min, s.V), math.Max(a.max, s.V)
		}
		a.sum += s.V
		a.last = s
		a.count++
	}
	return a
}

func TestComputeProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		res := rapid.Int64Range(1, 10_000).Draw(t, "res")
		samples := genSeries(t, res)
		ws, err := Compute(samples, res)
		require.NoError(t, err)
		ref := reference(samples)

		var count uint64
		var sum float64
		prevEnd := int64(math.MinInt64)
		for _, w := range ws {
			require.Greater(t, w.End, prevEnd, "windows in End order, one per End")
			require.Zero(t, ((w.End%res)+res)%res, "End %d is a multiple of %d", w.End, res)
			prevEnd = w.End
			if w.Count == 0 {
				require.True(t, w.Stale, "a window without samples is emitted only for a stale marker")
				continue
			}
			for _, s := range []Sample{w.First, w.Last} {
				require.True(t, s.T > w.End-res && s.T <= w.End, "sample %d outside window (%d, %d]", s.T, w.End-res, w.End)
				require.True(t, w.Min <= s.V && s.V <= w.Max)
			}
			require.LessOrEqual(t, w.First.T, w.Last.T)
			require.True(t, w.Count > 1 || w.First == w.Last)
			count += w.Count
			sum += w.Sum
		}
		require.Equal(t, ref.count, count, "count over windows == raw count without stale markers")
		require.Equal(t, ref.sum, sum, "sum over windows == raw sum")

		all, ok, err := Range(ws, math.MinInt64, math.MaxInt64)
		require.NoError(t, err)
		if ref.count == 0 {
			require.True(t, !ok || all.Count == 0)
			return
		}
		require.Equal(t, ref.count, all.Count)
		require.Equal(t, ref.incr, all.Increase(), "increase across windows == raw reset-aware increase")
		require.Equal(t, ref.min, all.Min)
		require.Equal(t, ref.max, all.Max)
		require.Equal(t, ref.first, all.First)
		require.Equal(t, ref.last, all.Last)
		require.Equal(t, ref.sum, all.Sum)
		last := samples[len(samples)-1]
		require.Equal(t, value.IsStaleNaN(last.V), all.Stale)
	})
}

// TestBlockEdgeMerge: computing two adjacent blocks apart and merging
// the windows of equal End (the sample exactly on the block edge goes to
// the window ending there) gives the windows of the whole.
func TestBlockEdgeMerge(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		res := rapid.Int64Range(1, 1000).Draw(t, "res")
		samples := genSeries(t, res)
		whole, err := Compute(samples, res)
		require.NoError(t, err)
		cut := rapid.IntRange(0, len(samples)).Draw(t, "cut")
		a, err := Compute(samples[:cut], res)
		require.NoError(t, err)
		b, err := Compute(samples[cut:], res)
		require.NoError(t, err)
		joined, err := Coarsen(append(a, b...), res)
		require.NoError(t, err)
		require.Equal(t, whole, joined)
	})
}

// TestCoarsen: rolling a rollup up again (5m -> 1h) equals rolling the
// raw samples up at the coarser resolution.
func TestCoarsen(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		res := rapid.Int64Range(1, 1000).Draw(t, "res")
		k := rapid.Int64Range(1, 24).Draw(t, "k")
		samples := genSeries(t, res)
		fine, err := Compute(samples, res)
		require.NoError(t, err)
		coarse, err := Compute(samples, res*k)
		require.NoError(t, err)
		got, err := Coarsen(fine, res*k)
		require.NoError(t, err)
		require.Equal(t, coarse, got)
	})
}

// Float values: sums agree within rounding, everything else exactly.
func TestComputeFloatSums(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		res := rapid.Int64Range(1, 1000).Draw(t, "res")
		n := rapid.IntRange(1, 300).Draw(t, "n")
		samples := make([]Sample, n)
		var ts int64
		var sum float64
		for i := range samples {
			ts += rapid.Int64Range(1, 2*res).Draw(t, "gap")
			v := rapid.Float64Range(-1e6, 1e6).Draw(t, "v")
			samples[i] = Sample{ts, v}
			sum += v
		}
		ws, err := Compute(samples, res)
		require.NoError(t, err)
		all, ok, err := Range(ws, math.MinInt64, math.MaxInt64)
		require.NoError(t, err)
		require.True(t, ok)
		require.InDelta(t, sum, all.Sum, 1e-9*float64(n)*1e6)
		require.Equal(t, uint64(n), all.Count)
	})
}

func TestComputeRefusesBadInput(t *testing.T) {
	_, err := Compute([]Sample{{10, 1}, {10, 2}}, 5)
	require.ErrorContains(t, err, "sample 1 at 10 is not after sample 0 at 10")
	_, err = Compute(nil, 0)
	require.ErrorContains(t, err, "resolution must be > 0")
	_, err = Merge(Window{End: 10, Count: 1, Last: Sample{T: 9}}, Window{End: 10, Count: 1, First: Sample{T: 8}})
	require.ErrorIs(t, err, ErrOrder)
}

// NaN values (not stale markers) follow PromQL: min/max ignore them unless
// every sample is NaN, and a NaN inside a window does not poison the
// increase (Prometheus computes last - first + values before resets).
func TestComputeNaN(t *testing.T) {
	ws, err := Compute([]Sample{{1, math.NaN()}, {2, 5}, {3, math.NaN()}, {4, 7}}, 10)
	require.NoError(t, err)
	require.Len(t, ws, 1)
	require.Equal(t, 5.0, ws[0].Min)
	require.Equal(t, 7.0, ws[0].Max)
	ws, err = Compute([]Sample{{1, 5}, {2, math.NaN()}, {3, 7}}, 10)
	require.NoError(t, err)
	require.Equal(t, 2.0, ws[0].Increase())
}
