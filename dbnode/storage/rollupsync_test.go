package storage

import (
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tessera-tsdb/tessera/dbnode/fileset"
	"github.com/tessera-tsdb/tessera/dbnode/rollup"
)

// TestRollupReplicasConvergeByMerge: two replicas of a 5m rollup, one of
// which missed a few samples of a counter (so two of its windows hold
// fewer). Repair's digests and series checksums over the rollup name
// exactly that series; pulling each other's differing entry (LoadBlocks,
// as repair and bootstrap do) leaves both with the fuller replica's bytes
// (the window with more samples wins, in either direction), so the
// digests agree and the fuller replica's are unchanged.
func TestRollupReplicasConvergeByMerge(t *testing.T) {
	clk := &clock{t: t0.Add(4 * time.Hour)}
	full := openDB(t, rollupOpts(t.TempDir(), clk))
	part := openDB(t, rollupOpts(t.TempDir(), clk))
	cid := sid("reqs_total", "job", "a")
	other := sid("other_total", "job", "b")
	var all, some []Sample
	for ts, v := ms(t0), 0.0; ts < ms(t0)+4*3600_000; ts += 30_000 {
		v += 1.5
		s := Sample{ID: cid, Shard: full.Shard(cid), T: ts, V: v}
		all = append(all, s, Sample{ID: other, Shard: full.Shard(other), T: ts, V: v * 2})
		some = append(some, Sample{ID: other, Shard: full.Shard(other), T: ts, V: v * 2})
		// part misses 90s of the counter inside two windows
		if off := ts - ms(t0); (off < 40*60_000 || off >= 41*60_000) && (off < 130*60_000 || off > 130*60_000+30_000) {
			some = append(some, s)
		}
	}
	require.NoError(t, full.WriteBatch("default", all))
	require.NoError(t, part.WriteBatch("default", some))
	clk.Add(11 * time.Minute)
	require.NoError(t, full.Tick())
	require.NoError(t, part.Tick())

	shard := full.Shard(cid)
	digests := func(db *Database) []BlockDigest {
		ds, err := db.BlockDigests("r5m", shard, 0, math.MaxInt64)
		require.NoError(t, err)
		return ds
	}
	want := digests(full)
	require.NotEmpty(t, want)
	require.NotEqual(t, want, digests(part))
	// The data spans two 4h rollup blocks, the counter's missing samples
	// one range in each.
	for _, d := range want {
		bs := d.BlockStart
		// The series checksums name the counter only.
		sumsFull, err := full.SeriesChecksums("r5m", shard, bs, 0, math.MaxInt64)
		require.NoError(t, err)
		sumsPart, err := part.SeriesChecksums("r5m", shard, bs, 0, math.MaxInt64)
		require.NoError(t, err)
		require.Len(t, sumsPart, len(sumsFull))
		differ := 0
		for i := range sumsFull {
			require.Equal(t, sumsFull[i].ID, sumsPart[i].ID)
			if sumsFull[i].Checksum != sumsPart[i].Checksum {
				differ++
				require.Equal(t, cid, sumsFull[i].ID)
			}
		}
		require.Equal(t, 1, differ, "block %d", bs)

		// Each pulls the other's block (every series, as a bootstrap
		// would).
		fromFull, _, err := full.ReadBlock("r5m", shard, bs, nil, 1<<30)
		require.NoError(t, err)
		fromPart, _, err := part.ReadBlock("r5m", shard, bs, nil, 1<<30)
		require.NoError(t, err)
		require.NoError(t, full.LoadBlocks("r5m", []StreamedBlock{{Shard: shard, BlockStart: bs, Series: fromPart}}))
		require.NoError(t, part.LoadBlocks("r5m", []StreamedBlock{{Shard: shard, BlockStart: bs, Series: fromFull}}))
	}
	require.Equal(t, want, digests(full), "the fuller replica keeps its bytes")
	require.Equal(t, want, digests(part), "the other ends with them")

	got, err := part.ReadRollup("r5m", cid, ms(t0), ms(t0)+4*3600_000)
	require.NoError(t, err)
	exp, err := full.ReadRollup("r5m", cid, ms(t0), ms(t0)+4*3600_000)
	require.NoError(t, err)
	require.Equal(t, exp.Windows, got.Windows)
}

