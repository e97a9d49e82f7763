package storage

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/tessera-tsdb/tessera/dbnode/encoding"
	"github.com/tessera-tsdb/tessera/dbnode/fileset"
	"github.com/tessera-tsdb/tessera/dbnode/vfs"
	"github.com/tessera-tsdb/tessera/ident"
)

// writeSpread writes n series (3 samples each at base+1s..3s) and returns
// their IDs and the shards they hit.
func writeSpread(t *testing.T, db *Database, prefix string, n int, base int64) ([][]byte, map[uint32]bool) {
	t.Helper()
	var batch []Sample
	var ids [][]byte
	shards := map[uint32]bool{}
	for i := range n {
		id := sid(prefix, "i", fmt.Sprintf("%05d", i))
		ids = append(ids, id)
		shards[db.Shard(id)] = true
		batch = append(batch, samples(db, id, base+1000, base+2000, base+3000)...)
	}
	require.NoError(t, db.WriteBatch("default", batch))
	return ids, shards
}

// nsFiles lists the files directly in the namespace directory and the
// shard directories (the version 1 layout) there.
func nsFiles(t *testing.T, opts Options) (files []string, shardDirs int) {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(opts.Dir, "data", "default"))
	require.NoError(t, err)
	for _, e := range ents {
		if e.IsDir() {
			shardDirs++
			continue
		}
		files = append(files, e.Name())
	}
	return files, shardDirs
}

func volumesOnDisk(t *testing.T, opts Options) []fileset.BlockID {
	t.Helper()
	ids, err := fileset.ListBlocks(vfs.OS(), filepath.Join(opts.Dir, "data"), "default")
	require.NoError(t, err)
	return ids
}

// TestFlushWritesOneVolumePerBlock: series over every one of 4096 shards
// flush as one volume (three files) per block, with five fsyncs for the
// volume, not seven per shard; a restart serves every series from it.
func TestFlushWritesOneVolumePerBlock(t *testing.T) {
	clk := &clock{t: t0.Add(30 * time.Minute)}
	opts := testOpts(t.TempDir(), clk)
	opts.NumShards = 4096
	faulty := vfs.NewFaulty(vfs.OS())
	opts.FS = faulty
	db := openDB(t, opts)
	base := ms(t0)
	ids, shards := writeSpread(t, db, "spread", 5000, base)
	require.Greater(t, len(shards), 2500)
	var syncs atomic.Int32
	faulty.Set(func(op vfs.Op, path string, _ int) (bool, int) {
		if op == vfs.OpSync && !strings.Contains(path, "commitlog") {
			syncs.Add(1)
		}
		return false, 0
	})
	clk.Add(2 * time.Hour)
	require.NoError(t, db.Tick())
	faulty.Set(nil)
	require.Equal(t, 0, countSeries(db), "flushed")
	files, dirs := nsFiles(t, opts)
	require.Len(t, files, 3, "%v", files)
	require.Zero(t, dirs)
	// data, index, dir, checkpoint, dir; plus the namespace directory's
	// creation (its parent and the root).
	require.LessOrEqual(t, syncs.Load(), int32(7))
	t.Logf("%d shards flushed with %d fsyncs", len(shards), syncs.Load())
	for _, id := range ids[:50] {
		require.Len(t, readAll(t, db, id, base, base+10_000), 3)
	}
	require.NoError(t, db.Close())

	db2 := openDB(t, opts)
	require.Empty(t, db2.Recovery().Warnings())
	for _, id := range ids {
		require.Len(t, readAll(t, db2, id, base, base+10_000), 3, "series %s", id)
	}
	blocks, err := db2.FlushedBlocks("default", db2.Shard(ids[0]))
	require.NoError(t, err)
	require.Len(t, blocks, 1)
	require.Equal(t, base, blocks[0].BlockStart)
}

