package storage

import (
	"bytes"
	"fmt"
	"math"
	"math/rand"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/value"
	"github.com/stretchr/testify/require"
)

// sealRollupWrites is a day of writes, the same for every database of
// TestRollupFromSealEqualsFromVolumes, with the ticks between them:
// counters with resets on window and block edges, gauges with NaN, -0
// and stale markers (one alone in its window, one on a block edge),
// native histograms, samples sent out of order, and cold writes into
// sealed, flushed blocks (new samples of an existing series and a series
// first written after the seal).
func sealRollupWrites(t *testing.T, db *Database, clk *clock) {
	t.Helper()
	rng := rand.New(rand.NewSource(26))
	const h = 3600_000
	base := ms(t0)
	var series [][]byte
	for i := range 30 {
		series = append(series, sid("x_total", "i", fmt.Sprint(i)))
	}
	value1 := func(i int, ts int64) float64 {
		switch {
		case i%3 == 0: // a counter reset on block and window edges
			if ts%(2*h) == 0 || ts%(2*h) == 5*60_000 {
				return float64(i)
			}
			return float64(ts-base)/1000 + float64(i)
		case i == 4 && ts == base+2*h:
			return math.Float64frombits(value.StaleNaN) // on a block edge
		case i == 5 && ts >= base+h && ts < base+h+5*60_000:
			return math.Float64frombits(value.StaleNaN) // a window of stale markers only
		case i == 7 && ts%(7*60_000) == 0:
			return math.NaN()
		case i == 8 && ts%(11*60_000) == 0:
			return math.Copysign(0, -1)
		}
		return rng.NormFloat64() * 1e6
	}
	// writes sends [from, to) of every series, every 30 s plus a jitter,
	// in four shuffled batches (several streams per bucket).
	writes := func(from, to int64) {
		var batch []Sample
		for ts := from; ts < to; ts += 30_000 {
			for i, id := range series {
				t := ts
				if i%2 == 1 && ts > from {
					t -= int64(i) * 100 // not on the window grid
				}
				batch = append(batch, Sample{ID: id, Shard: db.Shard(id), T: t, V: value1(i, t)})
			}
		}
		rng.Shuffle(len(batch), func(i, j int) { batch[i], batch[j] = batch[j], batch[i] })
		for k := range 4 {
			require.NoError(t, db.WriteBatch("default", batch[k*len(batch)/4:(k+1)*len(batch)/4]))
		}
		var hb []HistogramSample
		for ts := from + 15_000; ts < to; ts += 60_000 {
			for _, id := range [][]byte{sid("lat", "job", "a"), sid("lat", "job", "b")} {
				i := int((ts - base) / 60_000)
				if i%5 == 4 {
					continue // one schema: see rollupInput
				}
				hb = append(hb, HistogramSample{ID: id, Shard: db.Shard(id), T: ts, H: testHist(i)})
			}
		}
		require.NoError(t, db.WriteHistograms("default", hb))
	}
	// Block 0 sealed and flushed alone, block 1's start in memory.
	writes(base, base+2*h)
	writes(base+2*h, base+2*h+10*60_000)
	require.NoError(t, db.Tick())
	// Block 1 flushed next to block 0 on disk.
	clk.Add(2 * time.Hour)
	writes(base+2*h+10*60_000, base+4*h)
	require.NoError(t, db.Tick())
	// Cold writes into block 0 (an existing series and one new one), and
	// blocks 2 to 5 flushed in one tick.
	late := sid("late_total", "job", "cold")
	require.NoError(t, db.WriteBatch("default", []Sample{
		{ID: series[1], Shard: db.Shard(series[1]), T: base + 2*h - 1, V: 42},
		{ID: late, Shard: db.Shard(late), T: base + 90*60_000, V: 1},
		{ID: late, Shard: db.Shard(late), T: base + 2*h - 1000, V: 0.5},
	}))
	clk.Add(8 * time.Hour)
	writes(base+4*h, base+12*h)
	require.NoError(t, db.Tick())
	for range 3 {
		require.NoError(t, db.Tick())
	}
}

// rollupEntries lists every rollup namespace's stored entries: namespace,
// shard, block, series ID and payload bytes.
func rollupEntries(t *testing.T, db *Database) []string {
	t.Helper()
	var out []string
	for _, ns := range []string{"r5m", "r1h"} {
		for _, sh := range db.namespaces[ns].allShards() {
			for _, bs := range sh.blockStarts() {
				require.NoError(t, sh.reader(bs).RangeData(func(id, data []byte) error {
					out = append(out, fmt.Sprintf("%s/%d/%d/%q/%x", ns, sh.id, bs, id, data))
					return nil
				}))
			}
		}
	}
	return out
}

// The rollups computed from the samples a flush seals write the same
// bytes as those computed from the flushed volumes (sealOff) and as a
// backfill over the same raw blocks: every replica, whichever path
// computed its rollups, holds the same bytes.
func TestRollupFromSealEqualsFromVolumes(t *testing.T) {
	run := func(off bool) (*Database, []string) {
		clk := &clock{t: t0.Add(2*time.Hour + 11*time.Minute)}
		db := openDB(t, rollupOpts(t.TempDir(), clk))
		db.sealOff = off
		sealRollupWrites(t, db, clk)
		return db, rollupEntries(t, db)
	}
	seal, fromSeal := run(false)
	require.Greater(t, seal.sealedUsed, 10, "rollups took sealed samples")
	off, fromVolumes := run(true)
	require.Zero(t, off.sealedUsed)
	require.NotEmpty(t, fromSeal)
	require.Equal(t, len(fromVolumes), len(fromSeal))
	for i := range fromSeal {
		require.Equal(t, fromVolumes[i], fromSeal[i], "entry %d", i)
	}

	// The same raw blocks, the rollups added afterwards: the backfill.
	clk := &clock{t: t0.Add(2*time.Hour + 11*time.Minute)}
	dir := t.TempDir()
	raw := openDB(t, testOpts(dir, clk))
	sealRollupWrites(t, raw, clk)
	require.NoError(t, raw.Close())
	db := openDB(t, rollupOpts(dir, clk))
	for range 12 {
		require.NoError(t, db.Tick())
	}
	backfilled := rollupEntries(t, db)
	require.Equal(t, len(fromSeal), len(backfilled))
	for i := range fromSeal {
		require.True(t, bytes.Equal([]byte(fromSeal[i]), []byte(backfilled[i])), "entry %d: %s vs %s", i, fromSeal[i], backfilled[i])
	}
}
