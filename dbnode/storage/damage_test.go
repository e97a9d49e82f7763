package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/dbnode/encoding"
	"github.com/tessera-tsdb/tessera/dbnode/fileset"
	"github.com/tessera-tsdb/tessera/dbnode/vfs"
	"github.com/uber-go/tally/v4"
)

// flushedBlock writes n series of 3 samples each into one shard, flushes
// the block and returns the shard directory and the series IDs.
func flushedBlock(t *testing.T, n int) (opts Options, clk *clock, ids [][]byte) {
	clk = &clock{t: t0.Add(30 * time.Minute)}
	opts = testOpts(t.TempDir(), clk)
	opts.NumShards = 1
	scope := tally.NewTestScope("", nil)
	opts.Metrics = scope
	db, err := Open(opts)
	require.NoError(t, err)
	base := ms(t0)
	var batch []Sample
	for i := range n {
		id := sid("a", "i", fmt.Sprintf("%06d", i))
		ids = append(ids, id)
		batch = append(batch, samples(db, id, base+1000, base+2000, base+3000)...)
	}
	require.NoError(t, db.WriteBatch("default", batch))
	clk.Add(2 * time.Hour)
	require.NoError(t, db.Tick())
	require.Equal(t, 0, countSeries(db), "flushed")
	require.NoError(t, db.Close())
	return opts, clk, ids
}

// filesetFile is the one file of kind of the flushed block's volume 0.
func filesetFile(t *testing.T, opts Options, kind string) string {
	m, err := filepath.Glob(filepath.Join(opts.Dir, "data", "default", "fileset-*-0-"+kind+".db"))
	require.NoError(t, err)
	require.Len(t, m, 1)
	return m[0]
}

func flipByte(t *testing.T, path string, off int64) {
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	b[off] ^= 0x55
	require.NoError(t, os.WriteFile(path, b, 0o644))
}

// TestDamagedPageCostsOnlyItsSeries: a damaged data page of a fileset
// fails only the series stored in it. A query returns every other series,
// complete and correct, and a PartialError naming the damaged ones.
func TestDamagedPageCostsOnlyItsSeries(t *testing.T) {
	opts, _, ids := flushedBlock(t, 6000) // > 64 KiB of payload: several pages
	flipByte(t, filesetFile(t, opts, "data"), 8+20)

	scope := tally.NewTestScope("", nil)
	opts.Metrics = scope
	db := openDB(t, opts)
	require.Empty(t, db.Recovery().Warnings(), "Open does not read pages")
	base := ms(t0)
	res, err := db.Query(context.Background(), "default",
		[]*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, "__name__", "a")}, base, base+10_000, QueryOptions{})
	var partial *PartialError
	require.True(t, errors.As(err, &partial), "want a PartialError, got %v", err)
	require.NotEmpty(t, partial.Damaged)
	require.NotEmpty(t, res)
	require.Equal(t, len(ids), len(res)+len(partial.Damaged), "every series is either returned or named damaged")
	require.Less(t, len(partial.Damaged), len(ids)/2, "only the first page's series")
	for _, d := range partial.Damaged {
		require.ErrorContains(t, d.Err, "corrupt")
	}
	for _, s := range res {
		n := 0
		for s.Values.Next() {
			ts, v := s.Values.At()
			require.Equal(t, float64(ts)/1000, v)
			n++
		}
		require.NoError(t, s.Values.Err())
		require.Equal(t, 3, n, "series %s complete", s.ID)
	}
	require.Equal(t, int64(len(partial.Damaged)), scope.Snapshot().Counters()["query_series_unreadable+"].Value())
	w := partial.Warnings(3)
	require.Len(t, w, 4)
	require.Contains(t, w[3], fmt.Sprintf("%d more series", len(partial.Damaged)-3))
	// The sixth kind of damage of TestEveryKindOfVolumeDamageIsKept: the
	// volume is neither deleted nor moved aside, its other pages serve.
	for _, kind := range []string{"data", "index", "checkpoint"} {
		require.FileExists(t, filesetFile(t, opts, kind), "kept")
	}
}