// TestColdWriteMakesVolumeOfChangedShards: a cold write to one shard
// writes a volume holding only that shard; the others keep serving from
// volume 0, which stays on disk while they use it. After a restart each
// shard is served from the newest volume holding it.
func TestColdWriteMakesVolumeOfChangedShards(t *testing.T) {
	clk := &clock{t: t0.Add(30 * time.Minute)}
	opts := testOpts(t.TempDir(), clk)
	db := openDB(t, opts)
	base := ms(t0)
	ids, shards := writeSpread(t, db, "cold", 200, base)
	require.Greater(t, len(shards), 40)
	clk.Add(2 * time.Hour)
	require.NoError(t, db.Tick())
	require.Len(t, volumesOnDisk(t, opts), 1)

	cold := ids[7]
	require.NoError(t, db.WriteBatch("default", samples(db, cold, base+500)))
	require.NoError(t, db.Tick())
	require.NoError(t, db.Tick()) // the graveyard goes: volume 0 must stay
	vols := volumesOnDisk(t, opts)
	require.Len(t, vols, 2)
	v1, err := fileset.OpenBlock(vfs.OS(), filepath.Join(opts.Dir, "data"), vols[1], fileset.OpenOptions{})
	require.NoError(t, err)
	require.Equal(t, []uint32{db.Shard(cold)}, v1.Shards(), "only the changed shard is rewritten")
	require.NoError(t, v1.Close())
	require.Len(t, readAll(t, db, cold, base, base+10_000), 4)
	require.NoError(t, db.Close())

	db2 := openDB(t, opts)
	require.Len(t, readAll(t, db2, cold, base, base+10_000), 4, "from volume 1")
	for _, id := range ids {
		if string(id) != string(cold) {
			require.Len(t, readAll(t, db2, id, base, base+10_000), 3, "series %s from volume 0", id)
		}
	}
	require.Len(t, volumesOnDisk(t, opts), 2, "both still serve")
}

// TestManyColdWritesCompactTheBlock: cold writes to one shard after
// another add a volume each until the block would be served from more
// than maxVolumesPerBlock; that flush rewrites every shard into one
// volume and the old ones go.
func TestManyColdWritesCompactTheBlock(t *testing.T) {
	clk := &clock{t: t0.Add(30 * time.Minute)}
	opts := testOpts(t.TempDir(), clk)
	db := openDB(t, opts)
	base := ms(t0)
	ids, _ := writeSpread(t, db, "compact", 300, base)
	clk.Add(2 * time.Hour)
	require.NoError(t, db.Tick())
	most := 0
	for i := range 3 * maxVolumesPerBlock {
		id := ids[i*7%len(ids)]
		require.NoError(t, db.WriteBatch("default", samples(db, id, base+500+int64(i))))
		require.NoError(t, db.Tick())
		most = max(most, len(volumesOnDisk(t, opts)))
	}
	require.NoError(t, db.Tick())
	require.LessOrEqual(t, most, maxVolumesPerBlock+1, "compaction bounds the volumes of a block")
	files, _ := nsFiles(t, opts)
	require.LessOrEqual(t, len(files), 3*(maxVolumesPerBlock+1))
	for i, id := range ids {
		want := 3
		for j := range 3 * maxVolumesPerBlock {
			if j*7%len(ids) == i {
				want++
			}
		}
		require.Len(t, readAll(t, db, id, base, base+10_000), want, "series %d", i)
	}
	require.NoError(t, db.Close())
	db2 := openDB(t, opts)
	require.Empty(t, db2.Recovery().Warnings())
	require.Len(t, readAll(t, db2, ids[0], base, base+10_000), 4)
}

