package rollup

import "fmt"

// What Window and HWindow share beyond their values: the span of samples
// a window holds, and what merging and extrapolating need of it. Merge,
// Range and Rate and their histogram twins keep their own value handling
// and share the rest here, so the two cannot drift apart in the rules of
// time order, empty windows or promql's extrapolation.

// span is a window's place in time and the samples it holds.
type span struct {
	End           int64
	Count         uint64
	FirstT, LastT int64
	Stale         bool
}

// window is what the shared helpers ask of Window and HWindow.
type window[W any] interface {
	span() span
	// retimed is the window with End and Stale set.
	retimed(end int64, stale bool) W
}

func (w Window) span() span {
	return span{End: w.End, Count: w.Count, FirstT: w.First.T, LastT: w.Last.T, Stale: w.Stale}
}

func (w Window) retimed(end int64, stale bool) Window {
	w.End, w.Stale = end, stale
	return w
}

func (w HWindow) span() span {
	return span{End: w.End, Count: w.Count, FirstT: w.First.T, LastT: w.Last.T, Stale: w.Stale}
}

func (w HWindow) retimed(end int64, stale bool) HWindow {
	w.End, w.Stale = end, stale
	return w
}

// windowRef is a pointer to a Window or an HWindow, for encodeWindows:
// it reads End and checks a window in place, where span would copy it.
type windowRef[W any] interface {
	*W
	end() int64
	// check is what a window must keep to be encoded, and what its
	// decoder checks of what it read.
	check(res int64) error
}

func (w *Window) end() int64  { return w.End }
func (w *HWindow) end() int64 { return w.End }

// mergeTrivial is the part of Merge every kind of window shares: b must
// follow a (ErrOrder otherwise), and where either holds no samples the
// merge is the other, with b's End and Stale. done is false when both
// hold samples and the caller must merge their values.
func mergeTrivial[W window[W]](a, b W) (m W, done bool, err error) {
	as, bs := a.span(), b.span()
	if bs.End < as.End || (as.Count > 0 && bs.Count > 0 && bs.FirstT <= as.LastT) {
		return m, true, fmt.Errorf("%w: window ending %d (last sample %d) before window ending %d (first sample %d)",
			ErrOrder, as.End, as.LastT, bs.End, bs.FirstT)
	}
	switch {
	case bs.Count == 0:
		return a.retimed(bs.End, bs.Stale), true, nil
	case as.Count == 0:
		return b, true, nil
	}
	return m, false, nil
}

// rangeOf merges the windows ending in (start, end] with merge: Range
// and RangeHistograms.
func rangeOf[W window[W]](windows []W, start, end int64, merge func(a, b W) (W, error)) (w W, ok bool, err error) {
	for _, x := range windows {
		if e := x.span().End; e <= start || e > end {
			continue
		}
		if !ok {
			w, ok = x, true
			continue
		}
		if w, err = merge(w, x); err != nil {
			var zero W
			return zero, false, err
		}
	}
	return w, ok, nil
}

// extrapolation is the factor promql's extrapolatedRate multiplies a
// range's raw increase by (result: Last - First + Resets, or a
// histogram's Count of it), for a window s of at least two samples over
// (start, end]. first is the first sample's value (a histogram's Count);
// counter selects rate and increase's zero-point bound (delta: false);
// perSecond divides by the range, as rate does.
func extrapolation(s span, start, end int64, first, result float64, counter, perSecond bool) float64 {
	durationToStart := float64(s.FirstT-start) / 1000
	durationToEnd := float64(end-s.LastT) / 1000
	sampledInterval := float64(s.LastT-s.FirstT) / 1000
	avg := sampledInterval / float64(s.Count-1)
	threshold := avg * 1.1
	if durationToStart >= threshold {
		durationToStart = avg / 2
	}
	if counter {
		durationToZero := durationToStart
		if result > 0 && first >= 0 {
			durationToZero = sampledInterval * (first / result)
		}
		if durationToZero < durationToStart {
			durationToStart = durationToZero
		}
	}
	if durationToEnd >= threshold {
		durationToEnd = avg / 2
	}
	factor := 1.0
	if sampledInterval != 0 {
		factor = (sampledInterval + durationToStart + durationToEnd) / sampledInterval
	}
	if perSecond {
		factor /= float64(end-start) / 1000
	}
	return factor
}

// badResolution is the error of Compute, Coarsen and their histogram
// twins for a resolution res <= 0. They test res themselves, so the
// compiler knows res > 0 in their loops and divides by it without a
// check for -1.
func badResolution(res int64) error {
	return fmt.Errorf("rollup: resolution must be > 0 ms, got %d", res)
}

// windowsFor is the slice Compute and ComputeHistograms fill from n
// samples (t: the timestamp of sample i): room for one window per
// resolution step the samples span, at most one per sample. A hint only:
// they refuse unordered input as they read it.
func windowsFor[W any](n int, res int64, t func(i int) int64) []W {
	if n == 0 {
		return nil
	}
	span := uint64(t(n-1)) - uint64(t(0))
	return make([]W, 0, min(uint64(n), span/uint64(res)+2))
}

// notAfter is the error of raw sample i, at t, that does not follow the
// sample before it, at prev: Compute and ComputeHistograms take strictly
// increasing timestamps.
func notAfter(i int, t, prev int64) error {
	return fmt.Errorf("rollup: sample %d at %d is not after sample %d at %d", i, t, i-1, prev)
}
