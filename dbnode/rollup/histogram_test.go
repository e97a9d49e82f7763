package rollup

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/stretchr/testify/require"
)

func histSeries(samples []HSample) storage.Queryable {
	cs := make([]chunks.Sample, len(samples))
	for i, s := range samples {
		cs[i] = esample{t: s.T, h: s.H}
	}
	return serve("h", cs)
}

// counterHistogram is a schema-0 histogram with four positive buckets.
func counterHistogram(buckets [4]float64, zero, sum float64) *histogram.FloatHistogram {
	count := zero
	for _, b := range buckets {
		count += b
	}
	return &histogram.FloatHistogram{
		Schema: 0, ZeroThreshold: 1e-128, ZeroCount: zero, Count: count, Sum: sum,
		PositiveSpans:   []histogram.Span{{Offset: 0, Length: 4}},
		PositiveBuckets: buckets[:],
	}
}

func instant(t *testing.T, engine *promql.Engine, q storage.Queryable, expr string, ts int64) promql.Vector {
	qry, err := engine.NewInstantQuery(context.Background(), q, nil, expr, time.UnixMilli(ts))
	require.NoError(t, err)
	r := qry.Exec(context.Background())
	require.NoError(t, r.Err, expr)
	vec, err := r.Vector()
	require.NoError(t, err)
	return vec
}

// TestHistogramRatesMatchEngine: rate and increase of a native histogram
// counter with resets (some on window edges), and sum_over_time, computed
// from windows equal the engine's over the raw samples, compared by
// count, sum and histogram_quantile (the quantiles of our result computed
// by the engine too).
func TestHistogramRatesMatchEngine(t *testing.T) {
	const res = int64(5 * time.Minute / time.Millisecond)
	rng := rand.New(rand.NewPCG(26, 5))
	engine := newEngine()
	caught := 0
	for trial := 0; trial < 6; trial++ {
		var samples []HSample
		var b [4]float64
		var zero, sum float64
		scrape(rng, res, func(ts int64) {
			switch {
			case rng.IntN(60) == 0:
				samples = append(samples, HSample{ts, &histogram.FloatHistogram{Sum: math.Float64frombits(value.StaleNaN)}})
			case rng.IntN(25) == 0:
				b, zero, sum = [4]float64{}, 0, 0 // counter reset
				samples = append(samples, HSample{ts, counterHistogram(b, zero, sum)})
			default:
				for i := range b {
					b[i] += float64(rng.IntN(5))
				}
				zero += float64(rng.IntN(2))
				sum += rng.Float64() * 50
				samples = append(samples, HSample{ts, counterHistogram(b, zero, sum)})
			}
		})
		c, d := compareHistogramRanges(t, engine, samples, res, fmt.Sprintf("trial %d", trial))
		require.Zero(t, d, "exponential buckets: nothing declined")
		caught += c
	}
	require.Greater(t, caught, 0, "a window without its resets never changed increase")
}