// TestOldLayoutIsReadAndConverted: filesets written by the version 1
// writer (one set of five files per shard) are served at start, and the
// first tick rewrites them into one volume, removing the old files.
func TestOldLayoutIsReadAndConverted(t *testing.T) {
	clk := &clock{t: t0.Add(3 * time.Hour)}
	opts := testOpts(t.TempDir(), clk)
	root := filepath.Join(opts.Dir, "data")
	base := ms(t0)
	want := map[string]int{}
	perShard := map[uint32][]fileset.Series{}
	probe := openDB(t, opts) // for Shard()
	for i := range 200 {
		id := sid("v1", "i", fmt.Sprintf("%05d", i))
		enc := encoding.NewEncoder()
		for k := int64(1); k <= 3; k++ {
			require.NoError(t, enc.Append(base+k*1000, float64(base+k*1000)/1000))
		}
		sealed, err := encoding.Seal(enc.Bytes())
		require.NoError(t, err)
		sh := probe.Shard(id)
		perShard[sh] = append(perShard[sh], fileset.Series{ID: id, Data: sealed, Samples: 3})
		want[string(id)] = 3
	}
	require.NoError(t, probe.Close())
	require.Greater(t, len(perShard), maxVolumesPerBlock)
	for sh, ss := range perShard {
		sortFilesetSeries(ss)
		require.NoError(t, fileset.Write(vfs.OS(), root, fileset.ID{Namespace: "default", Shard: sh, BlockStart: base}, 2*3600*1000, ss))
	}
	files, dirs := nsFiles(t, opts)
	require.Empty(t, files)
	require.Equal(t, len(perShard), dirs)

	db := openDB(t, opts)
	require.Empty(t, db.Recovery().Warnings())
	check := func(db *Database) {
		for id, n := range want {
			require.Len(t, readAll(t, db, []byte(id), base, base+10_000), n)
		}
	}
	check(db)
	require.NoError(t, db.Tick()) // converts
	require.NoError(t, db.Tick()) // the old filesets' graveyard goes
	check(db)
	vols := volumesOnDisk(t, opts)
	require.Len(t, vols, 1)
	for sh := range perShard {
		ids, err := fileset.List(vfs.OS(), root, "default", sh)
		require.NoError(t, err)
		require.Empty(t, ids, "shard %d's old fileset removed", sh)
	}
	require.NoError(t, db.Close())
	db2 := openDB(t, opts)
	check(db2)
}

// TestDropShardStopsServingAndReclaims: a dropped shard's data is no
// longer served; its volume goes once no shard serves from it.
func TestDropShardStopsServingAndReclaims(t *testing.T) {
	clk := &clock{t: t0.Add(30 * time.Minute)}
	opts := testOpts(t.TempDir(), clk)
	db := openDB(t, opts)
	base := ms(t0)
	ids, shards := writeSpread(t, db, "rel", 100, base)
	clk.Add(2 * time.Hour)
	require.NoError(t, db.Tick())
	require.Len(t, volumesOnDisk(t, opts), 1)
	first := db.Shard(ids[0])
	require.NoError(t, db.DropShard(first))
	require.Empty(t, readAll(t, db, ids[0], base, base+10_000))
	require.NoError(t, db.Tick())
	require.Len(t, volumesOnDisk(t, opts), 1, "other shards still serve from it")
	for sh := range shards {
		require.NoError(t, db.DropShard(sh))
	}
	require.NoError(t, db.Tick())
	require.Empty(t, volumesOnDisk(t, opts), "reclaimed once no shard serves from it")
	require.Empty(t, db.ShardsWithData())
}

// TestRetentionRemovesVolumes: an expired block's volume is removed from
// disk, not only from memory.
func TestRetentionRemovesVolumes(t *testing.T) {
	clk := &clock{t: t0.Add(30 * time.Minute)}
	opts := testOpts(t.TempDir(), clk)
	db := openDB(t, opts)
	base := ms(t0)
	ids, _ := writeSpread(t, db, "ret", 50, base)
	clk.Add(2 * time.Hour)
	require.NoError(t, db.Tick())
	require.Len(t, volumesOnDisk(t, opts), 1)
	clk.Add(48 * time.Hour)
	require.NoError(t, db.Tick()) // expires
	require.NoError(t, db.Tick()) // the graveyard releases the volume
	require.Empty(t, volumesOnDisk(t, opts))
	files, _ := nsFiles(t, opts)
	require.Empty(t, files)
	require.Empty(t, readAll(t, db, ids[0], base, base+10_000))
	require.NoError(t, db.Tick())
	require.Empty(t, db.namespaces["default"].vols, "the block is forgotten")
}

