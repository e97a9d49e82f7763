package storage

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"
	"github.com/uber-go/tally/v4"

	"github.com/tessera-tsdb/tessera/dbnode/index"
	"github.com/tessera-tsdb/tessera/dbnode/memsnap"
)

// snapOpts are replayOpts (two namespaces, commit log files of 4 KiB)
// with restart snapshots on; the background loop is off, tests call
// WriteRestartSnapshot.
func snapOpts(dir string, clk *clock) Options {
	opts := replayOpts(dir, clk)
	opts.RestartSnapshot = true
	opts.RestartSnapshotEvery = time.Minute
	opts.RestartSnapshotLogBytes = 1 << 20
	return opts
}

// snapWorkload writes rounds [from, to) of numSeries series in both
// namespaces (round r writes timestamp r and rewrites r-2 with a new
// value) and, for every tenth series, a native histogram at 1000+r; want
// collects what each series must read back.
type snapWorkload struct {
	ids   [][]byte
	want  map[string]map[int64]float64
	hwant map[string][]hv
}

const snapSeries = 200

func newSnapWorkload() *snapWorkload {
	w := &snapWorkload{want: map[string]map[int64]float64{}, hwant: map[string][]hv{}}
	for i := range snapSeries {
		w.ids = append(w.ids, sid("snap_metric", "series", strconv.Itoa(i)))
	}
	for _, ns := range []string{"default", "other"} {
		for _, id := range w.ids {
			w.want[ns+string(id)] = map[int64]float64{}
		}
	}
	return w
}

func (w *snapWorkload) write(t *testing.T, db *Database, from, to int) {
	t.Helper()
	base := ms(t0)
	for r := from; r < to; r++ {
		for _, ns := range []string{"default", "other"} {
			var batch []Sample
			for i, id := range w.ids {
				for _, ts := range []int64{int64(r), int64(r - 2)} {
					if ts < 0 {
						continue
					}
					v := float64(i*1000 + r*10 + len(ns))
					batch = append(batch, Sample{ID: id, Shard: db.Shard(id), T: base + ts*1000, V: v})
					w.want[ns+string(id)][base+ts*1000] = v
				}
			}
			require.NoError(t, db.WriteBatch(ns, batch))
		}
		var hs []HistogramSample
		for i := 0; i < snapSeries; i += 10 {
			id := w.ids[i]
			h := HistogramSample{ID: id, Shard: db.Shard(id), T: base + 1_000_000 + int64(r)*1000}
			if (i+r)%2 == 0 {
				h.FH = testHist(i + r).ToFloat(nil)
			} else {
				h.H = testHist(i + r)
			}
			hs = append(hs, h)
			w.hwant[string(id)] = append(w.hwant[string(id)], histOf(h))
		}
		require.NoError(t, db.WriteHistograms("default", hs))
	}
}

// check reads every series of both namespaces back, floats, histograms
// and the index, and compares with want.
func (w *snapWorkload) check(t *testing.T, db *Database) {
	t.Helper()
	base := ms(t0)
	require.Equal(t, int64(2*snapSeries), db.ActiveSeries())
	for _, ns := range []string{"default", "other"} {
		for _, id := range w.ids {
			it, err := db.Read(ns, id, base, base+100_000)
			require.NoError(t, err)
			got := map[int64]float64{}
			for it.Next() {
				ts, v := it.At()
				got[ts] = v
			}
			require.NoError(t, it.Err())
			require.Equal(t, w.want[ns+string(id)], got, "namespace %s series %s", ns, id)
		}
		res, err := db.Query(context.Background(), ns, []*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, "__name__", "snap_metric")}, base, base+100_000, QueryOptions{})
		require.NoError(t, err)
		require.Len(t, res, snapSeries, "namespace %s", ns)
		// Each series under its own label too (the loaders' batches mix
		// the two namespaces' series).
		for i := 0; i < snapSeries; i += 37 {
			res, err := db.Query(context.Background(), ns, []*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, "series", strconv.Itoa(i))}, base, base+100_000, QueryOptions{})
			require.NoError(t, err)
			require.Len(t, res, 1, "namespace %s series %d", ns, i)
		}
	}
	for i := 0; i < snapSeries; i += 10 {
		id := w.ids[i]
		require.Equal(t, w.hwant[string(id)], readHists(t, db, id, base, base+2_000_000), "histograms of %s", id)
	}
}

