package encoding

import (
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
)

// histSeries is one series of the histogram benchmark data.
type histSeries struct {
	t []int64
	h []*histogram.Histogram
}

const (
	histBenchSeries  = 50
	histBenchSamples = 120 // one 30-minute block at 15 s
)

var (
	histDataOnce sync.Once
	histData     []histSeries
)

// latencyData is a realistic native histogram data set: request latency
// histograms at schema 3, as client_golang exposes them, scraped every 15 s
// (a few milliseconds of jitter now and then), 120 samples per series. Each
// interval a series observes a Poisson-like number of log-normally
// distributed latencies, so bucket counts grow like real counters: about
// 20 populated buckets, a new one appearing now and then in the tails (a
// layout change), sums that are arbitrary floats.
func latencyData() []histSeries {
	histDataOnce.Do(func() {
		rng := rand.New(rand.NewPCG(1, 2))
		for s := 0; s < histBenchSeries; s++ {
			rate := 20 + rng.Float64()*380           // requests per interval
			mu := math.Log(0.02 + rng.Float64()*0.1) // median latency 20-120 ms
			sigma := 0.15 + rng.Float64()*0.1
			counts := map[int]uint64{}
			var count uint64
			var sum float64
			observe := func() {
				n := int(rate * (0.8 + 0.4*rng.Float64()))
				for range n {
					v := math.Exp(mu + sigma*rng.NormFloat64())
					counts[int(math.Ceil(math.Log2(v)*8))]++
					count++
					sum += v
				}
			}
			for range 40 { // the process ran a while before the block
				observe()
			}
			var ser histSeries
			t := int64(1_700_000_000_000 + s*997)
			for i := 0; i < histBenchSamples; i++ {
				observe()
				jit := int64(0)
				if rng.IntN(8) == 0 {
					jit = int64(rng.IntN(7)) - 3
				}
				ser.t = append(ser.t, t+int64(i)*15_000+jit)
				ser.h = append(ser.h, buildSchema3(counts, count, sum))
			}
			histData = append(histData, ser)
		}
	})
	return histData
}

// buildSchema3 lays out bucket counts as client_golang does: spans join
// buckets separated by at most two empty ones.
func buildSchema3(counts map[int]uint64, count uint64, sum float64) *histogram.Histogram {
	idx := make([]int, 0, len(counts))
	for k := range counts {
		idx = append(idx, k)
	}
	slices.Sort(idx)
	h := &histogram.Histogram{Schema: 3, ZeroThreshold: 2.938735877055719e-39, Count: count, Sum: sum}
	var prevAbs int64
	for i, k := range idx {
		switch {
		case i == 0:
			h.PositiveSpans = append(h.PositiveSpans, histogram.Span{Offset: int32(k), Length: 1})
		case k-idx[i-1] <= 3:
			for range k - idx[i-1] - 1 { // fill the gap with empty buckets
				h.PositiveBuckets = append(h.PositiveBuckets, -prevAbs)
				prevAbs = 0
				h.PositiveSpans[len(h.PositiveSpans)-1].Length++
			}
			h.PositiveSpans[len(h.PositiveSpans)-1].Length++
		default:
			h.PositiveSpans = append(h.PositiveSpans, histogram.Span{Offset: int32(k - idx[i-1] - 1), Length: 1})
		}
		abs := int64(counts[k])
		h.PositiveBuckets = append(h.PositiveBuckets, abs-prevAbs)
		prevAbs = abs
	}
	return h
}

func histSampleCount(data []histSeries) int {
	n := 0
	for _, s := range data {
		n += len(s.t)
	}
	return n
}

// encodeOurs encodes each series as one stream.
func encodeOurs(tb testing.TB, data []histSeries, float bool) [][]byte {
	var out [][]byte
	for _, s := range data {
		e := NewHistogramEncoder()
		for i, t := range s.t {
			var err error
			if float {
				err = e.AppendFloatHistogram(t, s.h[i].ToFloat(nil))
			} else {
				err = e.AppendHistogram(t, s.h[i])
			}
			if err != nil {
				tb.Fatal(err)
			}
		}
		out = append(out, slices.Clone(e.Bytes()))
	}
	return out
}

