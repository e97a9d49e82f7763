package promapi

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/prompb"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/stretchr/testify/require"
)

// msample is one sample of a series that may change type: a float (h and
// fh nil), an integer histogram or a float histogram.
type msample struct {
	t  int64
	f  float64
	h  *histogram.Histogram
	fh *histogram.FloatHistogram
}

func (s msample) T() int64                      { return s.t }
func (s msample) ST() int64                     { return 0 }
func (s msample) F() float64                    { return s.f }
func (s msample) H() *histogram.Histogram       { return s.h }
func (s msample) FH() *histogram.FloatHistogram { return s.fh }
func (s msample) Copy() chunks.Sample           { return s }
func (s msample) Type() chunkenc.ValueType {
	switch {
	case s.h != nil:
		return chunkenc.ValHistogram
	case s.fh != nil:
		return chunkenc.ValFloatHistogram
	}
	return chunkenc.ValFloat
}

type mseries struct {
	lset    labels.Labels
	samples []msample
}

// histChunks encodes samples as Prometheus' head does: a chunk per run of
// one type, cut at 120 samples, and wherever the histogram appender asks
// for a new chunk (a counter reset, a schema change) or recodes the chunk
// (new buckets).
func histChunks(t testing.TB, samples []msample) []chunks.Meta {
	var (
		metas []chunks.Meta
		app   chunkenc.Appender
		typ   chunkenc.ValueType
	)
	cur := func() *chunks.Meta { return &metas[len(metas)-1] }
	for _, s := range samples {
		if len(metas) == 0 || s.Type() != typ || cur().Chunk.NumSamples() >= 120 {
			var c chunkenc.Chunk
			switch s.Type() {
			case chunkenc.ValFloat:
				c = chunkenc.NewXORChunk()
			case chunkenc.ValHistogram:
				c = chunkenc.NewHistogramChunk()
			default:
				c = chunkenc.NewFloatHistogramChunk()
			}
			prev := app
			if s.Type() != typ {
				prev = nil
			}
			var err error
			app, err = c.Appender()
			require.NoError(t, err)
			metas = append(metas, chunks.Meta{Chunk: c, MinTime: s.t})
			typ = s.Type()
			// The first sample of a chunk cut for size keeps the reset
			// header the head would compute against the previous chunk.
			if prev != nil {
				var nc chunkenc.Chunk
				switch typ {
				case chunkenc.ValHistogram:
					nc, _, app, err = app.AppendHistogram(prev, 0, s.t, s.h.Copy(), false)
				case chunkenc.ValFloatHistogram:
					nc, _, app, err = app.AppendFloatHistogram(prev, 0, s.t, s.fh.Copy(), false)
				default:
					app.Append(0, s.t, s.f)
				}
				require.NoError(t, err)
				require.Nil(t, nc)
				cur().MaxTime = s.t
				continue
			}
		}
		var (
			nc      chunkenc.Chunk
			recoded bool
			err     error
		)
		switch typ {
		case chunkenc.ValFloat:
			app.Append(0, s.t, s.f)
		case chunkenc.ValHistogram:
			nc, recoded, app, err = app.AppendHistogram(nil, 0, s.t, s.h.Copy(), false)
		default:
			nc, recoded, app, err = app.AppendFloatHistogram(nil, 0, s.t, s.fh.Copy(), false)
		}
		require.NoError(t, err)
		switch {
		case nc != nil && recoded:
			cur().Chunk = nc
		case nc != nil:
			metas = append(metas, chunks.Meta{Chunk: nc, MinTime: s.t})
		}
		cur().MaxTime = s.t
	}
	return metas
}

// addMixed adds a series of any sample types to the reference storage.
func (r *refStorage) addMixed(t testing.TB, s mseries) {
	metas := histChunks(t, s.samples)
	all := make([]chunks.Sample, len(s.samples))
	for i, smp := range s.samples {
		all[i] = smp
	}
	r.series = append(r.series, refSeries{lset: s.lset, samples: all, entry: &storage.ChunkSeriesEntry{
		Lset:            s.lset,
		ChunkIteratorFn: func(chunks.Iterator) chunks.Iterator { return storage.NewListChunkSeriesIterator(metas...) },
	}})
}