// snapshotted opens a database on snapOpts in a new temp dir, writes the
// workload's rounds [0, 4) and then a restart snapshot of them.
func snapshotted(t *testing.T) (*Database, Options, *clock, *snapWorkload) {
	t.Helper()
	clk := &clock{t: t0.Add(30 * time.Minute)}
	opts := snapOpts(t.TempDir(), clk)
	db, err := Open(opts)
	require.NoError(t, err)
	w := newSnapWorkload()
	w.write(t, db, 0, 4)
	took, err := db.WriteRestartSnapshot()
	require.NoError(t, err)
	require.True(t, took)
	return db, opts, clk, w
}

func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	require.NoError(t, os.CopyFS(dst, os.DirFS(src)))
	return dst
}

func counter(scope tally.TestScope, name string, tags map[string]string) int64 {
	for _, c := range scope.Snapshot().Counters() {
		if c.Name() != name {
			continue
		}
		match := true
		for k, v := range tags {
			if c.Tags()[k] != v {
				match = false
			}
		}
		if match {
			return c.Value()
		}
	}
	return 0
}

// TestRestartSnapshotThenTailEqualsFullReplay: a restart that loads the
// snapshot and replays only the commit log files after it gives the same
// memory and index as the full replay of the same directory, including
// timestamps the tail rewrote (the later write wins) and series the
// tail created; it reads none of the covered files.
func TestRestartSnapshotThenTailEqualsFullReplay(t *testing.T) {
	db, opts, clk, w := snapshotted(t)
	dir := opts.Dir
	w.write(t, db, 4, 7) // rewrites rounds 2 and 3's second timestamps
	// A series the snapshot does not have.
	extra := sid("snap_extra")
	require.NoError(t, db.WriteBatch("default", samples(db, extra, ms(t0)+500)))
	require.NoError(t, db.Close())
	full := copyDir(t, dir)

	scope := tally.NewTestScope("", nil)
	opts.Metrics = scope
	db, err := Open(opts)
	require.NoError(t, err)
	defer db.Close()
	st := db.Recovery().CommitLog
	require.Greater(t, st.CoveredFiles, 5, "covered files not replayed")
	require.Greater(t, st.Files, 0, "the tail is replayed")
	require.Equal(t, int64(1), counter(scope, "restart_snapshots_loaded", nil))

	fopts := snapOpts(full, clk)
	fopts.RestartSnapshot = false
	fdb, err := Open(fopts)
	require.NoError(t, err)
	defer fdb.Close()
	require.Zero(t, fdb.Recovery().CommitLog.CoveredFiles)

	w.want["default"+string(extra)] = map[int64]float64{ms(t0) + 500: float64(ms(t0)+500) / 1000}
	w.ids = append(w.ids, extra)
	for _, d := range []*Database{db, fdb} {
		for _, id := range w.ids[:snapSeries] {
			require.Equal(t, readAll(t, fdb, id, ms(t0), ms(t0)+100_000), readAll(t, d, id, ms(t0), ms(t0)+100_000))
		}
		require.Len(t, readAll(t, d, extra, ms(t0), ms(t0)+100_000), 1)
	}
	w.ids = w.ids[:snapSeries]
	require.Equal(t, int64(2*snapSeries+1), db.ActiveSeries())
	require.Equal(t, fdb.ActiveSeries(), db.ActiveSeries())
	delete(w.want, "default"+string(extra))

	// Restarted from the snapshot a second time (no new snapshot
	// written): the same again.
	require.NoError(t, db.Close())
	db, err = Open(snapOpts(dir, clk))
	require.NoError(t, err)
	defer db.Close()
	require.Greater(t, db.Recovery().CommitLog.CoveredFiles, 5)
	require.Len(t, readAll(t, db, extra, ms(t0), ms(t0)+100_000), 1)
	for _, id := range w.ids {
		require.Equal(t, readAll(t, fdb, id, ms(t0), ms(t0)+100_000), readAll(t, db, id, ms(t0), ms(t0)+100_000))
	}
}

