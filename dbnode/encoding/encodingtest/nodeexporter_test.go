package encodingtest

import (
	"bytes"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestNodeExporterShape checks the properties the benchmarks rely on: a
// fixed seed gives the same data, series are sorted by ID, and the shape is
// what the data set claims (10 s scrapes with a little jitter, most series
// changing at every scrape).
func TestNodeExporterShape(t *testing.T) {
	cfg := DefaultNodeExporter
	cfg.Hosts = 3
	a, b := NodeExporter(cfg), NodeExporter(cfg)
	require.Equal(t, a, b, "same seed, same data")

	var changing, deltas, onTime int
	for i, s := range a {
		if i > 0 {
			require.Negative(t, bytes.Compare(a[i-1].ID, s.ID), "sorted by ID")
		}
		require.Len(t, s.T, cfg.Samples)
		require.Len(t, s.V, cfg.Samples)
		changes := 0
		for j := 1; j < len(s.T); j++ {
			d := s.T[j] - s.T[j-1]
			require.InDelta(t, cfg.Interval, d, 10)
			deltas++
			if d == cfg.Interval {
				onTime++
			}
			if math.Float64bits(s.V[j]) != math.Float64bits(s.V[j-1]) {
				changes++
			}
		}
		if changes >= (len(s.T)-1)*9/10 {
			changing++
		}
	}
	t.Logf("%d series, %d change at 90%%+ of scrapes; %.1f%% of deltas exactly %d ms",
		len(a), changing, 100*float64(onTime)/float64(deltas), cfg.Interval)
	require.Greater(t, changing, len(a)/2, "most series change at every scrape")
	require.Greater(t, onTime, deltas*3/4, "most scrapes on time")
	require.Less(t, onTime, deltas, "some jitter")
}