// TestRollupDamagedVolumeDerivedAgain: every volume of a rollup
// namespace fails its checks at start (a flipped index byte). They are
// moved aside as any damaged volume is, and the next tick derives the
// rollup blocks again from the raw blocks still held, down the chain:
// the digests equal the ones before the damage. (The commit log is
// removed, so no replayed raw block flushes again and recomputes them by
// the ordinary path; the backfill cursor is already past them.)
func TestRollupDamagedVolumeDerivedAgain(t *testing.T) {
	clk := &clock{t: t0.Add(4 * time.Hour)}
	opts := rollupOpts(t.TempDir(), clk)
	db := openDB(t, opts)
	rollupInput(t, db)
	clk.Add(11 * time.Minute)
	require.NoError(t, db.Tick())
	digests := func(db *Database, ns string) map[uint32][]RollupDigest {
		out := map[uint32][]RollupDigest{}
		for sh := range db.opts.NumShards {
			ds, err := db.RollupDigests(ns, sh)
			require.NoError(t, err)
			if len(ds) > 0 {
				out[sh] = ds
			}
		}
		return out
	}
	want5, want1 := digests(db, "r5m"), digests(db, "r1h")
	require.NotEmpty(t, want5)
	require.NotEmpty(t, want1)
	require.NoError(t, db.Close())

	idx, err := filepath.Glob(filepath.Join(opts.Dir, "data", "r5m", "fileset-*-index.db"))
	require.NoError(t, err)
	require.NotEmpty(t, idx)
	for _, f := range idx {
		flipByte(t, f, 12)
	}
	require.NoError(t, os.RemoveAll(filepath.Join(opts.Dir, "commitlog")))

	db = openDB(t, opts)
	require.NotEmpty(t, db.Recovery().UnreadableFilesets)
	require.Empty(t, digests(db, "r5m"), "the damaged volumes are not served")
	require.NoError(t, db.Tick())
	require.Equal(t, want5, digests(db, "r5m"), "derived again from raw")
	require.Equal(t, want1, digests(db, "r1h"), "and the level below from it")
	for _, st := range db.RollupStatuses() {
		if st.Namespace == "r5m" {
			require.Equal(t, int64(len(idx)), st.Rederived)
		}
	}
}

// TestRollupDamagedPageDerivedAgain: a rollup volume's data page fails
// its checksum while the node serves (a flipped byte). The read that
// meets it fails, naming the damage, and records the block; the next
// tick derives it again from raw over the intact series of the damaged
// volume, and reads and digests are as before the damage.
func TestRollupDamagedPageDerivedAgain(t *testing.T) {
	clk := &clock{t: t0.Add(4 * time.Hour)}
	opts := rollupOpts(t.TempDir(), clk)
	opts.NumShards = 1 // one volume section per rollup block
	db := openDB(t, opts)
	ctr, _ := rollupInput(t, db)
	clk.Add(11 * time.Minute)
	require.NoError(t, db.Tick())
	cid := sid("reqs_total", "job", "a")
	// Not read before the damage: a read keeps the pages it read cached.
	want, err := rollup.Compute(ctr, 5*60_000)
	require.NoError(t, err)
	wantD, err := db.RollupDigests("r5m", 0)
	require.NoError(t, err)

	data, err := filepath.Glob(filepath.Join(opts.Dir, "data", "r5m", "fileset-*-data.db"))
	require.NoError(t, err)
	require.NotEmpty(t, data)
	flipByte(t, data[0], 8+20) // the first rollup block's volume
	_, err = db.ReadRollup("r5m", cid, ms(t0), ms(t0)+4*3600_000)
	require.ErrorIs(t, err, fileset.ErrCorrupt)

	require.NoError(t, db.Tick())
	got, err := db.ReadRollup("r5m", cid, ms(t0), ms(t0)+4*3600_000)
	require.NoError(t, err)
	require.Equal(t, want, got.Windows)
	gotD, err := db.RollupDigests("r5m", 0)
	require.NoError(t, err)
	require.Equal(t, wantD, gotD)
}