// TestRestartSnapshotInCreationOrder: a snapshot lists each namespace's
// series in the order of their registry slots (the order they were
// created in), sections mixing shards, so that a restart creates them,
// and the index numbers them, in that order again; written in sections
// of a few series, it loads back whole. Written shard by shard (version
// 1), the order broke at every shard.
func TestRestartSnapshotInCreationOrder(t *testing.T) {
	defer func(n int) { restartSnapSection = n }(restartSnapSection)
	restartSnapSection = 7
	db, opts, _, w := snapshotted(t)

	_, b, err := db.readRestartSnapshot()
	require.NoError(t, err)
	snap, err := memsnap.Decode(b)
	require.NoError(t, err)
	seen := map[string]int{}
	last := map[uint16]int64{0: -1, 1: -1}
	mixed := 0
	for _, sec := range snap.Sections {
		require.LessOrEqual(t, sec.Count, uint32(7))
		ns := db.namespaces[snap.Header.Namespaces[sec.NS].Name]
		shards := map[uint32]bool{}
		require.NoError(t, sec.Each(func(x memsnap.Series) error {
			require.Equal(t, db.Shard(x.ID), x.Shard, "series %s", x.ID)
			shards[x.Shard] = true
			sh := ns.shard(x.Shard)
			sh.mu.RLock()
			s := sh.series.get(hashID(x.ID), x.ID)
			sh.mu.RUnlock()
			require.NotNil(t, s, "series %s", x.ID)
			require.Greater(t, int64(s.slot), last[sec.NS], "series %s out of slot order", x.ID)
			last[sec.NS] = int64(s.slot)
			seen[ns.opts.Name+string(x.ID)]++
			return nil
		}))
		if len(shards) > 1 {
			mixed++
		}
	}
	require.Len(t, seen, 2*snapSeries, "every series of both namespaces once")
	for k, n := range seen {
		require.Equal(t, 1, n, "series %s", k)
	}
	require.Greater(t, mixed, 0, "no section holds series of several shards")
	require.NoError(t, db.Close())

	scope := tally.NewTestScope("", nil)
	opts.Metrics = scope
	db, err = Open(opts)
	require.NoError(t, err)
	defer db.Close()
	require.Equal(t, int64(1), counter(scope, "restart_snapshots_loaded", nil))
	w.check(t, db)
}

