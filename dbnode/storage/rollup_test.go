package storage

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"

	"github.com/tessera-tsdb/tessera/dbnode/rollup"
)

// rollupOpts are testOpts plus a 5m rollup of default (4h blocks, so one
// rollup block holds two source blocks) and a 1h rollup of the 5m one.
func rollupOpts(dir string, clk *clock) Options {
	o := testOpts(dir, clk)
	o.Namespaces = append(o.Namespaces,
		NamespaceOptions{Name: "r5m", RollupOf: "default", Resolution: 5 * time.Minute, Retention: 96 * time.Hour,
			BlockSize: 4 * time.Hour, BufferPast: 10 * time.Minute, BufferFuture: 2 * time.Minute, Index: true},
		NamespaceOptions{Name: "r1h", RollupOf: "r5m", Resolution: time.Hour, Retention: 200 * time.Hour,
			BlockSize: 8 * time.Hour, BufferPast: 10 * time.Minute, BufferFuture: 2 * time.Minute, Index: true},
	)
	return o
}

// rollupInput writes a counter with a reset (one sample exactly on the
// source block edge t0+2h) and a native histogram counter over [t0, t0+4h).
func rollupInput(t *testing.T, db *Database) (ctr []rollup.Sample, hs []rollup.HSample) {
	t.Helper()
	cid, hid := sid("reqs_total", "job", "a"), sid("lat", "job", "a")
	var batch []Sample
	v := 0.0
	for ts := ms(t0); ts < ms(t0)+4*3600_000; ts += 30_000 {
		v += float64(ts%7) + 0.5
		if ts == ms(t0)+2*3600_000+150_000 {
			v = 1 // a reset inside a window
		}
		batch = append(batch, Sample{ID: cid, Shard: db.Shard(cid), T: ts, V: v})
		ctr = append(ctr, rollup.Sample{T: ts, V: v})
	}
	require.NoError(t, db.WriteBatch("default", batch))
	var hb []HistogramSample
	for i, ts := 0, ms(t0)+15_000; ts < ms(t0)+4*3600_000; i, ts = i+1, ts+60_000 {
		h := testHist(i)
		if i%5 == 4 {
			continue // floats only, one schema: keep the histogram windows one kind
		}
		hb = append(hb, HistogramSample{ID: hid, Shard: db.Shard(hid), T: ts, H: h})
		hs = append(hs, rollup.HSample{T: ts, H: h.ToFloat(nil)})
	}
	require.NoError(t, db.WriteHistograms("default", hb))
	return ctr, hs
}