// TestDamagedSectionCostsOnlyItsShard: a byte flipped in one shard's index
// section fails that shard's block at start (reported), every other shard
// of the volume is served.
func TestDamagedSectionCostsOnlyItsShard(t *testing.T) {
	clk := &clock{t: t0.Add(30 * time.Minute)}
	opts := testOpts(t.TempDir(), clk)
	db := openDB(t, opts)
	base := ms(t0)
	ids, _ := writeSpread(t, db, "sec", 100, base)
	clk.Add(2 * time.Hour)
	require.NoError(t, db.Tick())
	require.NoError(t, db.Tick()) // rotates and deletes the commit log: the volume is the only copy
	require.Empty(t, db.cl.Files())
	require.NoError(t, db.Close())

	ixPath := fileset.BlockFilePath(filepath.Join(opts.Dir, "data"), volumesOnDisk(t, opts)[0], "index")
	b, err := os.ReadFile(ixPath)
	require.NoError(t, err)
	b[len(b)-3] ^= 0x40 // inside the last shard's section
	require.NoError(t, os.WriteFile(ixPath, b, 0o644))

	db2 := openDB(t, opts)
	rec := db2.Recovery()
	require.Len(t, rec.UnreadableFilesets, 1)
	require.Contains(t, rec.UnreadableFilesets[0], "shard")
	lost := 0
	for _, id := range ids {
		n := len(readAll(t, db2, id, base, base+10_000))
		if n == 0 {
			lost++
			continue
		}
		require.Equal(t, 3, n)
	}
	require.Positive(t, lost)
	require.Less(t, lost, 10, "only the damaged shard's series")
}

// TestFlushFaultsLeaveOldStateOrNew injects a fault at every file
// operation of a cold flush in turn (the block already has volume 0): the
// tick fails, reads are unchanged (old volume plus memory), and after a
// "crash" (reopen) every sample is there; the retry flushes.
func TestFlushFaultsLeaveOldStateOrNew(t *testing.T) {
	for nth := 1; ; nth++ {
		clk := &clock{t: t0.Add(30 * time.Minute)}
		opts := testOpts(t.TempDir(), clk)
		faulty := vfs.NewFaulty(vfs.OS())
		opts.FS = faulty
		db, err := Open(opts)
		require.NoError(t, err)
		base := ms(t0)
		ids, _ := writeSpread(t, db, "f", 50, base)
		clk.Add(2 * time.Hour)
		require.NoError(t, db.Tick())
		require.NoError(t, db.WriteBatch("default", samples(db, ids[0], base+500)))
		require.NoError(t, db.WriteBatch("default", samples(db, ids[1], base+600)))
		var seen atomic.Int32
		faulty.Set(func(op vfs.Op, path string, _ int) (bool, int) {
			if strings.Contains(path, "commitlog") || op == vfs.OpRemove {
				return false, 0
			}
			return int(seen.Add(1)) == nth, 0
		})
		err = db.Tick()
		faulty.Set(nil)
		if err == nil {
			require.NoError(t, db.Close())
			require.Greater(t, nth, 5, "the faults reached the flush")
			t.Logf("%d fault points, each left the old state or the new one", nth-1)
			return
		}
		require.ErrorIs(t, err, vfs.ErrInjected, "fault %d", nth)
		require.Len(t, readAll(t, db, ids[0], base, base+10_000), 4, "fault %d", nth)
		require.Len(t, readAll(t, db, ids[2], base, base+10_000), 3, "fault %d", nth)
		require.NoError(t, db.Close())
		db2, err := Open(opts)
		require.NoError(t, err, "fault %d", nth)
		require.Len(t, readAll(t, db2, ids[0], base, base+10_000), 4, "fault %d", nth)
		require.Len(t, readAll(t, db2, ids[1], base, base+10_000), 4, "fault %d", nth)
		require.Len(t, readAll(t, db2, ids[2], base, base+10_000), 3, "fault %d", nth)
		require.NoError(t, db2.Tick())
		require.Equal(t, 0, countSeries(db2), "fault %d: the retry flushed", nth)
		require.NoError(t, db2.Close())
		if nth > 100 {
			t.Fatal("faults never stop failing the tick")
		}
	}
}

