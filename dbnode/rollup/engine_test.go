package rollup

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/util/annotations"
	"github.com/stretchr/testify/require"
)

// esample is a raw sample as the engine's storage serves it: a float, or
// a float histogram when h is set.
type esample struct {
	t int64
	f float64
	h *histogram.FloatHistogram
}

func (s esample) T() int64                      { return s.t }
func (s esample) ST() int64                     { return 0 }
func (s esample) F() float64                    { return s.f }
func (s esample) H() *histogram.Histogram       { return nil }
func (s esample) FH() *histogram.FloatHistogram { return s.h }

func (s esample) Type() chunkenc.ValueType {
	if s.h != nil {
		return chunkenc.ValFloatHistogram
	}
	return chunkenc.ValFloat
}

func (s esample) Copy() chunks.Sample {
	if s.h != nil {
		s.h = s.h.Copy()
	}
	return s
}

// oneSeries serves the raw samples as the one series "m" to the engine.
func oneSeries(samples []Sample) storage.Queryable {
	cs := make([]chunks.Sample, len(samples))
	for i, s := range samples {
		cs[i] = esample{t: s.T, f: s.V}
	}
	return serve("m", cs)
}

// serve serves samples as the one series name to the engine.
func serve(name string, cs []chunks.Sample) storage.Queryable {
	lset := labels.FromStrings("__name__", name)
	return storage.QueryableFunc(func(int64, int64) (storage.Querier, error) {
		return &storage.MockQuerier{SelectMockFunction: func(bool, *storage.SelectHints, ...*labels.Matcher) storage.SeriesSet {
			return &once{s: storage.NewListSeries(lset, cs)}
		}}, nil
	})
}

// once is a series set of one series.
type once struct {
	s    storage.Series
	done bool
}

func (o *once) Next() bool                        { n := !o.done; o.done = true; return n }
func (o *once) At() storage.Series                { return o.s }
func (o *once) Err() error                        { return nil }
func (o *once) Warnings() annotations.Annotations { return nil }

// TestRangeFunctionsMatchEngine holds the package doc's claims to the
// PromQL engine itself: over window-aligned ranges evaluated at window
// ends, rate, increase, delta and the *_over_time functions computed from
// the windows equal the engine's answer over the raw samples. The series
// are a counter with resets (some exactly on window edges), a gauge, and
// both with stale markers, scraped with jitter and sometimes exactly on a
// window edge.
func TestRangeFunctionsMatchEngine(t *testing.T) {
	const res = int64(5 * time.Minute / time.Millisecond)
	rng := rand.New(rand.NewPCG(26, 1))
	engine := newEngine()
	caught := 0
	for trial := 0; trial < 20; trial++ {
		counter := trial%2 == 0
		var samples []Sample
		v := 0.0
		scrape(rng, res, func(ts int64) {
			switch {
			case rng.IntN(50) == 0:
				samples = append(samples, Sample{ts, staleNaN})
			case counter && rng.IntN(30) == 0:
				v = float64(rng.IntN(10))
				samples = append(samples, Sample{ts, v})
			case counter:
				v += rng.Float64() * 100
				samples = append(samples, Sample{ts, v})
			default:
				samples = append(samples, Sample{ts, rng.NormFloat64() * 1e3})
			}
		})
		ws, err := Compute(samples, res)
		require.NoError(t, err)
		q := oneSeries(samples)
		alignedRanges(res, []int64{1, 3, 12}, func(start, end int64, rng string) {
			w, ok, err := Range(ws, start, end)
			require.NoError(t, err)
			type fn struct {
				expr string
				got  func() (float64, bool)
			}
			fns := []fn{
				{"rate", func() (float64, bool) { return Rate(w, start, end, true, true) }},
				{"increase", func() (float64, bool) { return Rate(w, start, end, true, false) }},
				{"delta", func() (float64, bool) { return Rate(w, start, end, false, false) }},
				{"sum_over_time", func() (float64, bool) { return w.Sum, ok && w.Count > 0 }},
				{"count_over_time", func() (float64, bool) { return float64(w.Count), ok && w.Count > 0 }},
				{"avg_over_time", func() (float64, bool) { return w.Sum / float64(w.Count), ok && w.Count > 0 }},
				{"min_over_time", func() (float64, bool) { return w.Min, ok && w.Count > 0 }},
				{"max_over_time", func() (float64, bool) { return w.Max, ok && w.Count > 0 }},
				{"last_over_time", func() (float64, bool) { return w.Last.V, ok && w.Count > 0 }},
			}
			for _, f := range fns {
				expr := fmt.Sprintf("%s(m[%s])", f.expr, rng)
				vec := instant(t, engine, q, expr, end)
				got, gotOK := f.got()
				where := fmt.Sprintf("trial %d %s at %d", trial, expr, end)
				require.Equal(t, len(vec) == 1, gotOK, where)
				if gotOK {
					want := vec[0].F
					require.InDelta(t, want, got, 1e-9*math.Max(1, math.Abs(want)), where)
					// The comparison can fail: without the resets the
					// windows carry, increase comes out wrong.
					if f.expr == "increase" && w.Resets != 0 {
						broken := w
						broken.Resets = 0
						b, _ := Rate(broken, start, end, true, false)
						if math.Abs(b-want) > 1e-9*math.Max(1, math.Abs(want)) {
							caught++
						}
					}
				}
			}
		})
	}
	require.Greater(t, caught, 0, "a window without its resets never changed increase: the series have no resets to test")
}

// newEngine is the PromQL engine the windows are held to.
func newEngine() *promql.Engine {
	return promql.NewEngine(promql.EngineOpts{MaxSamples: 1e7, Timeout: time.Minute, LookbackDelta: 5 * time.Minute})
}

// scrape calls sample at each scrape time of 12 windows of res from 0:
// every 15 s, two in three jittered by up to 1 s, the others exactly on
// 15 s and so on window edges. sample draws from rng before the jitter
// does.
func scrape(rng *rand.Rand, res int64, sample func(ts int64)) {
	for ts := int64(0); ts < 12*res; {
		sample(ts)
		step := int64(15_000)
		if rng.IntN(3) > 0 {
			step += rng.Int64N(2_000) - 1_000
		}
		ts += step
	}
}

// alignedRanges calls f with each range (start, end] of n windows, for
// each n in ns, that ends on a window end within scrape's 12 windows, and
// the range as PromQL writes it.
func alignedRanges(res int64, ns []int64, f func(start, end int64, rangeStr string)) {
	for _, n := range ns {
		for end := n * res; end <= 12*res; end += res {
			f(end-n*res, end, fmt.Sprintf("%dms", n*res))
		}
	}
}