func TestRollupComputedAtFlush(t *testing.T) {
	clk := &clock{t: t0.Add(4 * time.Hour)}
	dir := t.TempDir()
	db := openDB(t, rollupOpts(dir, clk))
	ctr, hs := rollupInput(t, db)
	cid, hid := sid("reqs_total", "job", "a"), sid("lat", "job", "a")

	// Seal both source blocks: the 4h rollup block then has both halves.
	clk.Add(11 * time.Minute)
	require.NoError(t, db.Tick())

	want, err := rollup.Compute(ctr, 5*60_000)
	require.NoError(t, err)
	got, err := db.ReadRollup("r5m", cid, ms(t0), ms(t0)+4*3600_000)
	require.NoError(t, err)
	require.Equal(t, want, got.Windows, "5m windows of the counter equal Compute over the raw samples")
	require.Equal(t, int64(5*60_000), got.Resolution)

	wantH, err := rollup.ComputeHistograms(hs, 5*60_000)
	require.NoError(t, err)
	gotH, err := db.ReadRollup("r5m", hid, ms(t0), ms(t0)+4*3600_000)
	require.NoError(t, err)
	require.Len(t, gotH.HWindows, len(wantH))
	for i := range wantH {
		require.Equal(t, wantH[i].End, gotH.HWindows[i].End)
		require.Equal(t, wantH[i].Count, gotH.HWindows[i].Count)
		require.True(t, wantH[i].Sum.Equals(gotH.HWindows[i].Sum), "window %d sum", i)
	}

	// The 1h level is coarsened from the 5m windows: equal to Compute at
	// 1h over raw but for the rounding of sums.
	want1h, err := rollup.Compute(ctr, 3600_000)
	require.NoError(t, err)
	got1h, err := db.ReadRollup("r1h", cid, ms(t0), ms(t0)+4*3600_000)
	require.NoError(t, err)
	require.Len(t, got1h.Windows, len(want1h))
	for i, w := range want1h {
		g := got1h.Windows[i]
		require.InEpsilon(t, w.Sum, g.Sum, 1e-12)
		w.Sum, g.Sum = 0, 0
		require.Equal(t, w, g)
	}

	// The index finds the rollup's series by the source's tags.
	rs, err := db.QueryRollup(context.Background(), "r5m", []*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, "job", "a")}, ms(t0), ms(t0)+4*3600_000, QueryOptions{})
	require.NoError(t, err)
	require.Len(t, rs, 2)
	// ScanRollup hands over the same series and windows (each worker
	// decodes into its own reused buffer: copied here), with their index.
	var (
		mu      sync.Mutex
		scanned = make([]RollupSeries, len(rs))
	)
	require.NoError(t, db.ScanRollup(context.Background(), "r5m", []*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, "job", "a")}, ms(t0), ms(t0)+4*3600_000, QueryOptions{},
		func(i int, s RollupSeries) error {
			mu.Lock()
			defer mu.Unlock()
			s.Windows = append([]rollup.Window(nil), s.Windows...)
			scanned[i] = s
			return nil
		}))
	require.Equal(t, rs, scanned)

	st := db.RollupStatuses()
	require.Len(t, st, 2)
	require.Equal(t, "r5m", st[0].Namespace)
	require.Equal(t, t0.Add(4*time.Hour), st[0].RolledUpTo)
	require.Equal(t, 11*time.Minute, st[0].Lag)
	require.Equal(t, int64(2), st[0].Blocks, "one rollup volume per rollup block (08:00 and 12:00) the flush fed")

	// Nothing writes to a rollup namespace but its source's flushes.
	err = db.WriteBatch("r5m", []Sample{{ID: cid, Shard: db.Shard(cid), T: ms(t0) + 1, V: 1}})
	require.ErrorIs(t, err, ErrUnknownNamespace)
	require.ErrorContains(t, err, "rollup namespace")
	// Query (remote read, series) reads each window's first and last
	// samples: the last sample of the range is the raw one.
	its, err := db.Query(context.Background(), "r5m", []*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, "__name__", "reqs_total")}, ms(t0), ms(t0)+4*3600_000-1, QueryOptions{})
	require.NoError(t, err)
	require.Len(t, its, 1)
	var last tv
	n := 0
	for its[0].Values.Next() {
		last.T, last.V = its[0].Values.At()
		n++
	}
	require.NoError(t, its[0].Values.Err())
	require.Equal(t, tv{T: ctr[len(ctr)-1].T, V: ctr[len(ctr)-1].V}, last)
	require.Equal(t, 2*len(want)-1, n, "first and last of each window (the one at t0 has one sample)")

	// A restart serves the same windows from disk.
	require.NoError(t, db.Close())
	db2 := openDB(t, rollupOpts(dir, clk))
	again, err := db2.ReadRollup("r5m", cid, ms(t0), ms(t0)+4*3600_000)
	require.NoError(t, err)
	require.Equal(t, want, again.Windows)
}

