package storage

import (
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A Tick with nothing to flush walks every series in memory (for the
// memory statistics and to find sealed blocks) without allocating per
// series: at a million series a snapshot slice per walk was 16 MB of
// garbage a tick, which the collector must make room for.
func TestTickWalksSeriesWithoutGarbage(t *testing.T) {
	clk := &clock{t: t0.Add(30 * time.Minute)}
	db := openDB(t, testOpts(t.TempDir(), clk))
	const numSeries = 20_000
	batch := make([]Sample, 0, numSeries)
	for i := range numSeries {
		id := sid("tick_alloc", "series", strconv.Itoa(i))
		batch = append(batch, Sample{ID: id, Shard: db.Shard(id), T: ms(t0) + 1000, V: float64(i)})
	}
	require.NoError(t, db.WriteBatch("default", batch))
	require.NoError(t, db.Tick()) // the first tick may size what it keeps

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	const ticks = 5
	for range ticks {
		require.NoError(t, db.Tick())
	}
	runtime.ReadMemStats(&after)
	perTick := (after.TotalAlloc - before.TotalAlloc) / ticks
	t.Logf("%d bytes allocated per tick with %d series", perTick, numSeries)
	// Two snapshots per tick were 2*8 bytes per series; allow a quarter
	// of one pointer per series for the rest of a tick's work.
	require.Less(t, perTick, uint64(numSeries*8/4), "bytes allocated per tick with %d series", numSeries)
}
