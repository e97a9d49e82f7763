package storage

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// WriteBatch hands back a ref per sample; a ref handed back is used, and a
// stale one (series flushed out of memory, shard dropped, another
// database) is noticed and replaced, never written into.
func TestSampleRefs(t *testing.T) {
	clk := &clock{t: t0.Add(30 * time.Minute)}
	db := openDB(t, testOpts(t.TempDir(), clk))
	id, other := sid("ref", "k", "a"), sid("ref", "k", "b")
	base := ms(t0)

	b := []Sample{{ID: id, Shard: db.Shard(id), T: base + 1000, V: 1}, {ID: other, Shard: db.Shard(other), T: base + 1000, V: 2}}
	require.NoError(t, db.WriteBatch("default", b))
	require.NotZero(t, b[0].Ref)
	require.NotEqual(t, b[0].Ref, b[1].Ref)
	ref := b[0].Ref

	// Handed back, the ref is the series written to.
	b2 := []Sample{{ID: id, Shard: db.Shard(id), T: base + 2000, V: 3, Ref: ref}}
	require.NoError(t, db.WriteBatch("default", b2))
	require.Equal(t, ref, b2[0].Ref)
	require.Equal(t, []tv{{base + 1000, 1}, {base + 2000, 3}}, readAll(t, db, id, base, base+10_000))

	// The block is flushed and the series leaves memory: the old ref is
	// stale, the write goes to the series now in memory.
	clk.Add(2 * time.Hour)
	require.NoError(t, db.Tick())
	require.Equal(t, 0, countSeries(db))
	b3 := []Sample{{ID: id, Shard: db.Shard(id), T: base + 3000, V: 4, Ref: ref}}
	require.NoError(t, db.WriteBatch("default", b3))
	require.NotEqual(t, ref, b3[0].Ref)
	require.Equal(t, 1, countSeries(db))
	require.Equal(t, []tv{{base + 1000, 1}, {base + 2000, 3}, {base + 3000, 4}}, readAll(t, db, id, base, base+10_000))

	// The shard is dropped: its series' refs are stale too.
	ref = b3[0].Ref
	require.NoError(t, db.DropShard(db.Shard(id)))
	b4 := []Sample{{ID: id, Shard: db.Shard(id), T: ms(clk.Now()), V: 5, Ref: ref}}
	require.NoError(t, db.WriteBatch("default", b4))
	require.NotEqual(t, ref, b4[0].Ref)
	require.Equal(t, []tv{{ms(clk.Now()), 5}}, readAll(t, db, id, base, ms(clk.Now())))

	// A ref of another database is not taken.
	db2 := openDB(t, testOpts(t.TempDir(), clk))
	b5 := []Sample{{ID: other, Shard: db2.Shard(other), T: ms(clk.Now()), V: 6, Ref: b4[0].Ref}}
	require.NoError(t, db2.WriteBatch("default", b5))
	require.NotEqual(t, b4[0].Ref, b5[0].Ref)
	require.Equal(t, []tv{{ms(clk.Now()), 6}}, readAll(t, db2, other, base, ms(clk.Now())))
	require.Empty(t, readAll(t, db2, id, base, ms(clk.Now())))
}

// A batch is written a lock stripe at a time, but one series' samples
// keep their batch order: of two values for one timestamp, the later
// wins, whatever other series sit between them.
func TestBatchKeepsPerSeriesOrderAcrossStripes(t *testing.T) {
	clk := &clock{t: t0.Add(30 * time.Minute)}
	db := openDB(t, testOpts(t.TempDir(), clk))
	base := ms(t0)
	const n = 300 // series, spread over every stripe
	ids := make([][]byte, n)
	var batch []Sample
	for i := range ids {
		ids[i] = sid("order", "i", string(rune('a'+i%26))+string(rune('a'+i/26)))
		batch = append(batch, Sample{ID: ids[i], Shard: db.Shard(ids[i]), T: base + 1000, V: 1})
	}
	for i := range ids {
		batch = append(batch, Sample{ID: ids[i], Shard: db.Shard(ids[i]), T: base + 1000, V: float64(i + 2)})
		batch = append(batch, Sample{ID: ids[i], Shard: db.Shard(ids[i]), T: base + 500, V: -1})
	}
	require.NoError(t, db.WriteBatch("default", batch))
	for i, id := range ids {
		require.Equal(t, []tv{{base + 500, -1}, {base + 1000, float64(i + 2)}}, readAll(t, db, id, base, base+10_000))
	}
}

