// Package rollup computes and encodes the per-window aggregates a rollup
// namespace holds for one series (issue 26, docs/rollups.md): the
// deterministic reduction of a sealed block's raw float samples to one
// Window per resolution step, and the compact versioned encoding of a
// series' windows (docs/format/rollup.md). It knows nothing of storage or
// queries; the wiring (flush, repair, query selection) calls it.
//
// # Windows
//
// A window of resolution r ending at End (a multiple of r, in Unix
// milliseconds) covers the raw samples with End-r < t <= End: left-open,
// right-closed, the way a Prometheus 3 range selector [r] evaluated at End
// selects (t-r, t]. So a range function evaluated at a window-aligned time
// over a window-aligned range reads exactly the samples of whole windows,
// and a rollup can answer it from the windows alone.
//
// A source block is [B, B+size), so the sample at exactly B (if any)
// belongs to the window ending at B, whose other samples are in the
// previous block. Compute over one block therefore yields, besides the
// block's own windows (End in (B, B+size]), at most one window with
// End == B holding that single sample, and the window ending at B+size
// lacks a sample at exactly B+size. Both halves are partial windows of the
// same End computed from adjacent blocks; Merge(earlier, later) joins them
// exactly, so the wiring can store each block's output as computed and
// merge windows of equal End when it reads (or when it rolls a window up
// further): both are deterministic, every replica holds the same bytes.
//
// # Aggregates
//
// Per window, over its raw float samples in time order, with Prometheus
// stale markers (value.StaleNaN) skipped exactly as the PromQL engine
// skips them when it loads a range:
//
//   - Count, Sum (Kahan-compensated, as sum_over_time), Min and Max (NaN
//     only when every sample is NaN: Prometheus' min/max_over_time rule),
//     First and Last (timestamp and value).
//   - Resets: the sum of the values just before each counter reset (a
//     sample lower than its predecessor) inside the window. The window's
//     reset-aware counter increase is Increase() = Last.V - First.V +
//     Resets, the very expression Prometheus' extrapolatedRate computes
//     (including its behaviour with NaN values, which a sum of per-pair
//     deltas would not reproduce).
//   - Stale: the window's last raw point is a stale marker (the series
//     ended inside the window, after Last), so a plain selector evaluated
//     at End finds no value, as in Prometheus. A window holding only
//     stale markers has Count 0 and Stale set; a window with no raw point
//     at all is not emitted.
//
// # Reconstructing rate and increase
//
// For a range (S, E] with S and E multiples of r, the windows ending in
// (S, E] hold exactly the range's samples. Merging them in order gives the
// range's Count, First, Last and Resets: between windows a and b the edge
// is a reset when b.First.V < a.Last.V, which adds a.Last.V to Resets, as
// Prometheus' loop would at that pair. Prometheus' rate, increase and
// delta need nothing else: resultValue = Last.V - First.V + Resets
// (counters), durationToStart = First.T - S, durationToEnd = E - Last.T,
// sampledInterval = Last.T - First.T, average interval = sampledInterval /
// (Count-1), the counter zero-point clamp from First.V and resultValue.
// Rate below is that formula over merged windows; it equals the engine's
// result over the raw samples (the test compares with the engine).
// Created-timestamp (ST) resets are not kept: Tessera does not store
// start timestamps.
//
// Native histograms: ComputeHistograms, MergeHistograms, RangeHistograms
// and RateHistograms do the same per window (Count, Sum as a histogram,
// First, Last, Resets as the sum of the histograms before each reset),
// held to the engine's rate, increase, sum_over_time and
// histogram_quantile; EncodeHistograms/DecodeHistograms store them.
package rollup