// genHistograms generates native histogram series as Prometheus scrapes
// them: request latencies at exponential schemas (integer counts, growing
// as counters, new buckets appearing, a counter reset), the same as float
// histograms, classic buckets as NHCB (custom bounds), a series ended by
// a stale marker, and a series that switches from floats to histograms.
func genHistograms(start, end int64) []mseries {
	rng := rand.New(rand.NewPCG(15, 3))
	step := dsScrape.Milliseconds()
	times := func(from, to int64) []int64 {
		var ts []int64
		for t := from + rng.Int64N(step); t < to; t += step {
			ts = append(ts, t+rng.Int64N(40)-20)
		}
		return ts
	}
	var out []mseries
	// latency observes one scrape's worth of log-normal latencies into
	// buckets of schema (exponential) or custom bounds (NHCB).
	type acc struct {
		counts map[int]uint64
		zero   uint64
		count  uint64
		sum    float64
	}
	observe := func(a *acc, schema int32, custom []float64, n int) {
		for range n {
			v := math.Exp(rng.NormFloat64()*0.8 - 3)
			a.count++
			a.sum += v
			var idx int
			if custom != nil {
				idx = len(custom)
				for i, b := range custom {
					if v <= b {
						idx = i
						break
					}
				}
			} else if v <= 0.001 {
				a.zero++
				continue
			} else {
				frac, exp := math.Frexp(v)
				if schema > 0 {
					// Index of the bucket (base 2^(2^-schema)) holding v.
					idx = int(math.Ceil(math.Log2(v) * math.Exp2(float64(schema))))
				} else {
					idx = exp
					if frac == 0.5 {
						idx--
					}
				}
			}
			a.counts[idx]++
		}
	}
	toHist := func(a *acc, schema int32, custom []float64) *histogram.Histogram {
		h := &histogram.Histogram{Schema: schema, Count: a.count, Sum: a.sum, ZeroCount: a.zero, CustomValues: custom}
		if custom == nil {
			h.ZeroThreshold = 0.001
		}
		lo, hi := math.MaxInt, math.MinInt
		for i := range a.counts {
			lo, hi = min(lo, i), max(hi, i)
		}
		if custom != nil {
			lo = 0 // NHCB spans start at bucket 0
		}
		var prev int64
		var span *histogram.Span
		gap := 0
		for i := lo; i <= hi && len(a.counts) > 0; i++ {
			c, ok := a.counts[i]
			if !ok {
				gap++
				continue
			}
			if span == nil || gap > 0 {
				off := int32(i)
				if span != nil {
					off = int32(gap)
				}
				h.PositiveSpans = append(h.PositiveSpans, histogram.Span{Offset: off, Length: 0})
				span = &h.PositiveSpans[len(h.PositiveSpans)-1]
				gap = 0
			}
			span.Length++
			h.PositiveBuckets = append(h.PositiveBuckets, int64(c)-prev)
			prev = int64(c)
		}
		return h
	}
	for _, job := range []string{"api", "web"} {
		for inst := range 3 {
			for _, kind := range []string{"int", "float", "nhcb"} {
				name := map[string]string{"int": "req_latency_seconds", "float": "req_latency_float_seconds", "nhcb": "req_nhcb_seconds"}[kind]
				ls := labels.FromStrings("__name__", name, "job", job, "instance", fmt.Sprintf("i%d", inst))
				schema := int32(inst) // 0..2
				var custom []float64
				if kind == "nhcb" {
					schema, custom = histogram.CustomBucketsSchema, []float64{0.01, 0.025, 0.05, 0.1, 0.25, 1}
				}
				a := &acc{counts: map[int]uint64{}}
				var ss []msample
				for i, t := range times(start, end) {
					if job == "web" && inst == 1 && i == 300 {
						a = &acc{counts: map[int]uint64{}} // the process restarted
					}
					observe(a, schema, custom, rng.IntN(30))
					h := toHist(a, schema, custom)
					if kind == "float" {
						ss = append(ss, msample{t: t, fh: h.ToFloat(nil)})
					} else {
						ss = append(ss, msample{t: t, h: h})
					}
				}
				out = append(out, mseries{lset: ls, samples: ss})
			}
		}
	}
	// Ended by a stale marker at 1h, and a series that switches type at
	// 1h30m (floats before, histograms after).
	{
		a := &acc{counts: map[int]uint64{}}
		var stale, mixed []msample
		for _, t := range times(start, end) {
			observe(a, 1, nil, 5)
			if t < start+3600_000 {
				stale = append(stale, msample{t: t, h: toHist(a, 1, nil)})
			}
			if t < start+5400_000 {
				mixed = append(mixed, msample{t: t, f: float64(a.count)})
			} else {
				mixed = append(mixed, msample{t: t, h: toHist(a, 1, nil)})
			}
		}
		m := toHist(a, 1, nil)
		m.Sum = math.Float64frombits(value.StaleNaN)
		stale = append(stale, msample{t: start + 3600_000 + 7, h: m})
		out = append(out, mseries{lset: labels.FromStrings("__name__", "hist_stale", "instance", "i0"), samples: stale})
		out = append(out, mseries{lset: labels.FromStrings("__name__", "mixed_metric", "instance", "i0"), samples: mixed})
	}
	return out
}

