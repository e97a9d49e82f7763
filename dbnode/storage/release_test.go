package storage

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestLoadBatchTakesHistoryWithColdWritesOff(t *testing.T) {
	clk := &clock{t: t0.Add(30 * time.Minute)}
	opts := testOpts(t.TempDir(), clk)
	opts.Namespaces[0].ColdWrites = false
	db := openDB(t, opts)
	id := sid("hist")
	old := ms(clk.Now()) - int64(5*time.Hour/time.Millisecond)
	var rej *RejectedError
	require.ErrorAs(t, db.WriteBatch("default", samples(db, id, old)), &rej)
	require.NoError(t, db.LoadBatch("default", samples(db, id, old)))
	require.Len(t, readAll(t, db, id, old, old), 1)
}

func TestDropShardReleasesMemoryAndFiles(t *testing.T) {
	clk := &clock{t: t0.Add(30 * time.Minute)}
	db := openDB(t, testOpts(t.TempDir(), clk))
	id := sid("drop")
	base := ms(t0)
	require.NoError(t, db.WriteBatch("default", samples(db, id, base+1)))
	clk.Add(2 * time.Hour)
	require.NoError(t, db.Tick())
	require.NoError(t, db.WriteBatch("default", samples(db, id, ms(clk.Now()))))
	require.Contains(t, db.ShardsWithData(), db.Shard(id))
	require.NoError(t, db.DropShard(db.Shard(id)))
	require.NotContains(t, db.ShardsWithData(), db.Shard(id))
	require.Empty(t, readAll(t, db, id, base, ms(clk.Now())))
	require.NoError(t, db.Tick()) // removes the dropped filesets
}
