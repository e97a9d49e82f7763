package storage

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uber-go/tally/v4"
)

// The tick takes the memory gauges in its one walk over the series (one
// lock per series); they must be what a separate walk after the tick's
// flushes and expiry reports (the tick's second walk before tick30), for
// series of every fate: flushed and removed, flushed with memory left,
// expired, idle, and holding histograms.
func TestTickGaugesMatchAWalkAfterIt(t *testing.T) {
	clk := &clock{t: t0.Add(30 * time.Minute)}
	opts := testOpts(t.TempDir(), clk)
	opts.NumShards = 4
	scope := tally.NewTestScope("", nil)
	opts.Metrics = scope
	db := openDB(t, opts)

	expired := sid("tick_stats", "fate", "expired")
	require.NoError(t, db.WriteBatch("default", samples(db, expired, ms(t0)+1000)))

	// Retention is 48 h: the block of t0 is past it, the block at 48 h is
	// sealed (written cold), the one at 50 h is open.
	clk.Add(50 * time.Hour)
	sealed, open := ms(t0.Add(48*time.Hour)), ms(t0.Add(50*time.Hour))
	flushedGone := sid("tick_stats", "fate", "flushed")
	flushedKept := sid("tick_stats", "fate", "flushed_and_open")
	idle := sid("tick_stats", "fate", "idle")
	hist := sid("tick_stats", "fate", "histogram")
	var batch []Sample
	batch = append(batch, samples(db, flushedGone, sealed+1000, sealed+2000)...)
	batch = append(batch, samples(db, flushedKept, sealed+1000, open+1000)...)
	batch = append(batch, samples(db, idle, open+1000, open+2000, open+3000)...)
	require.NoError(t, db.WriteBatch("default", batch))
	require.NoError(t, db.WriteHistograms("default", []HistogramSample{
		{ID: hist, Shard: db.Shard(hist), T: open + 1000, H: testHist(1)},
	}))

	gauge := func(name string) float64 {
		g, ok := scope.Snapshot().Gauges()[name+"+"]
		require.True(t, ok, "gauge %s", name)
		return g.Value()
	}
	for tick := range 2 { // the second has nothing to flush or expire
		require.NoError(t, db.Tick())

		var series, samples, bytes int
		for _, ns := range db.nsList {
			for _, sh := range ns.allShards() {
				for _, s := range sh.appendSeries(nil) {
					series++
					s.stats(func(_ int64, n, b int) { samples += n; bytes += b })
				}
			}
		}
		// Left in memory: the open sample of flushedKept, idle's three,
		// the histogram's one.
		require.Equal(t, 3, series, "tick %d: series left", tick)
		require.Equal(t, 5, samples, "tick %d: samples left", tick)
		require.Equal(t, float64(series), gauge("series_in_memory"), "tick %d", tick)
		require.Equal(t, float64(samples), gauge("samples_in_memory"), "tick %d", tick)
		require.Equal(t, float64(bytes), gauge("bytes_in_memory"), "tick %d", tick)
		require.Equal(t, float64(bytes)/float64(samples), gauge("bytes_per_sample"), "tick %d", tick)
	}
	require.Len(t, readAll(t, db, flushedGone, sealed, open+time.Hour.Milliseconds()), 2, "flushed samples read back")
}