// compareHistogramRanges requires rate, increase and sum_over_time of
// samples over every aligned range of 1, 4 and 12 windows computed from
// their windows to equal the engine's over the samples (count, sum and
// quantiles; not the quantiles of a rate over custom buckets whose
// bounds change, CustomBoundsChange), and returns how often dropping a
// range's resets changed its increase and how many rates were so
// declined.
func compareHistogramRanges(t *testing.T, engine *promql.Engine, samples []HSample, res int64, trial string) (caught, declined int) {
	t.Helper()
	ws, err := ComputeHistograms(samples, res)
	require.NoError(t, err)
	q := histSeries(samples)
	alignedRanges(res, []int64{1, 4, 12}, func(start, end int64, rangeStr string) {
		w, ok, err := RangeHistograms(ws, start, end)
		require.NoError(t, err)
		for _, fn := range []string{"rate", "increase", "sum_over_time"} {
			expr := fmt.Sprintf("%s(h[%s])", fn, rangeStr)
			where := fmt.Sprintf("%s %s at %d", trial, expr, end)
			vec := instant(t, engine, q, expr, end)
			var got *histogram.FloatHistogram
			gotOK := ok && w.Count > 0
			switch fn {
			case "sum_over_time":
				got = w.Sum
			default:
				got, gotOK, err = RateHistograms(w, start, end, fn == "rate")
				require.NoError(t, err)
			}
			require.Equal(t, len(vec) == 1, gotOK, where)
			if !gotOK {
				continue
			}
			want := vec[0].H
			require.NotNil(t, want, where)
			tol := func(x float64) float64 { return 1e-9 * math.Max(1, math.Abs(x)) }
			require.InDelta(t, want.Count, got.Count, tol(want.Count), where)
			require.InDelta(t, want.Sum, got.Sum, tol(want.Sum), where)
			if fn != "sum_over_time" && CustomBoundsChange(w) {
				declined++ // count and sum only: the buckets may differ
			} else {
				requireSameQuantiles(t, engine, q, expr, got, end, where)
			}
			if fn == "increase" && w.Resets != nil {
				broken := w
				broken.Resets = nil
				b, _, err := RateHistograms(broken, start, end, false)
				require.NoError(t, err)
				if math.Abs(b.Count-want.Count) > tol(want.Count) {
					caught++
				}
			}
		}
	})
	return caught, declined
}

// requireSameQuantiles requires got's quantiles to be those of expr
// over q at end.
func requireSameQuantiles(t *testing.T, engine *promql.Engine, q storage.Queryable, expr string, got *histogram.FloatHistogram, end int64, where string) {
	t.Helper()
	tol := func(x float64) float64 { return 1e-9 * math.Max(1, math.Abs(x)) }
	mine := histSeries([]HSample{{end, got}})
	for _, phi := range []string{"0.25", "0.5", "0.9"} {
		wq := instant(t, engine, q, fmt.Sprintf("histogram_quantile(%s, %s)", phi, expr), end)
		gq := instant(t, engine, mine, fmt.Sprintf("histogram_quantile(%s, h)", phi), end)
		require.Len(t, gq, len(wq), where)
		if len(wq) == 1 && !math.IsNaN(wq[0].F) {
			require.InDelta(t, wq[0].F, gq[0].F, tol(wq[0].F), "%s quantile %s", where, phi)
		}
	}
}

func TestHistogramBlockEdgeMerge(t *testing.T) {
	rng := rand.New(rand.NewPCG(26, 6))
	var samples []HSample
	var b [4]float64
	for ts := int64(0); ts < 100; ts += 1 + rng.Int64N(7) {
		if rng.IntN(10) == 0 {
			b = [4]float64{}
		}
		b[rng.IntN(4)] += 1
		samples = append(samples, HSample{ts, counterHistogram(b, 0, float64(ts))})
	}
	whole, err := ComputeHistograms(samples, 10)
	require.NoError(t, err)
	for cut := range samples {
		a, err := ComputeHistograms(samples[:cut], 10)
		require.NoError(t, err)
		c, err := ComputeHistograms(samples[cut:], 10)
		require.NoError(t, err)
		wa, _, err := RangeHistograms(append(a, c...), math.MinInt64, math.MaxInt64)
		require.NoError(t, err)
		ww, _, err := RangeHistograms(whole, math.MinInt64, math.MaxInt64)
		require.NoError(t, err)
		require.Equal(t, ww.Count, wa.Count)
		require.True(t, ww.Sum.Equals(wa.Sum), "cut %d", cut)
		require.Equal(t, ww.Resets == nil, wa.Resets == nil, "cut %d", cut)
		if ww.Resets != nil {
			require.True(t, ww.Resets.Equals(wa.Resets), "cut %d", cut)
		}
	}
}