// TestRestartSnapshotDamagedFallsBackToFullReplay: a truncated, bit-flipped,
// empty or missing snapshot is not used, the whole commit log is
// replayed (nothing lost), and the fallback is counted by reason.
func TestRestartSnapshotDamagedFallsBackToFullReplay(t *testing.T) {
	db, opts, clk, w := snapshotted(t)
	dir := opts.Dir
	w.write(t, db, 4, 6)
	require.NoError(t, db.Close())
	snaps, err := filepath.Glob(filepath.Join(dir, restartSnapDir, "*"+restartSnapSuffix))
	require.NoError(t, err)
	require.Len(t, snaps, 1)
	rel, err := filepath.Rel(dir, snaps[0])
	require.NoError(t, err)

	for _, c := range []struct {
		name, reason string
		damage       func(path string)
	}{
		{"truncated", "corrupt", func(p string) {
			fi, err := os.Stat(p)
			require.NoError(t, err)
			require.NoError(t, os.Truncate(p, fi.Size()/2))
		}},
		{"last byte cut", "corrupt", func(p string) {
			fi, err := os.Stat(p)
			require.NoError(t, err)
			require.NoError(t, os.Truncate(p, fi.Size()-1))
		}},
		{"flipped", "corrupt", func(p string) {
			fi, err := os.Stat(p)
			require.NoError(t, err)
			flipByte(t, p, fi.Size()/3)
		}},
		{"empty", "corrupt", func(p string) { require.NoError(t, os.Truncate(p, 0)) }},
		{"missing", "missing", func(p string) { require.NoError(t, os.Remove(p)) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := copyDir(t, dir)
			c.damage(filepath.Join(d, rel))
			o := snapOpts(d, clk)
			scope := tally.NewTestScope("", nil)
			o.Metrics = scope
			db, err := Open(o)
			require.NoError(t, err)
			defer db.Close()
			require.Zero(t, db.Recovery().CommitLog.CoveredFiles, "no file skipped")
			require.Equal(t, int64(1), counter(scope, "restart_snapshot_fallbacks", map[string]string{"reason": c.reason}))
			require.Zero(t, counter(scope, "restart_snapshots_loaded", nil))
			w.check(t, db)
		})
	}
	// Undamaged, the same directory loads the snapshot.
	db, err = Open(opts)
	require.NoError(t, err)
	defer db.Close()
	require.Greater(t, db.Recovery().CommitLog.CoveredFiles, 0)
	w.check(t, db)
}

// TestRestartSnapshotFlushesAfterItWin: a block flushed after the
// snapshot, with a value rewritten after the snapshot whose commit log
// file is then deleted, reads the flushed value after a restart, not the
// snapshot's older one: the flush removed the snapshot before any log
// file. A cold write to a flushed block taken into memory before the
// snapshot survives a restart from it; data past retention by the
// restart is not loaded back.
func TestRestartSnapshotFlushesAfterItWin(t *testing.T) {
	clk := &clock{t: t0.Add(30 * time.Minute)}
	dir := t.TempDir()
	opts := testOpts(dir, clk)
	opts.RestartSnapshot = true
	opts.RestartSnapshotEvery = time.Minute
	opts.RestartSnapshotLogBytes = 1 << 20
	db, err := Open(opts)
	require.NoError(t, err)
	base := ms(t0)
	a, b := sid("snap_a"), sid("snap_b")

	// Block 0 of b flushed, then a cold write to it in memory, and a
	// sample of a in block 1; then the snapshot.
	require.NoError(t, db.WriteBatch("default", []Sample{{ID: b, Shard: db.Shard(b), T: base + 1000, V: 1}}))
	clk.Add(2 * time.Hour) // t0+2h30: block 0 sealed
	require.NoError(t, db.Tick())
	require.NoError(t, db.WriteBatch("default", []Sample{{ID: b, Shard: db.Shard(b), T: base + 2000, V: 2}}))
	b1 := base + 2*3600*1000
	require.NoError(t, db.WriteBatch("default", []Sample{{ID: a, Shard: db.Shard(a), T: b1 + 1000, V: 1}}))
	took, err := db.WriteRestartSnapshot()
	require.NoError(t, err)
	require.True(t, took)
	require.NoError(t, db.Close())

	// Restart from it: the cold write is back.
	scope := tally.NewTestScope("", nil)
	opts.Metrics = scope
	db, err = Open(opts)
	require.NoError(t, err)
	require.Equal(t, int64(1), counter(scope, "restart_snapshots_loaded", nil))
	require.Greater(t, db.Recovery().CommitLog.CoveredFiles, 0)
	require.Equal(t, []tv{{base + 1000, 1}, {base + 2000, 2}}, readAll(t, db, b, base, base+10_000))
	require.Equal(t, []tv{{b1 + 1000, 1}}, readAll(t, db, a, b1, b1+10_000))

	// v2 written after the snapshot, then block 1 (and block 0's cold
	// write) flushed and every commit log file removed.
	require.NoError(t, db.WriteBatch("default", []Sample{{ID: a, Shard: db.Shard(a), T: b1 + 1000, V: 2}}))
	clk.Add(2 * time.Hour) // t0+4h30: block 1 sealed
	require.NoError(t, db.Tick())
	require.NoError(t, db.Tick())
	require.Zero(t, countSeries(db), "all flushed")
	require.Empty(t, db.cl.Files(), "every commit log file removed once flushed")
	require.Equal(t, int64(1), counter(scope, "restart_snapshots_invalidated", nil))
	require.NoError(t, db.Close())

	scope = tally.NewTestScope("", nil)
	opts.Metrics = scope
	db, err = Open(opts)
	require.NoError(t, err)
	require.Zero(t, counter(scope, "restart_snapshots_loaded", nil))
	require.Equal(t, []tv{{b1 + 1000, 2}}, readAll(t, db, a, b1, b1+10_000))
	require.Equal(t, []tv{{base + 1000, 1}, {base + 2000, 2}}, readAll(t, db, b, base, base+10_000))
	// A write, a snapshot, a restart two days later: block 0 and the
	// write are past retention and not loaded back.
	require.NoError(t, db.WriteBatch("default", []Sample{{ID: b, Shard: db.Shard(b), T: base + 4*3600*1000, V: 3}}))
	took, err = db.WriteRestartSnapshot()
	require.NoError(t, err)
	require.True(t, took)
	require.NoError(t, db.Close())

	clk.Add(48 * time.Hour)
	scope = tally.NewTestScope("", nil)
	opts.Metrics = scope
	db, err = Open(opts)
	require.NoError(t, err)
	defer db.Close()
	require.Equal(t, int64(1), counter(scope, "restart_snapshots_loaded", nil))
	require.Empty(t, readAll(t, db, b, base, base+6*3600*1000))
	require.Zero(t, countSeries(db))
}