// ResolveRefs finds only series held in memory under the exact ID in the
// shard named, in the namespace named, and creates nothing.
func TestResolveRefs(t *testing.T) {
	clk := &clock{t: t0.Add(30 * time.Minute)}
	db := openDB(t, testOpts(t.TempDir(), clk))
	id, unknown := sid("res", "k", "a"), sid("res", "k", "b")
	shard := db.Shard(id)
	w := []Sample{{ID: id, Shard: shard, T: ms(t0) + 1000, V: 1}}
	require.NoError(t, db.WriteBatch("default", w))

	copyID := append([]byte(nil), id...) // equal bytes, another slice
	b := []Sample{
		{ID: id, Shard: shard}, {ID: id, Shard: shard}, // a run: one lookup
		{ID: copyID, Shard: shard},
		{ID: id, Shard: (shard + 1) % db.NumShards()}, // wrong shard
		{ID: unknown, Shard: db.Shard(unknown)},
		{ID: id, Shard: db.NumShards()}, // out of range
		{ID: id[:len(id)-1], Shard: shard},
	}
	db.ResolveRefs("default", b)
	require.Equal(t, w[0].Ref, b[0].Ref)
	require.Equal(t, w[0].Ref, b[1].Ref)
	require.Equal(t, w[0].Ref, b[2].Ref)
	for i := 3; i < len(b); i++ {
		require.Zero(t, b[i].Ref, "sample %d", i)
	}
	nsShards := db.namespaces["default"].shards
	require.Nil(t, nsShards[(shard+1)%db.NumShards()].Load(), "a lookup must not create a shard")

	// A ref the caller set is kept (WriteBatch checks it).
	b = []Sample{{ID: unknown, Shard: db.Shard(unknown), Ref: w[0].Ref}}
	db.ResolveRefs("default", b)
	require.Equal(t, w[0].Ref, b[0].Ref)

	b = []Sample{{ID: id, Shard: shard}}
	db.ResolveRefs("nope", b)
	require.Zero(t, b[0].Ref, "unknown namespace")
	require.Equal(t, 1, countSeries(db))
}

// A live ref takes the write path's inline admission (the time window
// compared per batch): it must refuse what check refuses, for the same
// reasons, and take cold samples of a bootstrap.
func TestRefDoesNotSkipTimeRules(t *testing.T) {
	clk := &clock{t: t0.Add(30 * time.Minute)}
	opts := testOpts(t.TempDir(), clk)
	opts.Namespaces = append(opts.Namespaces, NamespaceOptions{
		Name: "nocold", Retention: 48 * time.Hour, BlockSize: 2 * time.Hour,
		BufferPast: 10 * time.Minute, BufferFuture: 2 * time.Minute, ColdWrites: false, Index: true,
	})
	db := openDB(t, opts)
	id := sid("refrules")
	now := ms(clk.Now())
	at := func(t int64, ref SeriesRef) Sample { return Sample{ID: id, Shard: db.Shard(id), T: t, V: 1, Ref: ref} }
	first := []Sample{at(now, 0)}
	require.NoError(t, db.WriteBatch("nocold", first))
	ref := first[0].Ref
	require.NotZero(t, ref)

	future, old, cold := now+int64(3*time.Minute/time.Millisecond), now-int64(49*time.Hour/time.Millisecond), now-int64(time.Hour/time.Millisecond)
	bad := at(now+1, ref)
	bad.Shard = 1 << 30
	batch := []Sample{at(now+1, ref), at(future, ref), at(old, ref), at(cold, ref), bad}
	var rej *RejectedError
	require.ErrorAs(t, db.WriteBatch("nocold", batch), &rej)
	require.Equal(t, 4, rej.Total)
	require.Equal(t, 1, rej.ByReason[ReasonTooFarFuture])
	require.Equal(t, 1, rej.ByReason[ReasonTooOld])
	require.Equal(t, 1, rej.ByReason[ReasonColdDisabled])
	require.Equal(t, 1, rej.ByReason[ReasonBadID])
	require.Equal(t, ref, batch[0].Ref)
	require.Len(t, readAll(t, db, id, old, future), 0, "another namespace's read")

	// The edges of the window are taken; a bootstrap takes the cold one.
	edges := []Sample{at(now+int64(2*time.Minute/time.Millisecond), ref), at(now-int64(10*time.Minute/time.Millisecond), ref)}
	require.NoError(t, db.WriteBatch("nocold", edges))
	require.NoError(t, db.LoadBatch("nocold", []Sample{at(cold, ref)}))
	it, err := db.Read("nocold", id, old, future)
	require.NoError(t, err)
	var got []int64
	for it.Next() {
		ts, _ := it.At()
		got = append(got, ts)
	}
	require.NoError(t, it.Err())
	require.Equal(t, []int64{cold, now - int64(10*time.Minute/time.Millisecond), now, now + 1, now + int64(2*time.Minute/time.Millisecond)}, got)
}