// TestUnreadableFilesetIsReported: a fileset whose index fails its
// checksum at Open is skipped (the node starts), counted and reported.
func TestUnreadableFilesetIsReported(t *testing.T) {
	opts, _, ids := flushedBlock(t, 10)
	flipByte(t, filesetFile(t, opts, "index"), 12)

	scope := tally.NewTestScope("", nil)
	opts.Metrics = scope
	db := openDB(t, opts)
	rec := db.Recovery()
	require.Len(t, rec.UnreadableFilesets, 1)
	require.Len(t, rec.Warnings(), 1)
	require.Contains(t, rec.Warnings()[0], "unreadable fileset")
	require.Equal(t, int64(1), scope.Snapshot().Counters()["filesets_unreadable+"].Value())
	// The files are kept for inspection under names no cleanup touches,
	// and the block can be flushed again: its data came back from the
	// commit log, and a flush writes it as a new fileset.
	aside, err := filepath.Glob(filepath.Join(opts.Dir, "data", "default", "fileset-*"+fileset.CorruptSuffix))
	require.NoError(t, err)
	require.Len(t, aside, 3, "data, index, checkpoint")
	require.Len(t, readAll(t, db, ids[0], ms(t0), ms(t0)+10_000), 3, "replayed from the commit log")
	require.NoError(t, db.Tick())
	require.Equal(t, 0, countSeries(db), "flushed again")
	require.Zero(t, scope.Snapshot().Counters()["flush_errors+"].Value())
	require.Len(t, readAll(t, db, ids[0], ms(t0), ms(t0)+10_000), 3, "from the new fileset")
	require.NoError(t, db.Close())
	db2 := openDB(t, opts)
	require.Empty(t, db2.Recovery().Warnings(), "clean at the next start")
	require.Len(t, readAll(t, db2, ids[0], ms(t0), ms(t0)+10_000), 3)
}

// TestCommitLogDamageIsReported: a damaged record in the middle of the
// commit log costs its own samples only, and Recovery reports it.
func TestCommitLogDamageIsReported(t *testing.T) {
	clk := &clock{t: t0.Add(30 * time.Minute)}
	opts := testOpts(t.TempDir(), clk)
	db, err := Open(opts)
	require.NoError(t, err)
	a, b, c := sid("a"), sid("b"), sid("c")
	base := ms(t0)
	require.NoError(t, db.WriteBatch("default", samples(db, a, base+1000)))
	require.NoError(t, db.WriteBatch("default", samples(db, b, base+2000)))
	require.NoError(t, db.WriteBatch("default", samples(db, c, base+3000)))
	require.NoError(t, db.Close())

	files, err := filepath.Glob(filepath.Join(opts.Dir, "commitlog", "commitlog-*.db"))
	require.NoError(t, err)
	require.Len(t, files, 1)
	data, err := os.ReadFile(files[0])
	require.NoError(t, err)
	// The second record: b's. Flip a byte in the middle of the file.
	i := bytes.Index(data, b)
	require.Positive(t, i)
	data[i] ^= 0x01
	require.NoError(t, os.WriteFile(files[0], data, 0o644))

	db2 := openDB(t, opts)
	require.Len(t, readAll(t, db2, a, base, base+10_000), 1)
	require.Empty(t, readAll(t, db2, b, base, base+10_000), "the damaged record's sample is lost")
	require.Len(t, readAll(t, db2, c, base, base+10_000), 1, "the record after the damage is kept")
	w := db2.Recovery().Warnings()
	require.Len(t, w, 1)
	require.Contains(t, w[0], files[0]+".corrupt")
}

// TestUnreadableLatestVolumeKeepsTheOlder: when the latest volume of a
// block fails its checks at Open, an older readable volume left beside
// it (a crash between writing the new volume and removing the old) is
// served instead of being removed as obsolete: the damaged volume must
// not cost the data the older one still holds.
func TestUnreadableLatestVolumeKeepsTheOlder(t *testing.T) {
	opts, _, ids := flushedBlock(t, 10)
	dir := filepath.Dir(filesetFile(t, opts, "data"))
	v0 := map[string][]byte{}
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		v0[e.Name()] = b
	}
	// A cold write to the flushed block makes volume 1 (volume 0 and the
	// cold sample merged) and removes volume 0.
	db, err := Open(opts)
	require.NoError(t, err)
	base := ms(t0)
	cold := sid("a", "i", "cold")
	require.NoError(t, db.WriteBatch("default", samples(db, cold, base+1000)))
	require.NoError(t, db.Tick())
	require.NoError(t, db.Close())
	v1, err := filepath.Glob(filepath.Join(dir, "fileset-*-1-index.db"))
	require.NoError(t, err)
	require.Len(t, v1, 1, "the cold flush wrote volume 1")
	v1Index := v1[0]
	// Volume 0 is back (the crash), volume 1 damaged.
	for name, b := range v0 {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), b, 0o644))
	}
	flipByte(t, v1Index, 12)

	db = openDB(t, opts)
	require.Len(t, db.Recovery().UnreadableFilesets, 1)
	for _, id := range ids {
		require.Len(t, readAll(t, db, id, base, base+10_000), 3, "series %s served from volume 0", id)
	}
	_, err = os.Stat(strings.Replace(v1Index, "-1-index", "-0-data", 1))
	require.NoError(t, err, "volume 0 kept")
}

