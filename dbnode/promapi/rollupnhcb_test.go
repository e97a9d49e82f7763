package promapi

import (
	"testing"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/stretchr/testify/require"

	"github.com/tessera-tsdb/tessera/dbnode/rollup"
	tstorage "github.com/tessera-tsdb/tessera/dbnode/storage"
)

// TestRollupRateWarnsOfCustomBoundsChange: a rate of custom-bucket
// histograms whose bounds change inside its range is flagged (its count
// and sum are the engine's, its buckets may not be:
// rollup.TestHistogramCustomBucketsMatchEngine), one whose bounds hold
// is not, and neither is sum_over_time.
func TestRollupRateWarnsOfCustomBoundsChange(t *testing.T) {
	const res = 60_000
	nhcb := func(bounds []float64, n float64) *histogram.FloatHistogram {
		return &histogram.FloatHistogram{Schema: histogram.CustomBucketsSchema, Count: 3 * n, Sum: n, CustomValues: bounds,
			PositiveSpans: []histogram.Span{{Offset: 0, Length: 3}}, PositiveBuckets: []float64{n, n, n}}
	}
	a, b := []float64{1, 5}, []float64{1, 10}
	for _, c := range []struct {
		second []float64
		fn     string
		want   bool
	}{{a, "rate", false}, {b, "rate", true}, {b, "increase", true}, {b, "sum_over_time", false}} {
		var samples []rollup.HSample
		for i := int64(1); i <= 8; i++ {
			bounds := a
			if i > 4 {
				bounds = c.second
			}
			samples = append(samples, rollup.HSample{T: i * 15_000, H: nhcb(bounds, float64(i))})
		}
		hws, err := rollup.ComputeHistograms(samples, res)
		require.NoError(t, err)
		r := rollupSteps{vals: make([]float64, 1)}
		has, err := evalSteps(rollupFuncs[c.fn], tstorage.RollupSeries{HWindows: hws}, 2*res, res, 2*res, &r)
		require.NoError(t, err)
		require.True(t, has, c.fn)
		require.Equal(t, c.want, r.boundsChange, "%s, bounds %v then %v", c.fn, a, c.second)
	}
}
