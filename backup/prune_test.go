package backup

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tessera-tsdb/tessera/dbnode/storage/storagetest"
)

// TestPruneKeepsReferencedObjects keeps the newest backup of three: the
// other manifests go, every object only they referenced goes, and the
// kept backup still verifies and restores whole. An in-progress mark
// younger than the grace stops object deletion.
func TestPruneKeepsReferencedObjects(t *testing.T) {
	clk := storagetest.NewClock(t0.Add(5*time.Hour + 30*time.Minute))
	db, dir := openDB(t, clk)
	const n = 20
	base := t0.UnixMilli()
	write(t, db, n, base, base+2*3600_000, base+4*3600_000)
	require.NoError(t, db.Tick())
	b, _ := fsBucket(t)
	ctx := context.Background()
	for i, id := range []string{"a", "b", "c"} {
		write(t, db, n, clk.Now().UnixMilli()+int64(i)) // changes every unflushed part
		backupDB(t, db, dir, b, id)
		clk.Add(time.Minute)
	}
	want := readAllSeries(t, db, n)
	count := func() int {
		k := 0
		require.NoError(t, b.Iter(ctx, objectsDir+"/", func(string) error { k++; return nil }, objstoreRecursive()))
		return k
	}
	before := count()

	require.NoError(t, MarkInProgress(ctx, b, "running", time.Now()))
	res, err := Prune(ctx, b, PruneOptions{KeepLast: 1, Grace: time.Hour})
	require.NoError(t, err)
	require.Equal(t, []string{"c"}, res.Kept)
	require.Equal(t, []string{"a", "b"}, res.Deleted)
	require.Equal(t, []string{"running"}, res.Blocked)
	require.Equal(t, before, count(), "no object deleted while a backup runs")

	require.NoError(t, ClearInProgress(ctx, b, "running"))
	res, err = Prune(ctx, b, PruneOptions{KeepLast: 1, Grace: 0})
	require.NoError(t, err)
	require.Positive(t, res.ObjectsDeleted)
	require.Equal(t, before-res.ObjectsDeleted, count())

	ms, err := List(ctx, b)
	require.NoError(t, err)
	require.Len(t, ms, 1)
	vr, err := Verify(ctx, b, ms[0], VerifyOptions{Fraction: 1})
	require.NoError(t, err)
	require.Empty(t, vr.Damaged)
	require.Equal(t, ms[0].Totals.Objects, vr.Checked)
	got, rep := restoreInto(t, clk, b, "c")
	require.Empty(t, rep.Damaged)
	require.Equal(t, want, readAllSeries(t, got, n))

	_, err = Prune(ctx, b, PruneOptions{})
	require.ErrorContains(t, err, "keep-last")
}

// TestUploadRateLimit: an upload bounded to r bytes/s takes at least
// bytes/r (a lower bound, which a loaded machine only lengthens).
func TestUploadRateLimit(t *testing.T) {
	clk := storagetest.NewClock(t0.Add(30 * time.Minute))
	db, dir := openDB(t, clk)
	write(t, db, 200, t0.UnixMilli(), t0.UnixMilli()+1000)
	_, err := snapshotCreate(db, dir, "r")
	require.NoError(t, err)
	s, err := snapshotOpen(dir, "r")
	require.NoError(t, err)
	defer s.Close()
	b, _ := fsBucket(t)
	const rate = 20 << 10
	start := time.Now()
	_, p, err := Upload(context.Background(), b, s, UploadOptions{Shards: allShards(), Concurrency: 4, BytesPerSecond: rate})
	require.NoError(t, err)
	require.Greater(t, p.BytesUploaded, int64(rate/4), "enough bytes for the bound to show")
	require.GreaterOrEqual(t, time.Since(start), time.Duration(float64(p.BytesUploaded)/rate*float64(time.Second))-time.Millisecond)
}