// TestHistogramSchemaChangesMatchEngine: a native histogram counter
// whose schema drops inside windows (a coarser layout, not a reset:
// Prometheus adds and subtracts in the lower schema) and rises again (a
// reset, by DetectReset's rule) rolls up to windows that answer rate,
// increase and sum_over_time as the engine does over the samples.
func TestHistogramSchemaChangesMatchEngine(t *testing.T) {
	const res = int64(5 * time.Minute / time.Millisecond)
	rng := rand.New(rand.NewPCG(26, 7))
	engine := newEngine()
	drops, rises := 0, 0
	for trial := 0; trial < 6; trial++ {
		var samples []HSample
		var b [8]float64
		schema := int32(2)
		var zero, sum float64
		scrape(rng, res, func(ts int64) {
			switch {
			case schema > 0 && rng.IntN(15) == 0:
				schema--
				drops++
			case schema < 2 && rng.IntN(20) == 0:
				schema = 2 // finer again: Prometheus takes it for a reset
				b, zero, sum = [8]float64{}, 0, 0
				rises++
			}
			for i := range b {
				b[i] += float64(rng.IntN(4))
			}
			zero += float64(rng.IntN(2))
			sum += rng.Float64() * 40
			count := zero
			for _, x := range b {
				count += x
			}
			h := &histogram.FloatHistogram{Schema: 2, ZeroThreshold: 1e-128, ZeroCount: zero, Count: count, Sum: sum,
				PositiveSpans: []histogram.Span{{Offset: -3, Length: 8}}, PositiveBuckets: slices.Clone(b[:])}
			reduced, err := h.CopyToSchema(schema)
			require.NoError(t, err)
			samples = append(samples, HSample{ts, reduced})
		})
		_, d := compareHistogramRanges(t, engine, samples, res, fmt.Sprintf("schema trial %d", trial))
		require.Zero(t, d, "exponential buckets: nothing declined")
	}
	require.Greater(t, drops, 20)
	require.Greater(t, rises, 10)
}

// TestHistogramCustomBucketsMatchEngine: native histograms with custom
// buckets (NHCB, schema -53, as Prometheus converts classic histograms)
// whose bounds change inside windows, sometimes with a reset and
// sometimes with counts carried over (Prometheus reconciles the bounds:
// their intersection), roll up to windows that answer rate, increase
// and sum_over_time as the engine does over the samples.
func TestHistogramCustomBucketsMatchEngine(t *testing.T) {
	const res = int64(5 * time.Minute / time.Millisecond)
	rng := rand.New(rand.NewPCG(26, 8))
	engine := newEngine()
	bounds := [][]float64{{0.1, 0.5, 1, 5}, {0.1, 1, 5, 10}}
	changes, declined := 0, 0
	for trial := 0; trial < 6; trial++ {
		var samples []HSample
		var b [5]float64 // four bounds and +Inf
		cur := 0
		var sum float64
		scrape(rng, res, func(ts int64) {
			switch {
			case rng.IntN(25) == 0:
				cur = 1 - cur
				changes++
				if rng.IntN(2) == 0 {
					b, sum = [5]float64{}, 0
				}
			case rng.IntN(40) == 0:
				b, sum = [5]float64{}, 0 // a counter reset
			}
			for i := range b {
				b[i] += float64(rng.IntN(4))
			}
			sum += rng.Float64() * 20
			count := 0.0
			for _, x := range b {
				count += x
			}
			samples = append(samples, HSample{ts, &histogram.FloatHistogram{Schema: histogram.CustomBucketsSchema,
				Count: count, Sum: sum, CustomValues: bounds[cur],
				PositiveSpans: []histogram.Span{{Offset: 0, Length: 5}}, PositiveBuckets: slices.Clone(b[:])}})
		})
		_, d := compareHistogramRanges(t, engine, samples, res, fmt.Sprintf("nhcb trial %d", trial))
		declined += d
	}
	require.Greater(t, changes, 10)
	// 6 trials of 12+9+1 ranges, rate and increase each.
	require.Greater(t, declined, 0)
	require.Less(t, declined, 6*22*2, "ranges whose bounds do not change are compared whole")
}
