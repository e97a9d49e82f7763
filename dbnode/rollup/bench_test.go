package rollup

import (
	"math/rand/v2"
	"testing"
)

// benchSeries is one day of a counter scraped every 30 s with jitter.
func benchSeries() []Sample {
	rng := rand.New(rand.NewPCG(26, 4))
	var out []Sample
	v := 0.0
	for ts := int64(0); ts < 24*3600_000; ts += 30_000 {
		v += float64(rng.IntN(1000))
		out = append(out, Sample{ts + rng.Int64N(500), v})
	}
	return out
}

// BenchmarkCompute: the cost of rolling raw samples up to 5m windows,
// reported per raw sample (ns/sample) to set against ingest's cost.
func BenchmarkCompute(b *testing.B) {
	samples := benchSeries()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Compute(samples, 300_000); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(samples)), "ns/sample")
}

// BenchmarkComputeEncode: Compute and Encode together, per raw sample.
func BenchmarkComputeEncode(b *testing.B) {
	samples := benchSeries()
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		ws, err := Compute(samples, 300_000)
		if err != nil {
			b.Fatal(err)
		}
		if buf, err = Encode(buf[:0], 300_000, ws); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(samples)), "ns/sample")
}

// BenchmarkCoarsen: a day's 5m windows to 1h ones (the next level of a
// rollup chain), per input window.
func BenchmarkCoarsen(b *testing.B) {
	ws, err := Compute(benchSeries(), 300_000)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Coarsen(ws, 3600_000); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(ws)), "ns/window")
}
