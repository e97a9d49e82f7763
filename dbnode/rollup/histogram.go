package rollup

import (
	"fmt"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/value"
)

// HSample is one raw native histogram sample.
type HSample struct {
	T int64
	H *histogram.FloatHistogram
}

// HWindow is the rollup of one series' native histogram samples with
// End-resolution < t <= End: their Count and Sum (sum_over_time), First
// and Last, and Resets, the sum of the histograms just before each counter
// reset (curr.DetectReset(prev), which trusts the samples' counter reset
// hints before it compares buckets). As for floats, Last - First + Resets
// is the counter increase promql's histogramRate computes before
// extrapolation: where the engine drops the first sample because the
// second resets, it drops first and its reset correction together, which
// is the same value. EncodeHistograms stores them.
type HWindow struct {
	End    int64
	Count  uint64
	Sum    *histogram.FloatHistogram
	First  HSample
	Last   HSample
	Resets *histogram.FloatHistogram // nil: no reset
	Stale  bool
}

// addTo returns acc + h, acc copied first so no input is modified.
func addTo(acc, h *histogram.FloatHistogram) (*histogram.FloatHistogram, error) {
	if acc == nil {
		return h.Copy(), nil
	}
	out := acc.Copy()
	if _, _, _, err := out.Add(h); err != nil {
		return nil, err
	}
	return out, nil
}

// ComputeHistograms reduces one series' native histogram samples (strictly
// increasing timestamps; a stale marker is a sample whose H.Sum is
// StaleNaN, as Prometheus writes one) to windows of resolution res ms.
func ComputeHistograms(samples []HSample, res int64) ([]HWindow, error) {
	if res <= 0 {
		return nil, badResolution(res)
	}
	out := windowsFor[HWindow](len(samples), res, func(i int) int64 { return samples[i].T })
	for i, s := range samples {
		if i > 0 && s.T <= samples[i-1].T {
			return nil, notAfter(i, s.T, samples[i-1].T)
		}
		if s.H == nil {
			return nil, fmt.Errorf("rollup: sample %d at %d has no histogram", i, s.T)
		}
		end := windowEnd(s.T, res)
		if len(out) == 0 || out[len(out)-1].End != end {
			out = append(out, HWindow{End: end})
		}
		cur := &out[len(out)-1]
		if value.IsStaleNaN(s.H.Sum) {
			cur.Stale = true
			continue
		}
		cur.Stale = false
		var err error
		if cur.Count == 0 {
			cur.First = s
		} else if s.H.DetectReset(cur.Last.H) {
			if cur.Resets, err = addTo(cur.Resets, cur.Last.H); err != nil {
				return nil, fmt.Errorf("rollup: sample %d at %d: %w", i, s.T, err)
			}
		}
		if cur.Sum, err = addTo(cur.Sum, s.H); err != nil {
			return nil, fmt.Errorf("rollup: sample %d at %d: %w", i, s.T, err)
		}
		cur.Last = s
		cur.Count++
	}
	return out, nil
}

// MergeHistograms joins two windows whose samples are consecutive, a's
// before b's (see Merge).
func MergeHistograms(a, b HWindow) (HWindow, error) {
	if m, done, err := mergeTrivial(a, b); done {
		return m, err
	}
	m := HWindow{End: b.End, Count: a.Count + b.Count, First: a.First, Last: b.Last, Stale: b.Stale}
	var err error
	if m.Sum, err = addTo(a.Sum, b.Sum); err != nil {
		return HWindow{}, err
	}
	m.Resets = a.Resets
	if b.Resets != nil {
		if m.Resets, err = addTo(m.Resets, b.Resets); err != nil {
			return HWindow{}, err
		}
	}
	if b.First.H.DetectReset(a.Last.H) {
		if m.Resets, err = addTo(m.Resets, a.Last.H); err != nil {
			return HWindow{}, err
		}
	}
	return m, nil
}

// RangeHistograms merges the windows ending in (start, end] (see Range).
func RangeHistograms(windows []HWindow, start, end int64) (w HWindow, ok bool, err error) {
	return rangeOf(windows, start, end, MergeHistograms)
}

// CustomBoundsChange reports whether w holds custom-bucket (NHCB)
// histograms whose bounds are not all the same. Prometheus then
// reconciles bounds (their intersection) pair by pair as rate walks the
// samples, and leaves a first sample a reset follows out of it; a window
// keeps too little to follow that, so the count and sum of a rate over
// it are the engine's, its buckets may not be (TestHistogramCustomBucketsMatchEngine).
func CustomBoundsChange(w HWindow) bool {
	if w.Count == 0 || !w.Last.H.UsesCustomBuckets() {
		return false
	}
	cv := w.Last.H.CustomValues
	for _, h := range []*histogram.FloatHistogram{w.First.H, w.Sum, w.Resets} {
		if h != nil && !histogram.CustomBucketBoundsMatch(h.CustomValues, cv) {
			return true
		}
	}
	return false
}

// RateHistograms is promql's rate (perSecond) or increase of native
// histograms over (start, end] from the range's merged window: Last -
// First + Resets, extrapolated as for floats with the histograms' Count
// for the zero point, as a gauge histogram. ok is false where the engine
// returns no value (fewer than two samples).
func RateHistograms(w HWindow, start, end int64, perSecond bool) (*histogram.FloatHistogram, bool, error) {
	if w.Count < 2 {
		return nil, false, nil
	}
	h, err := w.Last.H.CopyToSchema(min(w.Last.H.Schema, w.First.H.Schema))
	if err != nil {
		return nil, false, err
	}
	if _, _, _, err := h.Sub(w.First.H); err != nil {
		return nil, false, err
	}
	if w.Resets != nil {
		if _, _, _, err := h.Add(w.Resets); err != nil {
			return nil, false, err
		}
	}
	h.Mul(extrapolation(w.span(), start, end, w.First.H.Count, h.Count, true, perSecond))
	h.CounterResetHint = histogram.GaugeType
	return h.Compact(0), true, nil
}