// Two databases given the same samples in different batches write the
// same rollup bytes: what lets replicas compare rollups by digest.
func TestRollupBytesDeterministic(t *testing.T) {
	payload := func(split bool) [][]byte {
		clk := &clock{t: t0.Add(2 * time.Hour)}
		db := openDB(t, rollupOpts(t.TempDir(), clk))
		if split {
			// Flush the first source block alone, then the second: the
			// rollup block is written twice, the second time from both.
			cid := sid("reqs_total", "job", "a")
			var b1, b2 []Sample
			for ts := ms(t0); ts < ms(t0)+4*3600_000; ts += 30_000 {
				s := Sample{ID: cid, Shard: db.Shard(cid), T: ts, V: float64(ts % 1000003)}
				if ts < ms(t0)+2*3600_000 {
					b1 = append(b1, s)
				} else {
					b2 = append(b2, s)
				}
			}
			require.NoError(t, db.WriteBatch("default", b1))
			clk.Add(11 * time.Minute)
			require.NoError(t, db.Tick())
			clk.Add(2*time.Hour - 11*time.Minute)
			require.NoError(t, db.WriteBatch("default", b2))
			clk.Add(11 * time.Minute)
			require.NoError(t, db.Tick())
		} else {
			cid := sid("reqs_total", "job", "a")
			var b []Sample
			for ts := ms(t0); ts < ms(t0)+4*3600_000; ts += 30_000 {
				b = append(b, Sample{ID: cid, Shard: db.Shard(cid), T: ts, V: float64(ts % 1000003)})
			}
			clk.Add(2 * time.Hour)
			require.NoError(t, db.WriteBatch("default", b))
			clk.Add(11 * time.Minute)
			require.NoError(t, db.Tick())
		}
		var out [][]byte
		for _, ns := range []string{"r5m", "r1h"} {
			n := db.namespaces[ns]
			for _, sh := range n.allShards() {
				for _, bs := range sh.blockStarts() {
					require.NoError(t, sh.reader(bs).RangeData(func(id, data []byte) error {
						out = append(out, append(append([]byte(ns+"/"), id...), data...))
						return nil
					}))
				}
			}
		}
		return out
	}
	a, b := payload(false), payload(true)
	require.NotEmpty(t, a)
	require.Equal(t, len(a), len(b))
	for i := range a {
		require.True(t, bytes.Equal(a[i], b[i]), "entry %d differs", i)
	}
}

// Source blocks expire before the rollup's: a re-flush of a block whose
// predecessor is gone keeps that predecessor's half of the edge window.
func TestRollupSpliceKeepsExpiredHalf(t *testing.T) {
	ops := winOps[rollup.Window]{
		end: func(w rollup.Window) int64 { return w.End }, firstT: func(w rollup.Window) int64 { return w.First.T },
		lastT: func(w rollup.Window) int64 { return w.Last.T }, count: func(w rollup.Window) uint64 { return w.Count }, merge: rollup.Merge,
	}
	win := func(end, t int64, v float64) rollup.Window {
		return rollup.Window{End: end, Count: 1, Sum: v, Min: v, Max: v, First: rollup.Sample{T: t, V: v}, Last: rollup.Sample{T: t, V: v}}
	}
	prev := []rollup.Window{win(100, 90, 1), win(200, 150, 2), win(300, 250, 9)}
	fresh := []rollup.Window{win(200, 200, 3), win(300, 250, 4)}
	inRange := func(e int64) bool { return e >= 200 && e <= 300 }
	out, err := splice(prev, fresh, inRange, map[int64]bool{200: true}, ops)
	require.NoError(t, err)
	require.Len(t, out, 3)
	require.Equal(t, win(100, 90, 1), out[0], "outside the changed block: kept")
	require.Equal(t, uint64(2), out[1].Count, "the edge window's halves merged")
	require.Equal(t, 5.0, out[1].Sum)
	require.Equal(t, win(300, 250, 4), out[2], "inside the changed block: recomputed")
	// Without the orphan mark the edge window is recomputed whole.
	out, err = splice(prev, fresh, inRange, nil, ops)
	require.NoError(t, err)
	require.Equal(t, win(200, 200, 3), out[1])
	// A kept edge window that already holds the sample at the edge wins.
	prev[1] = rollup.Window{End: 200, Count: 2, Sum: 5, Min: 2, Max: 3, First: rollup.Sample{T: 150, V: 2}, Last: rollup.Sample{T: 200, V: 3}}
	out, err = splice(prev, fresh, inRange, map[int64]bool{200: true}, ops)
	require.NoError(t, err)
	require.Equal(t, prev[1], out[1])
}