// remoteWriteMixed sends series of any type by remote write 1.0, five
// minutes of scrapes per request.
func (n *tesseraNode) remoteWriteMixed(t testing.TB, series []mseries, start, end int64) {
	t.Helper()
	window := (5 * time.Minute).Milliseconds()
	next := make([]int, len(series))
	for from := start - window; from <= end+window; from += window {
		var req prompb.WriteRequest
		for i, s := range series {
			var ts prompb.TimeSeries
			for ; next[i] < len(s.samples) && s.samples[next[i]].t < from+window; next[i]++ {
				smp := s.samples[next[i]]
				switch {
				case smp.h != nil:
					ts.Histograms = append(ts.Histograms, prompb.FromIntHistogram(smp.t, smp.h))
				case smp.fh != nil:
					ts.Histograms = append(ts.Histograms, prompb.FromFloatHistogram(smp.t, smp.fh))
				default:
					ts.Samples = append(ts.Samples, prompb.Sample{Timestamp: smp.t, Value: smp.f})
				}
			}
			if len(ts.Samples)+len(ts.Histograms) == 0 {
				continue
			}
			s.lset.Range(func(l labels.Label) { ts.Labels = append(ts.Labels, prompb.Label{Name: l.Name, Value: l.Value}) })
			req.Timeseries = append(req.Timeseries, ts)
		}
		if len(req.Timeseries) == 0 {
			continue
		}
		raw, err := req.Marshal()
		require.NoError(t, err)
		resp, err := http.Post(n.srv.URL+"/api/v1/prom/remote/write", "application/x-protobuf", bytes.NewReader(snappy.Encode(nil, raw)))
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusNoContent, resp.StatusCode, string(body))
	}
}

var histogramQueries = []string{
	`req_latency_seconds`,
	`req_latency_float_seconds{job="web"}`,
	`req_nhcb_seconds{instance="i1"}`,
	`rate(req_latency_seconds[5m])`,
	`increase(req_latency_float_seconds[10m])`,
	`resets(req_latency_seconds[30m])`,
	`histogram_quantile(0.9, rate(req_latency_seconds[5m]))`,
	`histogram_quantile(0.5, sum by (job) (rate(req_latency_seconds[5m])))`,
	`histogram_quantile(0.99, rate(req_nhcb_seconds[5m]))`,
	`histogram_quantile(0.75, sum(rate(req_latency_float_seconds[10m])))`,
	`histogram_count(rate(req_latency_seconds[5m]))`,
	`histogram_sum(rate(req_latency_float_seconds[5m]))`,
	`histogram_avg(rate(req_nhcb_seconds[5m]))`,
	`histogram_fraction(0, 0.05, rate(req_latency_seconds[5m]))`,
	`histogram_fraction(0, 0.1, sum by (job) (rate(req_nhcb_seconds[5m])))`,
	`histogram_stddev(req_latency_seconds{job="api"})`,
	`sum by (job) (req_latency_seconds)`,
	`sum(rate(req_latency_seconds[5m])) / sum(rate(req_latency_float_seconds[5m]))`,
	`max_over_time(histogram_count(req_latency_seconds)[20m:1m])`,
	`hist_stale`,
	`count_over_time(hist_stale[10m])`,
	`last_over_time(hist_stale[10m])`,
	`mixed_metric`,
	`count_over_time(mixed_metric[30m])`,
	`histogram_count(mixed_metric)`,
	`irate(req_latency_seconds{job="api"}[1m])`,
	`avg_over_time(req_latency_float_seconds[10m])`,
	`sum_over_time(req_nhcb_seconds{instance="i0"}[5m])`,
	`req_latency_seconds offset 30m`,
	`histogram_quantile(0.9, req_nhcb_seconds)`,
	`histogram_stdvar(rate(req_nhcb_seconds[5m]))`,
	`req_latency_float_seconds * 2`,
	`req_latency_seconds / 4`,
	`count by (job) (req_latency_seconds)`,
	`avg(rate(req_latency_seconds[5m]))`,
	`topk(2, req_latency_seconds)`,
	`req_latency_seconds > 1`,
	`label_replace(req_latency_seconds, "x", "$1", "instance", "i(.*)")`,
}

