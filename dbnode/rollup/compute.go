package rollup

import (
	"errors"
	"fmt"
	"math"

	"github.com/prometheus/prometheus/model/value"
)

// Sample is one raw float sample: Unix milliseconds and value.
type Sample struct {
	T int64
	V float64
}

// Window is the aggregate of one series' raw samples with
// End-resolution < t <= End (see the package doc for each field's exact
// meaning).
type Window struct {
	End    int64
	Count  uint64
	Sum    float64
	Min    float64
	Max    float64
	First  Sample
	Last   Sample
	Resets float64
	Stale  bool
}

// Increase is the window's reset-aware counter increase between First
// and Last, as Prometheus' increase computes it before extrapolation.
func (w Window) Increase() float64 {
	if w.Count == 0 {
		return 0
	}
	return w.Last.V - w.First.V + w.Resets
}

// windowEnd is the End of the window of resolution res holding t: the
// smallest multiple of res >= t.
func windowEnd(t, res int64) int64 {
	q := t / res
	if t%res > 0 {
		q++ // t > 0 not a multiple; for t < 0 Go's division already rounds up
	}
	return q * res
}

// Compute reduces one series' raw samples (strictly increasing
// timestamps) to its windows of resolution res milliseconds, in End order.
// Stale markers are skipped but mark their window Stale when they are its
// last point.
func Compute(samples []Sample, res int64) ([]Window, error) {
	if res <= 0 {
		return nil, badResolution(res)
	}
	out := windowsFor[Window](len(samples), res, func(i int) int64 { return samples[i].T })
	var cur *Window
	var comp float64 // Kahan compensation of cur.Sum
	for i, s := range samples {
		if i > 0 && s.T <= samples[i-1].T {
			return nil, notAfter(i, s.T, samples[i-1].T)
		}
		end := windowEnd(s.T, res)
		if cur == nil || cur.End != end {
			if cur != nil {
				cur.Sum += comp
			}
			out = append(out, Window{End: end})
			cur = &out[len(out)-1]
			comp = 0
		}
		if value.IsStaleNaN(s.V) {
			cur.Stale = true
			continue
		}
		cur.Stale = false
		if cur.Count == 0 {
			cur.First, cur.Min, cur.Max = s, s.V, s.V
		} else {
			if s.V < cur.Last.V {
				cur.Resets += cur.Last.V
			}
			if s.V < cur.Min || math.IsNaN(cur.Min) {
				cur.Min = s.V
			}
			if s.V > cur.Max || math.IsNaN(cur.Max) {
				cur.Max = s.V
			}
		}
		cur.Sum, comp = kahanInc(s.V, cur.Sum, comp)
		cur.Last = s
		cur.Count++
	}
	if cur != nil {
		cur.Sum += comp
	}
	return out, nil
}

// kahanInc adds inc to sum with compensation c (Neumaier's variant, as
// the PromQL engine's sum_over_time).
func kahanInc(inc, sum, c float64) (newSum, newC float64) {
	t := sum + inc
	switch {
	case math.IsInf(t, 0):
		c = 0
	case math.Abs(sum) >= math.Abs(inc):
		c += (sum - t) + inc
	default:
		c += (inc - t) + sum
	}
	return t, c
}

// ErrOrder is returned by Merge when the later window's samples do not
// all follow the earlier one's.
var ErrOrder = errors.New("rollup: windows merged out of time order")

// Merge joins two windows whose raw samples are consecutive, a's before
// b's: the two partial windows of one End computed from adjacent blocks,
// or the windows of a finer resolution making up a coarser one. The
// result has b's End. It is exact: it equals Compute over the union of
// the samples, up to floating-point rounding of Sum and Resets.
func Merge(a, b Window) (Window, error) {
	if m, done, err := mergeTrivial(a, b); done {
		return m, err
	}
	m := Window{
		End:    b.End,
		Count:  a.Count + b.Count,
		Sum:    a.Sum + b.Sum,
		Min:    a.Min,
		Max:    a.Max,
		First:  a.First,
		Last:   b.Last,
		Resets: a.Resets + b.Resets,
		Stale:  b.Stale,
	}
	if b.Min < m.Min || math.IsNaN(m.Min) {
		m.Min = b.Min
	}
	if b.Max > m.Max || math.IsNaN(m.Max) {
		m.Max = b.Max
	}
	if b.First.V < a.Last.V {
		m.Resets += a.Last.V
	}
	return m, nil
}

// Coarsen merges windows (in End order) into windows of resolution res,
// a multiple of theirs: the next rollup down a chain (5m -> 1h).
// Windows of equal End (the two halves of a block edge) merge too.
func Coarsen(windows []Window, res int64) ([]Window, error) {
	if res <= 0 {
		return nil, badResolution(res)
	}
	var out []Window
	for i, w := range windows {
		if i > 0 && w.End < windows[i-1].End {
			return nil, fmt.Errorf("window %d: %w: ends at %d after a window ending %d", i, ErrOrder, w.End, windows[i-1].End)
		}
		w.End = windowEnd(w.End, res)
		if n := len(out); n > 0 && out[n-1].End == w.End {
			m, err := Merge(out[n-1], w)
			if err != nil {
				return nil, fmt.Errorf("window %d: %w", i, err)
			}
			out[n-1] = m
			continue
		}
		out = append(out, w)
	}
	return out, nil
}

// Range merges the windows ending in (start, end] (windows in End order)
// into one: the aggregate of the raw samples of that range when start and
// end are multiples of the windows' resolution. ok is false when the range
// holds no window.
func Range(windows []Window, start, end int64) (w Window, ok bool, err error) {
	return rangeOf(windows, start, end, Merge)
}

// Rate is Prometheus' extrapolated rate/increase/delta (promql's
// extrapolatedRate, without start timestamps) over the range (start, end]
// computed from the range's merged window: counter selects the reset
// handling of rate and increase (delta: false), perSecond divides by the
// range as rate does. ok is false where the engine returns no value
// (fewer than two samples).
func Rate(w Window, start, end int64, counter, perSecond bool) (float64, bool) {
	if w.Count < 2 {
		return 0, false
	}
	result := w.Last.V - w.First.V
	if counter {
		result += w.Resets
	}
	return result * extrapolation(w.span(), start, end, w.First.V, result, counter, perSecond), true
}
