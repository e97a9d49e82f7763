package promapi

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
)

// dataset is a generated scrape history shaped like what Prometheus
// remote-writes: counters with resets, classic histograms, gauges with odd
// values, series ended by staleness markers, sparse series, and label
// values that need JSON escaping. Timestamps carry scrape jitter.
type dataset struct {
	start, end int64 // ms, inclusive bounds of all samples
	series     []memSeries
}

const (
	dsSpan   = 3 * time.Hour
	dsScrape = 15 * time.Second
)

func genDataset(start int64) *dataset {
	rng := rand.New(rand.NewPCG(5, 1))
	d := &dataset{start: start, end: start + dsSpan.Milliseconds()}
	step := dsScrape.Milliseconds()
	// times returns jittered scrape times every interval from a random
	// phase, in [from, to).
	times := func(from, to, interval int64) []int64 {
		var ts []int64
		for t := from + rng.Int64N(interval); t < to; t += interval {
			ts = append(ts, t+rng.Int64N(40)-20)
		}
		return ts
	}
	add := func(ls labels.Labels, samples []tsample) {
		d.series = append(d.series, memSeries{lset: ls, samples: samples})
	}

	// Counters: http_requests_total, one of them reset mid-way.
	for _, job := range []string{"api", "db", "web"} {
		for inst := range 4 {
			for _, method := range []string{"GET", "POST"} {
				for _, code := range []string{"200", "500"} {
					ls := labels.FromStrings("__name__", "http_requests_total", "job", job,
						"instance", fmt.Sprintf("i%d", inst), "method", method, "code", code)
					rate := 0.5 + rng.Float64()*20
					if code == "500" {
						rate /= 10
					}
					v := rng.Float64() * 1000
					var ss []tsample
					for _, t := range times(d.start, d.end, step) {
						v += rng.ExpFloat64() * rate * 15
						if job == "db" && inst == 1 && method == "GET" && code == "200" && t > d.start+90*60*1000 && v > 0 {
							v, rate = rng.Float64(), rate*2 // restart: counter reset
						}
						ss = append(ss, tsample{t, v})
					}
					add(ls, ss)
				}
			}
		}
	}

	// A classic histogram: cumulative _bucket counters, _sum, _count.
	les := []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, math.Inf(1)}
	for _, job := range []string{"api", "db", "web"} {
		for inst := range 2 {
			scale := 0.05 + rng.Float64()
			ts := times(d.start, d.end, step)
			counts := make([]float64, len(les))
			sum := 0.0
			buckets := make([][]tsample, len(les))
			var sums, cnts []tsample
			for _, t := range ts {
				for range rng.IntN(30) {
					obs := rng.ExpFloat64() * scale
					sum += obs
					for i, le := range les {
						if obs <= le {
							counts[i]++
						}
					}
				}
				for i := range les {
					buckets[i] = append(buckets[i], tsample{t, counts[i]})
				}
				sums = append(sums, tsample{t, sum})
				cnts = append(cnts, tsample{t, counts[len(les)-1]})
			}
			base := []string{"job", job, "instance", fmt.Sprintf("i%d", inst)}
			for i, le := range les {
				add(labels.FromStrings(append([]string{"__name__", "request_duration_seconds_bucket",
					"le", strconv.FormatFloat(le, 'g', -1, 64)}, base...)...), buckets[i])
			}
			add(labels.FromStrings(append([]string{"__name__", "request_duration_seconds_sum"}, base...)...), sums)
			add(labels.FromStrings(append([]string{"__name__", "request_duration_seconds_count"}, base...)...), cnts)
		}
	}

	// Gauges with a 30 s interval.
	for inst := range 4 {
		ls := labels.FromStrings("__name__", "node_temp", "instance", fmt.Sprintf("i%d", inst))
		phase := rng.Float64() * 6
		var ss []tsample
		for _, t := range times(d.start, d.end, 2*step) {
			ss = append(ss, tsample{t, 40 + 10*math.Sin(phase+float64(t-d.start)/6e5) + rng.NormFloat64()})
		}
		add(ls, ss)
	}

	// Values whose formatting is special: NaN (not a staleness marker),
	// infinities, tiny and huge magnitudes. Not -0: remote write cannot
	// carry it (proto3 omits a value that == 0, so it arrives as +0).
	{
		specials := []float64{math.NaN(), math.Inf(1), math.Inf(-1), 0, 1e-9, 3.5e22, -2.5e-7, 0.1, 123456789.125}
		var ss []tsample
		for i, t := range times(d.start, d.end, 4*step) {
			ss = append(ss, tsample{t, specials[i%len(specials)]})
		}
		add(labels.FromStrings("__name__", "odd_values", "kind", "specials"), ss)
	}

	// Series ended by Prometheus' staleness marker.
	{
		stale := math.Float64frombits(value.StaleNaN)
		mk := func(inst string, until, resume int64, marker bool) {
			var ss []tsample
			for _, t := range times(d.start, d.end, step) {
				if t >= until && (resume == 0 || t < resume) {
					continue
				}
				ss = append(ss, tsample{t, float64(t-d.start) / 1000})
			}
			if marker {
				// The marker goes at the first scrape the target missed.
				i, _ := slices.BinarySearchFunc(ss, until, func(s tsample, t int64) int { return int(s.t - t) })
				ss = slices.Insert(ss, i, tsample{until + 7, stale})
			}
			add(labels.FromStrings("__name__", "stale_metric", "instance", inst), ss)
		}
		mk("i0", d.start+60*60*1000, 0, true)                    // ends at 1h
		mk("i1", d.start+120*60*1000, d.start+140*60*1000, true) // pauses 2h..2h20m
		mk("i2", d.start+90*60*1000, 0, false)                   // just stops at 1h30m
	}

	// Sparse: one sample every 10 minutes, longer than the lookback.
	{
		var ss []tsample
		for _, t := range times(d.start, d.end, 10*60*1000) {
			ss = append(ss, tsample{t, rng.Float64() * 100})
		}
		add(labels.FromStrings("__name__", "sparse_metric", "job", "batch"), ss)
	}

	// Integral counters (the storage's integer mode) and labels that need
	// escaping in JSON.
	{
		var ss []tsample
		v := 0.0
		for _, t := range times(d.start, d.end, step) {
			v += float64(rng.IntN(5))
			ss = append(ss, tsample{t, v})
		}
		add(labels.FromStrings("__name__", "jobs_done_total", "path", "/a\"b<c>&d\\e\nf", "unit", "温度 °C"), ss)
	}
	return d
}

// samplesUntil counts samples, for sizing sanity checks.
func (d *dataset) numSamples() int {
	n := 0
	for _, s := range d.series {
		n += len(s.samples)
	}
	return n
}
