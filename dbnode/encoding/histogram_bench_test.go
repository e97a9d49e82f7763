package encoding

import (
	"slices"
	"sync"
	"testing"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/tessera-tsdb/tessera/dbnode/encoding/encodingtest"
)

// histSeries is one series of the histogram benchmark data.
type histSeries struct {
	t []int64
	h []*histogram.Histogram
}

var (
	histDataOnce sync.Once
	histData     []histSeries
)

// latencyData is encodingtest's latency histograms (DefaultLatency: 50
// series of 120 samples at schema 3), converted once.
func latencyData() []histSeries {
	histDataOnce.Do(func() {
		for _, s := range encodingtest.LatencyHistograms(encodingtest.DefaultLatency) {
			histData = append(histData, histSeries{t: s.T, h: s.H})
		}
	})
	return histData
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
