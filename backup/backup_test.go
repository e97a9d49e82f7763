package backup

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"
	"github.com/thanos-io/objstore"
	"go.uber.org/goleak"

	"github.com/tessera-tsdb/tessera/dbnode/commitlog"
	"github.com/tessera-tsdb/tessera/dbnode/snapshot"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
	"github.com/tessera-tsdb/tessera/dbnode/storage/storagetest"
	"github.com/tessera-tsdb/tessera/ident"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// clock is the tests' settable clock.
type clock = storagetest.Clock

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC) // a block boundary

const testShards = 8

func openDB(t *testing.T, clk *clock) (*storage.Database, string) {
	t.Helper()
	dir := t.TempDir()
	return openDBAt(t, clk, dir, testShards), dir
}

// openDBAt opens (or reopens) the database in dir with numShards shards.
func openDBAt(t *testing.T, clk *clock, dir string, numShards uint32) *storage.Database {
	t.Helper()
	db, err := storage.Open(storagetest.Options(storage.Options{
		Dir: dir,
		Namespaces: []storage.NamespaceOptions{{Name: "default", Retention: 48 * time.Hour, BlockSize: 2 * time.Hour,
			BufferPast: 10 * time.Minute, BufferFuture: 2 * time.Minute, ColdWrites: true, Index: true}},
		NumShards: numShards, CommitLogMode: commitlog.ModeSync, Now: clk.Now,
	}))
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func seriesID(i int) []byte {
	return ident.FromLabels(labels.FromStrings("__name__", "m", "i", fmt.Sprint(i)))
}

// write writes one sample per series at each of ts (values depend on both).
func write(t *testing.T, db *storage.Database, nSeries int, ts ...int64) {
	t.Helper()
	var batch []storage.Sample
	for i := range nSeries {
		id := seriesID(i)
		for _, x := range ts {
			batch = append(batch, storage.Sample{ID: id, Shard: db.Shard(id), T: x, V: float64(x)/7 + float64(i)})
		}
	}
	require.NoError(t, db.WriteBatch("default", batch))
}

type point struct {
	T int64
	V float64
}

func readAllSeries(t *testing.T, db *storage.Database, nSeries int) map[int][]point {
	t.Helper()
	out := map[int][]point{}
	for i := range nSeries {
		it, err := db.Read("default", seriesID(i), 0, 1<<62)
		require.NoError(t, err)
		for it.Next() {
			ts, v := it.At()
			out[i] = append(out[i], point{ts, v})
		}
		require.NoError(t, it.Err())
	}
	return out
}

func fsBucket(t *testing.T) (objstore.Bucket, string) {
	t.Helper()
	dir := t.TempDir()
	b, err := NewBucket(fmt.Appendf(nil, "type: FILESYSTEM\nconfig:\n  directory: %s\n", dir))
	require.NoError(t, err)
	return b, dir
}

func allShards() []uint32 {
	out := make([]uint32, testShards)
	for i := range out {
		out[i] = uint32(i)
	}
	return out
}

// backupDB snapshots db, uploads every shard and writes the manifest.
func backupDB(t *testing.T, db *storage.Database, dir string, b objstore.Bucket, id string) (*Manifest, Progress) {
	t.Helper()
	return backupDBFrom(t, db, dir, b, id, nil)
}

// backupDBFrom is backupDB referencing unchanged volumes of prev.
func backupDBFrom(t *testing.T, db *storage.Database, dir string, b objstore.Bucket, id string, prev *Manifest) (*Manifest, Progress) {
	t.Helper()
	ctx := context.Background()
	meta, err := snapshot.Create(db, dir, snapshot.Options{ID: id, NodeID: "n1"})
	require.NoError(t, err)
	s, err := snapshot.OpenID(dir, meta.ID)
	require.NoError(t, err)
	defer s.Close()
	entries, p, err := Upload(ctx, b, s, UploadOptions{Shards: allShards(), Concurrency: 3, Previous: prev})
	require.NoError(t, err)
	m := &Manifest{FormatVersion: FormatVersion, ID: id, StartedMs: meta.CreatedMs, NumShards: testShards, Shards: entries}
	summarizeManifest(m)
	require.NoError(t, m.Validate())
	require.NoError(t, WriteManifest(ctx, b, m))
	return m, p
}

func restoreInto(t *testing.T, clk *clock, b objstore.Bucket, id string) (*storage.Database, RestoreReport) {
	t.Helper()
	db, _ := openDB(t, clk)
	m, err := ReadManifest(context.Background(), b, id)
	require.NoError(t, err)
	r, err := NewRestorer(b, m, testShards, db, nil)
	require.NoError(t, err)
	require.NoError(t, r.Restore(context.Background(), allShards()))
	return db, r.Report()
}

// TestBackupIncrementalVerifyRestore runs the backup scenario against a
// filesystem bucket.
func TestBackupIncrementalVerifyRestore(t *testing.T) {
	b, dir := fsBucket(t)
	backupScenario(t, b, func(key string) string { return filepath.Join(dir, key) })
}

// backupScenario backs a database up (flushed blocks and memory), backs
// it up again after more writes (only the changed parts are uploaded),
// restores the second backup into a fresh database with every sample
// bit for bit, then flips one byte of one block part (objectFile says
// where the bucket keeps a key on disk): verify names it, and a restore
// loses that block only.
func backupScenario(t *testing.T, b objstore.Bucket, objectFile func(key string) string) {
	clk := storagetest.NewClock(t0.Add(5*time.Hour + 30*time.Minute))
	db, dir := openDB(t, clk)
	const n = 40
	base := t0.UnixMilli()
	var ts []int64
	for x := base; x < clk.Now().UnixMilli(); x += 10 * 60_000 {
		ts = append(ts, x)
	}
	write(t, db, n, ts...)
	require.NoError(t, db.Tick()) // flushes the blocks at t0 and t0+2h

	m1, p1 := backupDB(t, db, dir, b, "first")
	require.Equal(t, p1.Parts, p1.Uploaded)
	require.Zero(t, p1.Skipped)
	blocks := 0
	for _, s := range m1.Shards {
		for _, o := range s.Objects {
			if o.Kind == KindBlock {
				blocks++
			}
		}
	}
	require.Positive(t, blocks)
	require.Greater(t, p1.Parts, blocks, "unflushed parts too")

	// More writes to the open block only: the flushed blocks' parts are
	// referenced, not uploaded again.
	write(t, db, n, clk.Now().UnixMilli()+1000)
	m2, p2 := backupDBFrom(t, db, dir, b, "second", m1)
	require.Equal(t, blocks, p2.Skipped, "every block part found in the bucket")
	require.Equal(t, blocks, p2.Reused, "every block part referenced without reading its volume")
	require.Equal(t, p2.Parts-blocks, p2.Uploaded, "only unflushed parts uploaded")

	want := readAllSeries(t, db, n)
	got, rep := restoreInto(t, clk, b, "second")
	require.Empty(t, rep.Damaged)
	require.Equal(t, want, readAllSeries(t, got, n))

	res, err := Verify(context.Background(), b, m2, VerifyOptions{Fraction: 1})
	require.NoError(t, err)
	require.Empty(t, res.Damaged)
	require.Equal(t, p2.Parts, res.Checked)

	// One flipped byte in a block part.
	var bad ObjectRef
	var badShard uint32
	for _, s := range m2.Shards {
		for _, o := range s.Objects {
			if o.Kind == KindBlock && bad.Key == "" {
				bad, badShard = o, s.Shard
			}
		}
	}
	root := objectFile(bad.Key)
	buf, err := os.ReadFile(root)
	require.NoError(t, err)
	buf[len(buf)/2] ^= 0x01
	require.NoError(t, os.WriteFile(root, buf, 0o644))

	res, err = Verify(context.Background(), b, m2, VerifyOptions{Fraction: 1})
	require.NoError(t, err)
	require.Len(t, res.Damaged, 1)
	require.Equal(t, bad.Key, res.Damaged[0].Key)
	require.Equal(t, badShard, res.Damaged[0].Shard)

	got2, rep2 := restoreInto(t, clk, b, "second")
	require.Len(t, rep2.Damaged, 1)
	require.Equal(t, bad.Key, rep2.Damaged[0].Key)
	after := readAllSeries(t, got2, n)
	lo, hi := bad.BlockStart, bad.BlockStart+bad.BlockSize
	for i := range n {
		var exp []point
		for _, p := range want[i] {
			if db.Shard(seriesID(i)) == badShard && p.T >= lo && p.T < hi {
				continue // the damaged block's samples are lost
			}
			exp = append(exp, p)
		}
		require.Equal(t, exp, after[i], "series %d", i)
	}
}

func objstoreRecursive() objstore.IterOption { return objstore.WithRecursiveIter() }

func snapshotCreate(db *storage.Database, dir, id string) (snapshot.Meta, error) {
	return snapshot.Create(db, dir, snapshot.Options{ID: id, NodeID: "n1"})
}

func snapshotOpen(dir, id string) (*snapshot.Snapshot, error) { return snapshot.OpenID(dir, id) }
