package remote

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/prometheus/prometheus/prompb"
	"github.com/stretchr/testify/require"

	"github.com/tessera-tsdb/tessera/dbnode/rollup"
)

// increase is Prometheus' reset-corrected increase over samples (before
// extrapolation): last - first plus the value before each drop.
func increase(ts []int64, vs []float64, from, to int64) (float64, int) {
	var first, prev float64
	n, inc := 0, 0.0
	for i, t := range ts {
		if t <= from || t > to {
			continue
		}
		if n == 0 {
			first = vs[i]
		} else if vs[i] < prev {
			inc += prev
		}
		prev = vs[i]
		n++
	}
	return prev - first + inc, n
}

// TestCounterShapeKeepsIncrease: over random counters with resets
// anywhere (inside windows, at their edges, several in one window, to
// values above and below the one before), Prometheus' increase over the
// counter shape of every whole-window range equals its increase over
// the raw samples, and every sample answered is raw's but for the reset
// samples.
func TestCounterShapeKeepsIncrease(t *testing.T) {
	const res = 60_000
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		var raw []rollup.Sample
		v := rng.Float64() * 10
		for ts := int64(rng.IntN(5000)); ts < 30*res; ts += 1000 + int64(rng.IntN(9000)) {
			switch r := rng.IntN(20); {
			case r == 0:
				v = 0
			case r == 1:
				v = rng.Float64() * v
			default:
				v += rng.Float64() * float64(1+rng.IntN(30))
			}
			raw = append(raw, rollup.Sample{T: ts, V: v})
		}
		ws, err := rollup.Compute(raw, res)
		require.NoError(t, err)
		fs, _, inexact := RollupSamples(nil, nil, ws, nil, ShapeCounter, 0, math.MaxInt64)
		require.Empty(t, inexact)
		rt, rv := make([]int64, len(raw)), make([]float64, len(raw))
		for i, s := range raw {
			rt[i], rv[i] = s.T, s.V
		}
		gt, gv := make([]int64, len(fs)), make([]float64, len(fs))
		for i, s := range fs {
			gt[i], gv[i] = s.Timestamp, s.Value
			if i > 0 {
				require.Less(t, gt[i-1], gt[i])
			}
		}
		for from := int64(0); from < 30*res; from += res {
			for to := from + res; to <= 30*res; to += res {
				want, n := increase(rt, rv, from, to)
				got, m := increase(gt, gv, from, to)
				require.InDelta(t, want, got, 1e-9*math.Max(1, math.Abs(want)), "round %d (%d, %d]", round, from, to)
				require.LessOrEqual(t, m, 2*n, "round %d: at most first, last and two reset samples a window", round)
			}
		}
	}
}

func TestShapeForHints(t *testing.T) {
	const res = 300_000
	for _, c := range []struct {
		h     *prompb.ReadHints
		shape Shape
		exact bool
	}{
		{nil, ShapeSamples, true},
		{&prompb.ReadHints{Func: "rate", StartMs: 0, EndMs: 3600_000, StepMs: 900_000, RangeMs: 900_000}, ShapeCounter, true},
		{&prompb.ReadHints{Func: "rate", StartMs: 1, EndMs: 3600_000, StepMs: 900_000, RangeMs: 900_000}, ShapeCounter, true}, // Prometheus 3's left-open range
		{&prompb.ReadHints{Func: "rate", StartMs: 2, EndMs: 3600_000, StepMs: 900_000, RangeMs: 900_000}, ShapeCounter, false},
		{&prompb.ReadHints{Func: "increase", StartMs: 0, EndMs: 3600_000, StepMs: 60_000, RangeMs: 900_000}, ShapeCounter, false},
		{&prompb.ReadHints{Func: "max_over_time", StartMs: 0, EndMs: 3600_000, StepMs: 900_000, RangeMs: 600_000}, ShapeMax, true},
		{&prompb.ReadHints{Func: "min_over_time", StartMs: 7, EndMs: 3600_000, StepMs: 900_000, RangeMs: 600_000}, ShapeMin, false},
		{&prompb.ReadHints{Func: "sum_over_time", StartMs: 0, EndMs: 3600_000, StepMs: 900_000, RangeMs: 300_000}, ShapeSum, true},
		{&prompb.ReadHints{Func: "sum", StartMs: 0, EndMs: 3600_000, StepMs: 900_000}, ShapeSamples, true},
		{&prompb.ReadHints{Func: "quantile_over_time", StartMs: 0, EndMs: 3600_000, StepMs: 900_000, RangeMs: 900_000}, ShapeSamples, false},
		{&prompb.ReadHints{Func: "avg_over_time", StartMs: 0, EndMs: 3600_000, StepMs: 900_000, RangeMs: 300_000}, ShapeAvg, true},
		{&prompb.ReadHints{Func: "avg_over_time", StartMs: 0, EndMs: 3600_000, StepMs: 900_000, RangeMs: 900_000}, ShapeAvg, false},
		{&prompb.ReadHints{Func: "count_over_time", StartMs: 0, EndMs: 3600_000, StepMs: 900_000, RangeMs: 900_000}, ShapeSamples, false},
	} {
		shape, why := ShapeFor(c.h, res)
		require.Equal(t, c.shape, shape, "%v", c.h)
		require.Equal(t, c.exact, why == "", "%v: %s", c.h, why)
	}
}
