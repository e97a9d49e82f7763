package storage

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"

	"github.com/tessera-tsdb/tessera/dbnode/fileset"
	"github.com/tessera-tsdb/tessera/dbnode/vfs"
)

// readCountFS counts reads of fileset data files: what a query that read
// a payload cannot avoid (the page cache is keyed by reader, and a
// reader opened by a flush or a start has read no page).
type readCountFS struct {
	vfs.FS
	reads atomic.Int64
}

func (c *readCountFS) Open(name string) (vfs.File, error) {
	f, err := c.FS.Open(name)
	if err != nil || !strings.HasSuffix(name, "-data.db") {
		return f, err
	}
	return &readCountFile{File: f, fs: c}, nil
}

type readCountFile struct {
	vfs.File
	fs *readCountFS
}

func (f *readCountFile) ReadAt(p []byte, off int64) (int, error) {
	f.fs.reads.Add(1)
	return f.File.ReadAt(p, off)
}

// TestQueryDeclinesFlushedHistogramsBeforeReading: with histograms
// flushed only (in memory nothing, after a flush and after a restart), a
// query declining histograms answers ErrHistogramsSelected without
// reading a data page, from the kinds the fileset index records. A volume
// whose index predates kinds (version 3) still serves everything, and
// the decline is found by reading, as before.
func TestQueryDeclinesFlushedHistogramsBeforeReading(t *testing.T) {
	dir := t.TempDir()
	clk := &clock{t: t0.Add(30 * time.Minute)}
	cfs := &readCountFS{FS: vfs.OS()}
	open := func() *Database {
		o := testOpts(dir, clk)
		o.FS = cfs
		return openDB(t, o)
	}
	db := open()
	base := ms(t0)
	h, f := sid("mix", "k", "h"), sid("mix", "k", "f")
	require.NoError(t, db.WriteHistograms("default", mixedSamples(db, h, base, 4)))
	require.NoError(t, db.WriteBatch("default", samples(db, f, base+1000, base+2000)))
	want := readHists(t, db, h, base, base+100_000)
	require.NotEmpty(t, want)
	clk.Add(2 * time.Hour)
	require.NoError(t, db.Tick())
	require.Equal(t, 0, countSeries(db), "flushed: nothing in memory")

	sel := func(v string) []*labels.Matcher {
		return []*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, "__name__", "mix"), labels.MustNewMatcher(labels.MatchRegexp, "k", v)}
	}
	decline := QueryOptions{DeclineHistograms: true}
	query := func(db *Database, v string, qo QueryOptions) ([]SeriesIterator, error) {
		return db.Query(context.Background(), "default", sel(v), base, base+100_000, qo)
	}
	check := func(db *Database, what string, wantReads bool) {
		t.Helper()
		cfs.reads.Store(0)
		_, err := query(db, "h|f", decline)
		require.ErrorIs(t, err, ErrHistogramsSelected, what)
		if wantReads {
			require.NotZero(t, cfs.reads.Load(), "%s: declined by reading", what)
		} else {
			require.Zero(t, cfs.reads.Load(), "%s: declined before reading", what)
		}
		its, err := query(db, "f", decline)
		require.NoError(t, err, what)
		require.Len(t, its, 1, "%s: flushed floats alone are read", what)
		require.Nil(t, its[0].Histograms)
		cfs.reads.Store(0)
		its, err = query(db, "h|f", QueryOptions{})
		require.NoError(t, err, what)
		require.Len(t, its, 2, what)
		if !wantReads {
			// The pages were not read before (a decline that read them
			// left them in the cache): the counter sees this read.
			require.NotZero(t, cfs.reads.Load(), "%s: the counter sees a read", what)
		}
		require.Equal(t, want, readHists(t, db, h, base, base+100_000), what)
	}
	check(db, "flushed", false)
	require.NoError(t, db.Close())
	// What the commit log held is in the volumes: without it, a start
	// puts nothing back in memory (as once the log has moved past the
	// flushed block), so every histogram is known from the volumes alone.
	require.NoError(t, os.RemoveAll(filepath.Join(dir, "commitlog")))

	db = open()
	require.Equal(t, 0, countSeries(db), "restarted: nothing in memory")
	require.False(t, db.namespaces["default"].hadHist.Load())
	check(db, "restarted", false)
	require.NoError(t, db.Close())

	// Rewrite every volume with an index of version 3 (no kinds), as the
	// release before wrote it, and start again.
	root := filepath.Join(dir, "data")
	ids, err := fileset.ListBlocks(vfs.OS(), root, "default")
	require.NoError(t, err)
	require.NotEmpty(t, ids)
	for _, id := range ids {
		v, err := fileset.OpenBlock(vfs.OS(), root, id, fileset.OpenOptions{})
		require.NoError(t, err)
		next := id
		next.Volume++
		w, err := fileset.CreateBlock(vfs.OS(), root, next, (2 * time.Hour).Milliseconds())
		require.NoError(t, err)
		require.NoError(t, w.SetIndexVersion(3))
		for _, shard := range v.Shards() {
			r, _, err := v.OpenShard(shard)
			require.NoError(t, err)
			var series []fileset.Series
			require.NoError(t, r.RangeIndex(func(sid []byte, _ uint64, _ int, n int) error {
				data, _, err := r.Read(sid)
				series = append(series, fileset.Series{ID: append([]byte(nil), sid...), Data: data, Samples: n})
				return err
			}))
			require.NoError(t, r.Close())
			require.NoError(t, w.WriteShard(shard, series))
		}
		require.NoError(t, w.Finish())
		require.NoError(t, v.Close())
		require.NoError(t, fileset.RemoveBlock(vfs.OS(), root, id))
	}
	db = open()
	require.Equal(t, 0, countSeries(db))
	require.False(t, db.namespaces["default"].flushedHist.Load(), "an index of version 3 records no kinds")
	check(db, "index version 3", true)
}