// encodeProm encodes each series with Prometheus' own histogram chunk
// encodings, cutting or recoding chunks as its appender asks.
func encodeProm(tb testing.TB, data []histSeries, float bool) [][]byte {
	var out [][]byte
	for _, s := range data {
		var c chunkenc.Chunk
		if float {
			c = chunkenc.NewFloatHistogramChunk()
		} else {
			c = chunkenc.NewHistogramChunk()
		}
		app, err := c.Appender()
		if err != nil {
			tb.Fatal(err)
		}
		for i, t := range s.t {
			var nc chunkenc.Chunk
			var recoded bool
			if float {
				nc, recoded, app, err = app.AppendFloatHistogram(nil, 0, t, s.h[i].ToFloat(nil), false)
			} else {
				nc, recoded, app, err = app.AppendHistogram(nil, 0, t, s.h[i], false)
			}
			if err != nil {
				tb.Fatal(err)
			}
			if nc != nil {
				if !recoded {
					out = append(out, c.Bytes())
				}
				c = nc
			}
		}
		out = append(out, c.Bytes())
	}
	return out
}

func totalLen(bs [][]byte) int {
	n := 0
	for _, b := range bs {
		n += len(b)
	}
	return n
}

// BenchmarkHistogramSize reports bytes per histogram sample of this
// encoding and of Prometheus' chunks on the same data; the timing is
// meaningless.
func BenchmarkHistogramSize(b *testing.B) {
	data := latencyData()
	n := float64(histSampleCount(data))
	ours, prom := totalLen(encodeOurs(b, data, false)), totalLen(encodeProm(b, data, false))
	oursF, promF := totalLen(encodeOurs(b, data, true)), totalLen(encodeProm(b, data, true))
	var buckets int
	for _, s := range data {
		for _, h := range s.h {
			buckets += len(h.PositiveBuckets)
		}
	}
	for b.Loop() {
	}
	b.ReportMetric(float64(buckets)/n, "buckets/sample")
	b.ReportMetric(float64(ours)/n, "B/sample-int")
	b.ReportMetric(float64(prom)/n, "B/sample-int-prometheus")
	b.ReportMetric(float64(oursF)/n, "B/sample-float")
	b.ReportMetric(float64(promF)/n, "B/sample-float-prometheus")
}

func BenchmarkHistogramEncode(b *testing.B) {
	data := latencyData()
	n := histSampleCount(data)
	e := NewHistogramEncoder()
	b.ReportAllocs()
	cpu0 := cpuTime()
	for b.Loop() {
		for _, s := range data {
			e.Reset()
			for i, t := range s.t {
				if err := e.AppendHistogram(t, s.h[i]); err != nil {
					b.Fatal(err)
				}
			}
			_ = e.Bytes()
		}
	}
	perSample(b, n, cpu0)
}

func BenchmarkHistogramEncodePrometheus(b *testing.B) {
	data := latencyData()
	n := histSampleCount(data)
	b.ReportAllocs()
	cpu0 := cpuTime()
	for b.Loop() {
		encodeProm(b, data, false)
	}
	perSample(b, n, cpu0)
}

func BenchmarkHistogramDecode(b *testing.B) {
	data := latencyData()
	n := histSampleCount(data)
	streams := encodeOurs(b, data, false)
	b.ReportAllocs()
	var h *histogram.Histogram
	var sink uint64
	cpu0 := cpuTime()
	for b.Loop() {
		for _, st := range streams {
			it := NewHistogramIterator(st)
			for it.Next() {
				_, h = it.AtHistogram(h)
				sink += h.Count
			}
			if it.Err() != nil {
				b.Fatal(it.Err())
			}
		}
	}
	perSample(b, n, cpu0)
	_ = sink
}

func BenchmarkHistogramDecodePrometheus(b *testing.B) {
	data := latencyData()
	n := histSampleCount(data)
	chunks := encodeProm(b, data, false)
	b.ReportAllocs()
	var h *histogram.Histogram
	var sink uint64
	var it chunkenc.Iterator
	cpu0 := cpuTime()
	for b.Loop() {
		for _, cb := range chunks {
			c, err := chunkenc.FromData(chunkenc.EncHistogram, cb)
			if err != nil {
				b.Fatal(err)
			}
			it = c.Iterator(it)
			for it.Next() == chunkenc.ValHistogram {
				_, h = it.AtHistogram(h)
				sink += h.Count
			}
			if it.Err() != nil {
				b.Fatal(it.Err())
			}
		}
	}
	perSample(b, n, cpu0)
	_ = sink
}

// TestHistogramBenchDataRoundTrips keeps the benchmark honest: its data
// decodes back exactly, from both encodings.
func TestHistogramBenchDataRoundTrips(t *testing.T) {
	data := latencyData()[:5]
	for si, st := range encodeOurs(t, data, false) {
		var want []hsample
		for i, ts := range data[si].t {
			want = append(want, hsample{t: ts, h: data[si].h[i]})
		}
		requireHistSamples(t, want, NewHistogramIterator(st), true)
	}
}