func sortFilesetSeries(ss []fileset.Series) {
	for i := 1; i < len(ss); i++ {
		for j := i; j > 0 && string(ss[j-1].ID) > string(ss[j].ID); j-- {
			ss[j-1], ss[j] = ss[j], ss[j-1]
		}
	}
}

// TestFixtureWrittenByOldCode opens a data directory written by the
// storage engine before version 2 (testdata/v1: 40 series over 30 of 64
// shards, one of them cold-written into volume 1; made by main at
// 481619f, commit log left out), serves every sample, converts it to one
// volume at the first tick and serves the same after a restart.
func TestFixtureWrittenByOldCode(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.CopyFS(dir, os.DirFS("testdata/v1")))
	clk := &clock{t: t0.Add(3*time.Hour + 5*time.Minute)}
	opts := testOpts(dir, clk)
	base := ms(t0)
	check := func(db *Database) {
		t.Helper()
		for i := range 40 {
			id := sid("v1_fixture", "i", fmt.Sprintf("%02d", i))
			var want []tv
			for k := int64(0); k < 10; k++ {
				if i == 0 && k == 1 {
					want = append(want, tv{base + 30_000, -1})
				}
				want = append(want, tv{base + k*60_000, float64(i) + float64(k)/10})
			}
			require.Equal(t, want, readAll(t, db, id, base, base+3600_000), "series %d", i)
		}
	}
	db := openDB(t, opts)
	require.Empty(t, db.Recovery().Warnings())
	check(db)
	_, dirs := nsFiles(t, opts)
	require.Equal(t, 30, dirs)
	require.NoError(t, db.Tick()) // converts: 30 sources > maxVolumesPerBlock
	require.NoError(t, db.Tick()) // the old filesets' graveyard goes
	check(db)
	require.Len(t, volumesOnDisk(t, opts), 1)
	var left []string
	require.NoError(t, filepath.WalkDir(filepath.Join(dir, "data", "default"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && filepath.Dir(p) != filepath.Join(dir, "data", "default") {
			left = append(left, p)
		}
		return err
	}))
	require.Empty(t, left, "old per-shard files removed")
	require.NoError(t, db.Close())
	db2 := openDB(t, opts)
	require.Empty(t, db2.Recovery().Warnings())
	check(db2)
}

// TestStreamedBlocksAreCompacted: a bootstrap loads a block shard by
// shard (LoadBlock), a volume each; the next tick carries them into one
// volume (the largest stays), so the block is left with at most two.
func TestStreamedBlocksAreCompacted(t *testing.T) {
	clk := &clock{t: t0.Add(30 * time.Minute)}
	src := openDB(t, testOpts(t.TempDir(), clk))
	base := ms(t0)
	ids, shards := writeSpread(t, src, "boot", 200, base)
	clk.Add(2 * time.Hour)
	require.NoError(t, src.Tick())

	opts := testOpts(t.TempDir(), clk)
	dst := openDB(t, opts)
	for sh := range shards {
		series, more, err := src.ReadBlock("default", sh, base, nil, 1<<30)
		require.NoError(t, err)
		require.False(t, more)
		require.NoError(t, dst.LoadBlock("default", sh, base, series))
	}
	require.Len(t, volumesOnDisk(t, opts), len(shards), "one volume per streamed shard")
	require.NoError(t, dst.Tick())
	require.NoError(t, dst.Tick())
	require.LessOrEqual(t, len(volumesOnDisk(t, opts)), 2)
	for _, id := range ids {
		require.Len(t, readAll(t, dst, id, base, base+10_000), 3)
	}
}

