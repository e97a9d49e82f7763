package remote

import (
	"fmt"
	"math"
	"time"

	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/prompb"

	"github.com/tessera-tsdb/tessera/dbnode/rollup"
)

// Remote read of time only a rollup covers (issue 26, docs/rollups.md
// "Remote read"). Prometheus reading remotely evaluates PromQL itself
// over the samples it gets, so a rollup's windows are answered as
// samples chosen so that Prometheus' own evaluation over them is the
// answer over raw data where it can be: per window its raw first and
// last samples (a plain selector at a window end sees the last one, a
// counter's resets across window edges fall between two real samples),
// and, where the read hints name a function whose answer is one
// aggregate per window, that aggregate instead.

// Shape is what a rollup window is answered as.
type Shape uint8

const (
	// ShapeSamples is each window's raw first and last samples, and a
	// stale marker at the end of a window whose series ended in it.
	ShapeSamples Shape = iota
	// ShapeCounter is ShapeSamples with, inside a window that holds a
	// counter reset, one or two samples that give Prometheus' reset
	// correction the window's own (rollup.Window.Resets), so rate and
	// increase over whole windows see the raw increase.
	ShapeCounter
	// ShapeMax, ShapeMin and ShapeSum are one sample per window at its
	// last sample's time: its Max, Min or Sum. Shapes from ShapeMax on
	// answer no stale markers: range functions drop them.
	ShapeMax
	ShapeMin
	ShapeSum
	// ShapeAvg is one sample per window at its last sample's time: its
	// mean. Prometheus' avg_over_time over several windows then weighs
	// them alike, not by their sample counts: close for a steady scrape,
	// not exact.
	ShapeAvg
)

func (s Shape) String() string {
	switch s {
	case ShapeCounter:
		return "counter"
	case ShapeMax:
		return "max"
	case ShapeMin:
		return "min"
	case ShapeSum:
		return "sum"
	case ShapeAvg:
		return "avg"
	}
	return "samples"
}

// ShapeFor is the shape answering a query with these read hints from a
// rollup of resolution res (ms), and why the answer is not exact ("":
// it is Prometheus' answer over raw data, for series with samples
// throughout each range; see docs/rollups.md). Prometheus sets
// hints.Func to the innermost function or aggregation around the
// selector and hints.Range to its range (0 for an instant vector).
func ShapeFor(h *prompb.ReadHints, res int64) (Shape, string) {
	if h == nil {
		return ShapeSamples, ""
	}
	d := time.Duration(res) * time.Millisecond
	aligned := func() string {
		// A range selector's first step: Prometheus 3 sends the range's
		// start as first step - range + 1 (the range is left-open), 2.x
		// as first step - range. An instant vector's would need the
		// lookback, which is not sent: its last step is taken.
		onEdge := h.EndMs%res == 0
		if h.RangeMs > 0 {
			first := h.StartMs + h.RangeMs
			onEdge = first%res == 0 || (first-1)%res == 0
		}
		if !onEdge || h.StepMs%res != 0 || h.RangeMs%res != 0 {
			return fmt.Sprintf("steps or range not whole %s windows (step %dms, range %dms): a window is indivisible", d, h.StepMs, h.RangeMs)
		}
		return ""
	}
	if h.RangeMs == 0 {
		return ShapeSamples, aligned()
	}
	switch h.Func {
	case "rate", "increase":
		return ShapeCounter, aligned()
	case "delta", "last_over_time", "present_over_time":
		return ShapeSamples, aligned()
	case "max_over_time":
		return ShapeMax, aligned()
	case "min_over_time":
		return ShapeMin, aligned()
	case "sum_over_time":
		return ShapeSum, aligned()
	case "avg_over_time":
		why := aligned()
		if why == "" && h.RangeMs != res {
			why = fmt.Sprintf("avg_over_time over more than one %s rollup window weighs each window's mean alike, not by its sample count", d)
		}
		return ShapeAvg, why
	case "":
		return ShapeSamples, fmt.Sprintf("a range selector over %s rollup windows holds each window's first and last samples only", d)
	}
	return ShapeSamples, fmt.Sprintf("%s needs samples a %s rollup does not keep (it keeps per window count, sum, min, max, first, last and resets); answered from each window's first and last samples", h.Func, d)
}