// A rollup namespace added over a source with flushed blocks backfills
// them, rollupBackfillPerTick per tick, and a restart resumes from the
// persisted cursor instead of starting over.
func TestRollupBackfillResumes(t *testing.T) {
	const blocks = 6
	clk := &clock{t: t0.Add(blocks * 2 * time.Hour)}
	dir := t.TempDir()
	raw := testOpts(dir, clk)
	db := openDB(t, raw)
	cid := sid("reqs_total", "job", "a")
	var ctr []rollup.Sample
	var batch []Sample
	for ts := ms(t0); ts < ms(t0)+blocks*2*3600_000; ts += 60_000 {
		batch = append(batch, Sample{ID: cid, Shard: db.Shard(cid), T: ts, V: float64(ts / 7000)})
		ctr = append(ctr, rollup.Sample{T: ts, V: float64(ts / 7000)})
	}
	require.NoError(t, db.WriteBatch("default", batch))
	clk.Add(11 * time.Minute)
	require.NoError(t, db.Tick())
	require.NoError(t, db.Tick()) // rotates and removes the flushed commit log
	require.NoError(t, db.Close())

	// Add the rollups: the first tick backfills four source blocks.
	opts := rollupOpts(dir, clk)
	db = openDB(t, opts)
	require.NoError(t, db.Tick())
	st := db.RollupStatuses()
	require.Equal(t, int64(rollupBackfillPerTick), st[0].Backfilled)
	require.Equal(t, t0.Add(rollupBackfillPerTick*2*time.Hour), st[0].Cursor)
	require.NoError(t, db.Close())

	// A restart resumes at the cursor: two blocks left.
	db = openDB(t, opts)
	require.NoError(t, db.Tick())
	st = db.RollupStatuses()
	require.Equal(t, int64(blocks-rollupBackfillPerTick), st[0].Backfilled)
	require.Equal(t, t0.Add(blocks*2*time.Hour), st[0].Cursor)
	require.NoError(t, db.Tick())
	require.Equal(t, int64(blocks-rollupBackfillPerTick), db.RollupStatuses()[0].Backfilled, "nothing left to backfill")

	want, err := rollup.Compute(ctr, 5*60_000)
	require.NoError(t, err)
	got, err := db.ReadRollup("r5m", cid, ms(t0), ms(t0)+blocks*2*3600_000)
	require.NoError(t, err)
	require.Equal(t, want, got.Windows, "every block rolled up once the backfill is done")
	// The 1h level backfills from the 5m one on the following ticks.
	for range 4 {
		require.NoError(t, db.Tick())
	}

	want1h, err := rollup.Compute(ctr, 3600_000)
	require.NoError(t, err)
	got1h, err := db.ReadRollup("r1h", cid, ms(t0), ms(t0)+blocks*2*3600_000)
	require.NoError(t, err)
	require.Len(t, got1h.Windows, len(want1h))
	for i, w := range want1h {
		g := got1h.Windows[i]
		require.InEpsilon(t, w.Sum, g.Sum, 1e-12)
		w.Sum, g.Sum = 0, 0
		require.Equal(t, w, g)
	}
}

// TestRollupChainInMemory: with the 1h level's blocks as long as the 5m
// level's, the flush hands the 5m windows just written to the 1h level
// in memory (writtenBlock) instead of reading the volume back; the 1h
// windows must equal those coarsened from the 5m volume on disk, and a
// shard holding histograms (read from disk) too.
func TestRollupChainInMemory(t *testing.T) {
	clk := &clock{t: t0.Add(4 * time.Hour)}
	opts := rollupOpts(t.TempDir(), clk)
	opts.Namespaces[len(opts.Namespaces)-1].BlockSize = 4 * time.Hour
	db := openDB(t, opts)
	rollupInput(t, db)
	clk.Add(11 * time.Minute)
	require.NoError(t, db.Tick())
	for _, id := range [][]byte{sid("reqs_total", "job", "a"), sid("lat", "job", "a")} {
		got5m, err := db.ReadRollup("r5m", id, ms(t0), ms(t0)+4*3600_000)
		require.NoError(t, err)
		want, err := rollup.Coarsen(got5m.Windows, 3600_000)
		require.NoError(t, err)
		got1h, err := db.ReadRollup("r1h", id, ms(t0), ms(t0)+4*3600_000)
		require.NoError(t, err)
		require.Equal(t, len(got5m.HWindows) > 0, len(got1h.HWindows) > 0)
		if len(want) == 0 {
			require.Empty(t, got1h.Windows)
			continue
		}
		require.NotEmpty(t, want)
		require.Equal(t, want, got1h.Windows)
	}
}