// TestDroppedShardStaysDroppedAfterRestart: a shard dropped while its
// section lies in a volume other shards use is not served again after a
// restart (the released record), the others are; when the shard comes
// back and is flushed again, its new data is served and the old is not.
func TestDroppedShardStaysDroppedAfterRestart(t *testing.T) {
	clk := &clock{t: t0.Add(30 * time.Minute)}
	opts := testOpts(t.TempDir(), clk)
	db := openDB(t, opts)
	base := ms(t0)
	ids, _ := writeSpread(t, db, "rel", 100, base)
	clk.Add(2 * time.Hour)
	require.NoError(t, db.Tick())
	require.NoError(t, db.Tick()) // the commit log goes: the volume is the only copy
	require.Empty(t, db.cl.Files())
	gone := db.Shard(ids[0])
	require.NoError(t, db.DropShard(gone))
	require.NoError(t, db.Close())

	db2 := openDB(t, opts)
	require.Empty(t, db2.Recovery().Warnings())
	require.NotContains(t, db2.ShardsWithData(), gone)
	for _, id := range ids {
		n := len(readAll(t, db2, id, base, base+10_000))
		if db2.Shard(id) == gone {
			require.Zero(t, n, "dropped shard's series %s", id)
		} else {
			require.Equal(t, 3, n, "series %s", id)
		}
	}
	// The shard comes back to this node: new samples for the block.
	require.NoError(t, db2.WriteBatch("default", samples(db2, ids[0], base+500)))
	require.NoError(t, db2.Tick())
	require.NoError(t, db2.Close())
	db3 := openDB(t, opts)
	require.Equal(t, []tv{{base + 500, float64(base+500) / 1000}}, readAll(t, db3, ids[0], base, base+10_000), "only what came back")
	require.Contains(t, db3.ShardsWithData(), gone)
}

func TestReleasedFileRoundTripAndDamage(t *testing.T) {
	root := t.TempDir()
	rs := []fileset.Released{{Shard: 3, BlockStart: -7200000, Volume: 4}, {Shard: 4095, BlockStart: 7200000, Volume: 0}}
	require.NoError(t, fileset.WriteReleased(vfs.OS(), root, "default", rs))
	got, err := fileset.ReadReleased(vfs.OS(), root, "default")
	require.NoError(t, err)
	require.Equal(t, rs, got)
	p := fileset.ReleasedPath(root, "default")
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	b[10] ^= 1
	require.NoError(t, os.WriteFile(p, b, 0o644))
	_, err = fileset.ReadReleased(vfs.OS(), root, "default")
	require.ErrorIs(t, err, fileset.ErrCorrupt)
	got, err = fileset.ReadReleased(vfs.OS(), root, "other")
	require.NoError(t, err)
	require.Empty(t, got)
}

// TestReleasedVolumeNumberNotReused: a shard dropped from a volume that
// served only it (so the volume is deleted) and owned again after a
// restart must not write its new data under a volume number the release
// record covers: the next start would hide it as released.
func TestReleasedVolumeNumberNotReused(t *testing.T) {
	clk := &clock{t: t0.Add(30 * time.Minute)}
	opts := testOpts(t.TempDir(), clk)
	db := openDB(t, opts)
	base := ms(t0)
	id := ident.FromLabels(labels.FromStrings("__name__", "alone", "i", "1"))
	require.NoError(t, db.WriteBatch("default", samples(db, id, base+1000)))
	clk.Add(2 * time.Hour)
	require.NoError(t, db.Tick())
	require.NoError(t, db.Tick())
	require.NoError(t, db.DropShard(db.Shard(id)))
	require.NoError(t, db.Tick()) // the graveyard deletes the volume only this shard used
	require.NoError(t, db.Close())

	db2 := openDB(t, opts)
	require.NoError(t, db2.WriteBatch("default", samples(db2, id, base+500)))
	require.NoError(t, db2.Tick())
	require.NoError(t, db2.Tick()) // its commit log goes: the new volume is the only copy
	require.NoError(t, db2.Close())

	db3 := openDB(t, opts)
	require.Equal(t, []tv{{base + 500, float64(base+500) / 1000}}, readAll(t, db3, id, base, base+10_000),
		"the shard's new data is served after a restart")
}
