package encodingtest

import (
	"math"
	"math/rand/v2"
	"slices"

	"github.com/prometheus/prometheus/model/histogram"
)

// HistogramSeries is one series of native histogram samples.
type HistogramSeries struct {
	T []int64
	H []*histogram.Histogram
}

// LatencyConfig shapes LatencyHistograms' data.
type LatencyConfig struct {
	Series  int    // series
	Samples int    // samples per series (120 = 30 minutes at 15 s)
	Seed    uint64 // same config, same data
	Start   int64  // ms; series' scrape offsets are added to it
}

// DefaultLatency is the data of the encoding's size benchmark.
var DefaultLatency = LatencyConfig{Series: 50, Samples: 120, Seed: 2, Start: 1_700_000_000_000}

// LatencyHistograms is a realistic native histogram data set: request
// latency histograms at schema 3, as client_golang exposes them, scraped
// every 15 s (a few milliseconds of jitter now and then). Each interval a
// series observes a Poisson-like number of log-normally distributed
// latencies, so bucket counts grow like real counters: about 20 populated
// buckets, a new one appearing now and then in the tails (a layout
// change), sums that are arbitrary floats.
func LatencyHistograms(cfg LatencyConfig) []HistogramSeries {
	rng := rand.New(rand.NewPCG(1, cfg.Seed))
	var out []HistogramSeries
	for s := 0; s < cfg.Series; s++ {
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
		for range 40 { // the process ran a while before
			observe()
		}
		var ser HistogramSeries
		t := cfg.Start + int64(s*997)
		for i := 0; i < cfg.Samples; i++ {
			observe()
			jit := int64(0)
			if rng.IntN(8) == 0 {
				jit = int64(rng.IntN(7)) - 3
			}
			ser.T = append(ser.T, t+int64(i)*15_000+jit)
			ser.H = append(ser.H, buildSchema3(counts, count, sum))
		}
		out = append(out, ser)
	}
	return out
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