// RollupSamples appends to fs and hs the samples of shape standing for
// the windows of one series, those in [from, to] (windows in End order;
// a histogram window only contributes its first and last samples, or
// its sum for ShapeSum). inexact says why some are not exact ("": all
// are).
func RollupSamples(fs []prompb.Sample, hs []prompb.Histogram, ws []rollup.Window, hws []rollup.HWindow, shape Shape, from, to int64) ([]prompb.Sample, []prompb.Histogram, string) {
	var inexact string
	add := func(t int64, v float64) {
		if t >= from && t <= to && (len(fs) == 0 || fs[len(fs)-1].Timestamp < t) {
			fs = append(fs, prompb.Sample{Timestamp: t, Value: v})
		}
	}
	for _, w := range ws {
		if w.Count == 0 {
			if w.Stale && shape <= ShapeCounter {
				add(w.End, math.Float64frombits(value.StaleNaN))
			}
			continue
		}
		switch shape {
		case ShapeMax:
			add(w.Last.T, w.Max)
			continue
		case ShapeMin:
			add(w.Last.T, w.Min)
			continue
		case ShapeSum:
			add(w.Last.T, w.Sum)
			continue
		case ShapeAvg:
			add(w.Last.T, w.Sum/float64(w.Count))
			continue
		}
		add(w.First.T, w.First.V)
		if shape == ShapeCounter && w.Resets != 0 {
			if !resetSamples(add, w) {
				inexact = "a window's counter reset falls between samples under 3 ms apart; its increase is not kept"
			}
		}
		add(w.Last.T, w.Last.V)
		if w.Stale {
			add(w.End, math.Float64frombits(value.StaleNaN))
		}
	}
	addH := func(t int64, h prompb.Histogram) {
		if t >= from && t <= to && (len(hs) == 0 || hs[len(hs)-1].Timestamp < t) {
			hs = append(hs, h)
		}
	}
	for _, w := range hws {
		if w.Count == 0 {
			continue
		}
		if shape == ShapeSum {
			addH(w.Last.T, prompb.FromFloatHistogram(w.Last.T, w.Sum))
			continue
		}
		addH(w.First.T, prompb.FromFloatHistogram(w.First.T, w.First.H))
		addH(w.Last.T, prompb.FromFloatHistogram(w.Last.T, w.Last.H))
		if shape == ShapeCounter && w.Resets != nil {
			inexact = "a native histogram counter reset inside a window: its increase is not kept in the samples answered"
		}
		if rollup.CustomBoundsChange(w) {
			inexact = "custom-bucket histograms whose bounds change inside a window: answered from its first and last histograms"
		}
		if shape == ShapeMax || shape == ShapeMin {
			inexact = "min/max_over_time of native histograms has no value (as over raw data); answered from each window's first and last samples"
		}
		if shape == ShapeAvg {
			inexact = "avg_over_time of native histograms is answered from each window's first and last samples"
		}
	}
	return fs, hs, inexact
}

// resetSamples adds between w's first and last samples the values that
// make Prometheus' reset correction over first, them and last equal
// w.Resets (the sum of the values before each drop inside the window):
// the first drop inside a window is from a value >= First.V, so Resets
// >= First.V and a rise to Resets, then a drop (to Last.V when it is
// lower, else to 0 and a rise to Last.V), adds exactly Resets. Where
// the window's own first and last already do it (a single drop), none.
// false: no room between the two timestamps.
func resetSamples(add func(int64, float64), w rollup.Window) bool {
	if w.Last.V < w.First.V && w.Resets == w.First.V {
		return true // the engine sees the drop from first to last itself
	}
	span := w.Last.T - w.First.T
	if w.Last.V < w.Resets {
		if span < 2 {
			return false
		}
		add(w.First.T+span/2, w.Resets)
		return true
	}
	if span < 3 {
		return false
	}
	add(w.First.T+span/3, w.Resets)
	add(w.First.T+2*span/3, 0)
	return true
}