// TestRestartSnapshotOffRemovesIt: with snapshots off a snapshot left
// behind is removed at Open (and the whole log replayed).
func TestRestartSnapshotOffRemovesIt(t *testing.T) {
	clk := &clock{t: t0.Add(30 * time.Minute)}
	dir := t.TempDir()
	opts := snapOpts(dir, clk)
	db, err := Open(opts)
	require.NoError(t, err)
	w := newSnapWorkload()
	w.write(t, db, 0, 3)
	_, err = db.WriteRestartSnapshot()
	require.NoError(t, err)
	require.NoError(t, db.Close())
	opts.RestartSnapshot = false
	db, err = Open(opts)
	require.NoError(t, err)
	defer db.Close()
	require.Zero(t, db.Recovery().CommitLog.CoveredFiles)
	w.check(t, db)
	left, err := filepath.Glob(filepath.Join(dir, restartSnapDir, "*"))
	require.NoError(t, err)
	require.Empty(t, left)
}

// The snapshot's header records each namespace's label value counts per
// index block (version 3), and the restart that sizes its value tables by
// them rebuilds an index with the same counts.
func TestRestartSnapshotRecordsValueCounts(t *testing.T) {
	db, opts, _, _ := snapshotted(t)
	_, b, err := db.readRestartSnapshot()
	require.NoError(t, err)
	snap, err := memsnap.Decode(b)
	require.NoError(t, err)
	before := map[string][]index.BlockValues{}
	for i, hn := range snap.Header.Namespaces {
		ns := db.namespaces[hn.Name]
		before[hn.Name] = ns.index.ValueCounts()
		require.Equal(t, valueCounts(ns), hn.Values, "namespace %d", i)
		require.NotEmpty(t, hn.Values)
		require.NotEmpty(t, hn.Values[0].Names)
	}
	require.NoError(t, db.Close())
	db, err = Open(opts)
	require.NoError(t, err)
	defer db.Close()
	for name, want := range before {
		require.Equal(t, want, db.namespaces[name].index.ValueCounts(), name)
	}
}