// TestHistogramQueriesMatchPrometheus writes native histograms (integer,
// float, NHCB, a reset, a stale marker, a series changing type) by remote
// write and requires every query of histogramQueries, instant and range,
// to answer what the promql engine answers over the same data in
// Prometheus' own histogram chunks.
func TestHistogramQueriesMatchPrometheus(t *testing.T) {
	start := time.Now().Add(-dsSpan - 10*time.Minute).Truncate(time.Hour).UnixMilli()
	end := start + dsSpan.Milliseconds()
	series := genHistograms(start, end)
	node := newTesseraNode(t, time.UnixMilli(end+30_000), Options{})
	node.remoteWriteMixed(t, series, start, end)
	ref := &refStorage{}
	for _, s := range series {
		ref.addMixed(t, s)
	}
	engine := promql.NewEngine(testOptions(Options{}).resolved().engineOpts())
	instants := []int64{start + 30*60*1000, start + 60*60*1000 + 60_000, start + 75*60*1000 + 4_321, start + 92*60*1000, end}
	ranges := []struct {
		start, end int64
		step       time.Duration
	}{{start, end, 2 * time.Minute}, {start + 47*60*1000 + 13_000, start + 113*60*1000, 37 * time.Second}}
	total, nonEmpty := 0, 0
	for qi, q := range histogramQueries {
		t.Run(q, func(t *testing.T) {
			for i, ts := range instants {
				p := url.Values{"query": {q}, "time": {fmtTime(ts, (qi+i)%2 == 0)}}
				qry, err := engine.NewInstantQuery(context.Background(), ref, nil, q, time.UnixMilli(ts))
				require.NoError(t, err)
				total++
				if compareResult(t, node.srv.URL, "/api/v1/query", p, q, qry.Exec(context.Background())) {
					nonEmpty++
				}
				qry.Close()
			}
			for _, r := range ranges {
				p := url.Values{"query": {q}, "start": {fmtTime(r.start, false)}, "end": {fmtTime(r.end, true)},
					"step": {strconv.FormatFloat(r.step.Seconds(), 'f', -1, 64)}}
				qry, err := engine.NewRangeQuery(context.Background(), ref, nil, q, time.UnixMilli(r.start), time.UnixMilli(r.end), r.step)
				require.NoError(t, err)
				total++
				if compareResult(t, node.srv.URL, "/api/v1/query_range", p, q, qry.Exec(context.Background())) {
					nonEmpty++
				}
				qry.Close()
			}
		})
	}
	t.Logf("%d comparisons, %d with a non-empty result", total, nonEmpty)
	require.Greater(t, nonEmpty, total*3/4, "the comparison must mostly compare data, not empty answers")
}

// /api/v1/series lists a series that holds only native histograms in the
// range (the series set finds its samples through both iterators).
func TestSeriesListsHistogramOnlySeries(t *testing.T) {
	start := time.Now().Add(-time.Hour).Truncate(time.Minute).UnixMilli()
	end := start + 10*60*1000
	series := []mseries{{lset: labels.FromStrings("__name__", "only_hist", "k", "v"),
		samples: []msample{{t: start + 1000, h: &histogram.Histogram{Count: 1, PositiveSpans: []histogram.Span{{Length: 1}}, PositiveBuckets: []int64{1}}}}}}
	node := newTesseraNode(t, time.UnixMilli(end), Options{})
	node.remoteWriteMixed(t, series, start, end)
	code, got := get(t, node.srv.URL, "/api/v1/series", url.Values{"match[]": {"only_hist"},
		"start": {fmtTime(start, false)}, "end": {fmtTime(end, false)}})
	require.Equal(t, http.StatusOK, code)
	require.JSONEq(t, `[{"__name__":"only_hist","k":"v"}]`, string(got.Data))
}