// TestEveryKindOfVolumeDamageIsKept: each kind of damage to a volume's
// files that Open finds (a flipped byte, a truncated or deleted data or
// index file, a deleted or damaged checkpoint) costs that volume only: its
// remaining files are moved aside as *.corrupt, never deleted; it is
// logged, counted and reported (what /ready lists); every series is still
// served (replayed from the commit log) and flushed again. Before the
// pending marker, a deleted or damaged checkpoint made the volume an
// "incomplete volume", deleted with one WARN and reported nowhere.
// (A flipped byte in the data file is found by the query that reads its
// page: TestDamagedPageCostsOnlyItsSeries, and the data-page case below.)
func TestEveryKindOfVolumeDamageIsKept(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, opts Options)
		left   int // files of the volume left to move aside
	}{
		{"index flipped byte", func(t *testing.T, o Options) { flipByte(t, filesetFile(t, o, "index"), 12) }, 3},
		{"checkpoint flipped byte", func(t *testing.T, o Options) { flipByte(t, filesetFile(t, o, "checkpoint"), 10) }, 3},
		{"data truncated", func(t *testing.T, o Options) { truncateHalf(t, filesetFile(t, o, "data")) }, 3},
		{"index truncated", func(t *testing.T, o Options) { truncateHalf(t, filesetFile(t, o, "index")) }, 3},
		{"data deleted", func(t *testing.T, o Options) { require.NoError(t, os.Remove(filesetFile(t, o, "data"))) }, 2},
		{"index deleted", func(t *testing.T, o Options) { require.NoError(t, os.Remove(filesetFile(t, o, "index"))) }, 2},
		{"checkpoint deleted", func(t *testing.T, o Options) { require.NoError(t, os.Remove(filesetFile(t, o, "checkpoint"))) }, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts, _, ids := flushedBlock(t, 10)
			tc.damage(t, opts)

			scope := tally.NewTestScope("", nil)
			opts.Metrics = scope
			db := openDB(t, opts)
			rec := db.Recovery()
			require.Len(t, rec.UnreadableFilesets, 1, "reported")
			require.Contains(t, rec.Warnings()[0], "unreadable fileset")
			require.Equal(t, int64(1), scope.Snapshot().Counters()["filesets_unreadable+"].Value())
			dir := filepath.Join(opts.Dir, "data", "default")
			aside, err := filepath.Glob(filepath.Join(dir, "fileset-*-0-*"+fileset.CorruptSuffix))
			require.NoError(t, err)
			require.Len(t, aside, tc.left, "every remaining file kept, moved aside")
			live, err := filepath.Glob(filepath.Join(dir, "fileset-*-0-*.db"))
			require.NoError(t, err)
			require.Empty(t, live)
			base := ms(t0)
			for _, id := range ids {
				require.Len(t, readAll(t, db, id, base, base+10_000), 3, "series %s from the commit log", id)
			}
			require.NoError(t, db.Tick())
			require.Equal(t, 0, countSeries(db), "flushed again")
			require.NoError(t, db.Close())
			db2 := openDB(t, opts)
			require.Empty(t, db2.Recovery().Warnings(), "clean at the next start")
			for _, id := range ids {
				require.Len(t, readAll(t, db2, id, base, base+10_000), 3, "series %s from the new volume", id)
			}
		})
	}
}

func truncateHalf(t *testing.T, path string) {
	st, err := os.Stat(path)
	require.NoError(t, err)
	require.NoError(t, os.Truncate(path, st.Size()/2))
}

// TestOldLayoutFilesetWithoutCheckpointIsKept: a version 1 (per-shard)
// fileset whose checkpoint was deleted is moved aside and reported, like
// a version 2 volume; before, it was deleted as incomplete with one WARN.
func TestOldLayoutFilesetWithoutCheckpointIsKept(t *testing.T) {
	clk := &clock{t: t0.Add(3 * time.Hour)}
	opts := testOpts(t.TempDir(), clk)
	opts.NumShards = 1
	root := filepath.Join(opts.Dir, "data")
	enc := encoding.NewEncoder()
	require.NoError(t, enc.Append(ms(t0)+1000, 1))
	sealed, err := encoding.Seal(enc.Bytes())
	require.NoError(t, err)
	id := fileset.ID{Namespace: "default", Shard: 0, BlockStart: ms(t0)}
	require.NoError(t, fileset.Write(vfs.OS(), root, id, 2*3600*1000, []fileset.Series{{ID: sid("v1"), Data: sealed, Samples: 1}}))
	require.NoError(t, os.Remove(fileset.FilePath(root, id, "checkpoint")))

	scope := tally.NewTestScope("", nil)
	opts.Metrics = scope
	db := openDB(t, opts)
	require.Len(t, db.Recovery().UnreadableFilesets, 1)
	require.Contains(t, db.Recovery().UnreadableFilesets[0], "checkpoint missing")
	require.Equal(t, int64(1), scope.Snapshot().Counters()["filesets_unreadable+"].Value())
	aside, err := filepath.Glob(filepath.Join(fileset.ShardDir(root, "default", 0), "fileset-*"+fileset.CorruptSuffix))
	require.NoError(t, err)
	require.Len(t, aside, 4, "data, index, info, digest kept")
}
