package storage

import (
	"context"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/config"
	"github.com/tessera-tsdb/tessera/dbnode/commitlog"
	"github.com/tessera-tsdb/tessera/dbnode/encoding"
	"github.com/tessera-tsdb/tessera/dbnode/vfs"
	"github.com/tessera-tsdb/tessera/ident"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC) // a block boundary for 2h blocks

// testOpts are the options of a node with the default config (the commit
// log's sizes from config.Default(), where they are written) but for 64
// shards, a sync commit log and clk.
func testOpts(dir string, clk *clock) Options {
	cl := config.Default().CommitLog
	return Options{
		Dir: dir,
		Namespaces: []NamespaceOptions{{
			Name: "default", Retention: 48 * time.Hour, BlockSize: 2 * time.Hour,
			BufferPast: 10 * time.Minute, BufferFuture: 2 * time.Minute, ColdWrites: true, Index: true,
		}},
		NumShards:           64,
		CommitLogMode:       commitlog.ModeSync,
		CommitLogFlushEvery: cl.FlushEvery,
		CommitLogMaxFile:    cl.MaxFileSize,
		CommitLogMaxPending: cl.MaxPendingBytes,
		Now:                 clk.Now,
	}
}

func openDB(t *testing.T, opts Options) *Database {
	t.Helper()
	db, err := Open(opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func sid(name string, kv ...string) []byte {
	return ident.FromLabels(labels.FromStrings(append([]string{"__name__", name}, kv...)...))
}

func samples(db *Database, id []byte, ts ...int64) []Sample {
	out := make([]Sample, len(ts))
	for i, t := range ts {
		out[i] = Sample{ID: id, Shard: db.Shard(id), T: t, V: float64(t) / 1000}
	}
	return out
}

type tv struct {
	T int64
	V float64
}

func readAll(t *testing.T, db *Database, id []byte, start, end int64) []tv {
	t.Helper()
	it, err := db.Read("default", id, start, end)
	require.NoError(t, err)
	var out []tv
	for it.Next() {
		ts, v := it.At()
		out = append(out, tv{ts, v})
	}
	require.NoError(t, it.Err())
	return out
}

func ms(t time.Time) int64 { return t.UnixMilli() }

func TestOutOfOrderAndDuplicatesLastWins(t *testing.T) {
	clk := &clock{t: t0.Add(30 * time.Minute)}
	db := openDB(t, testOpts(t.TempDir(), clk))
	id := sid("x")
	base := ms(t0)
	require.NoError(t, db.WriteBatch("default", samples(db, id, base+3000, base+1000, base+2000)))
	// Duplicate timestamp: last value wins.
	require.NoError(t, db.WriteBatch("default", []Sample{{ID: id, Shard: db.Shard(id), T: base + 1000, V: 42}}))
	require.NoError(t, db.WriteBatch("default", []Sample{{ID: id, Shard: db.Shard(id), T: base + 1000, V: 43}}))
	got := readAll(t, db, id, base, base+10_000)
	require.Equal(t, []tv{{base + 1000, 43}, {base + 2000, 2}, {base + 3000, 3}}, []tv{got[0], {got[1].T, got[1].V - float64(base)/1000}, {got[2].T, got[2].V - float64(base)/1000}})
}

func TestManyOutOfOrderStreamsCompact(t *testing.T) {
	clk := &clock{t: t0.Add(30 * time.Minute)}
	db := openDB(t, testOpts(t.TempDir(), clk))
	id := sid("ooo")
	base := ms(t0)
	// Descending timestamps open a new stream each time until compaction.
	for i := 100; i > 0; i-- {
		require.NoError(t, db.WriteBatch("default", []Sample{{ID: id, Shard: db.Shard(id), T: base + int64(i), V: float64(i)}}))
	}
	got := readAll(t, db, id, base, base+1000)
	require.Len(t, got, 100)
	for i, s := range got {
		require.Equal(t, base+int64(i+1), s.T)
		require.Equal(t, float64(i+1), s.V)
	}
}

func TestTimeRulesRejectWithReason(t *testing.T) {
	clk := &clock{t: t0.Add(30 * time.Minute)}
	opts := testOpts(t.TempDir(), clk)
	opts.Namespaces = append(opts.Namespaces, NamespaceOptions{
		Name: "nocold", Retention: 48 * time.Hour, BlockSize: 2 * time.Hour,
		BufferPast: 10 * time.Minute, BufferFuture: 2 * time.Minute, ColdWrites: false, Index: true,
	})
	db := openDB(t, opts)
	id := sid("r")
	now := ms(clk.Now())
	good := Sample{ID: id, Shard: db.Shard(id), T: now, V: 1}
	future := Sample{ID: id, Shard: db.Shard(id), T: now + int64(5*time.Minute/time.Millisecond), V: 2}
	old := Sample{ID: id, Shard: db.Shard(id), T: now - int64(49*time.Hour/time.Millisecond), V: 3}
	cold := Sample{ID: id, Shard: db.Shard(id), T: now - int64(time.Hour/time.Millisecond), V: 4}

	err := db.WriteBatch("default", []Sample{good, future, old, cold})
	var rej *RejectedError
	require.ErrorAs(t, err, &rej)
	require.Equal(t, 2, rej.Total)
	require.Equal(t, 1, rej.ByReason[ReasonTooFarFuture])
	require.Equal(t, 1, rej.ByReason[ReasonTooOld])
	require.Contains(t, err.Error(), "too far in the future: 3m0s past")
	require.Contains(t, err.Error(), "out of retention: 1h0m0s older")
	// The good and the cold sample were written.
	require.Len(t, readAll(t, db, id, now-int64(2*time.Hour/time.Millisecond), now), 2)

	err = db.WriteBatch("nocold", []Sample{cold})
	require.ErrorAs(t, err, &rej)
	require.Equal(t, 1, rej.ByReason[ReasonColdDisabled])
	require.Contains(t, err.Error(), "cold writes are disabled")

	require.ErrorIs(t, db.WriteBatch("nope", []Sample{good}), ErrUnknownNamespace)
}

func TestFlushSealedBlockReleasesMemoryAndReadsBack(t *testing.T) {
	clk := &clock{t: t0.Add(30 * time.Minute)}
	dir := t.TempDir()
	db := openDB(t, testOpts(dir, clk))
	ids := [][]byte{sid("a", "i", "1"), sid("a", "i", "2"), sid("b")}
	base := ms(t0)
	for _, id := range ids {
		require.NoError(t, db.WriteBatch("default", samples(db, id, base+1000, base+2000, base+3000)))
	}
	// Not sealed yet: nothing flushed.
	require.NoError(t, db.Tick())
	require.Equal(t, 3, countSeries(db))

	// Past block end + bufferPast: flushed and released.
	clk.Add(2 * time.Hour)
	require.NoError(t, db.Tick())
	require.Equal(t, 0, countSeries(db))
	for _, id := range ids {
		require.Len(t, readAll(t, db, id, base, base+10_000), 3)
	}
	// Queries still find the series through the index.
	res, err := db.Query(context.Background(), "default", []*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, "__name__", "a")}, base, base+10_000, QueryOptions{})
	require.NoError(t, err)
	require.Len(t, res, 2)

	// A cold write to the flushed block merges into a new volume.
	require.NoError(t, db.WriteBatch("default", []Sample{{ID: ids[0], Shard: db.Shard(ids[0]), T: base + 1500, V: 9}, {ID: ids[0], Shard: db.Shard(ids[0]), T: base + 2000, V: 10}}))
	got := readAll(t, db, ids[0], base, base+10_000)
	require.Equal(t, []tv{{base + 1000, float64(base+1000) / 1000}, {base + 1500, 9}, {base + 2000, 10}, {base + 3000, float64(base+3000) / 1000}}, got)
	require.NoError(t, db.Tick())
	require.Equal(t, 0, countSeries(db))
	require.Equal(t, got, readAll(t, db, ids[0], base, base+10_000))
	require.NoError(t, db.Tick()) // closes and removes the superseded volume

	// Reopen: everything comes back from filesets and commit log.
	require.NoError(t, db.Close())
	db2 := openDB(t, testOpts(dir, clk))
	require.Equal(t, got, readAll(t, db2, ids[0], base, base+10_000))
	require.Len(t, readAll(t, db2, ids[2], base, base+10_000), 3)
}

func TestRetentionExpiresBlocks(t *testing.T) {
	clk := &clock{t: t0.Add(30 * time.Minute)}
	db := openDB(t, testOpts(t.TempDir(), clk))
	id := sid("old")
	base := ms(t0)
	require.NoError(t, db.WriteBatch("default", samples(db, id, base+1000)))
	clk.Add(3 * time.Hour)
	require.NoError(t, db.Tick())
	require.Len(t, readAll(t, db, id, base, base+10_000), 1)
	clk.Add(48 * time.Hour)
	require.NoError(t, db.Tick())
	require.Empty(t, readAll(t, db, id, base, base+10_000))
	res, err := db.Query(context.Background(), "default", []*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, "__name__", "old")}, base, ms(clk.Now()), QueryOptions{})
	require.NoError(t, err)
	require.Empty(t, res)
}

func TestCommitLogReplayAfterClose(t *testing.T) {
	clk := &clock{t: t0.Add(30 * time.Minute)}
	dir := t.TempDir()
	db := openDB(t, testOpts(dir, clk))
	id := sid("replay", "k", "v")
	base := ms(t0)
	stale := math.Float64frombits(0x7ff0000000000002)
	require.NoError(t, db.WriteBatch("default", []Sample{{ID: id, Shard: db.Shard(id), T: base + 1, V: stale}, {ID: id, Shard: db.Shard(id), T: base + 2, V: 2}}))
	require.NoError(t, db.Close())
	db2 := openDB(t, testOpts(dir, clk))
	got := readAll(t, db2, id, base, base+10)
	require.Len(t, got, 2)
	require.Equal(t, uint64(0x7ff0000000000002), math.Float64bits(got[0].V))
}

func TestCommitLogFilesDeletedOnceFlushed(t *testing.T) {
	clk := &clock{t: t0.Add(30 * time.Minute)}
	db := openDB(t, testOpts(t.TempDir(), clk))
	id := sid("cl")
	base := ms(t0)
	require.NoError(t, db.WriteBatch("default", samples(db, id, base+1000)))
	clk.Add(2 * time.Hour)
	require.NoError(t, db.Tick()) // flushes
	require.NoError(t, db.Tick()) // rotates, sees the file fully flushed, deletes it
	require.Empty(t, db.cl.Files())
}

func TestFlushFaultKeepsDataAndRetries(t *testing.T) {
	clk := &clock{t: t0.Add(30 * time.Minute)}
	fs := vfs.NewFaulty(vfs.OS())
	opts := testOpts(t.TempDir(), clk)
	opts.FS = fs
	db := openDB(t, opts)
	id := sid("fault")
	base := ms(t0)
	require.NoError(t, db.WriteBatch("default", samples(db, id, base+1000, base+2000)))
	clk.Add(2 * time.Hour)
	fs.Set(func(op vfs.Op, path string, _ int) (bool, int) {
		return op == vfs.OpSync && !contains(path, "commitlog"), 0
	})
	require.ErrorIs(t, db.Tick(), vfs.ErrInjected)
	require.Len(t, readAll(t, db, id, base, base+10_000), 2) // still served from memory
	fs.Set(nil)
	require.NoError(t, db.Tick())
	require.Equal(t, 0, countSeries(db))
	require.Len(t, readAll(t, db, id, base, base+10_000), 2)
}

func TestCommitLogFaultFailsWrite(t *testing.T) {
	clk := &clock{t: t0.Add(30 * time.Minute)}
	fs := vfs.NewFaulty(vfs.OS())
	opts := testOpts(t.TempDir(), clk)
	opts.FS = fs
	db := openDB(t, opts)
	id := sid("clfault")
	base := ms(t0)
	require.NoError(t, db.WriteBatch("default", samples(db, id, base+1000)))
	fs.Set(func(op vfs.Op, _ string, _ int) (bool, int) { return op == vfs.OpSync, 0 })
	require.ErrorIs(t, db.WriteBatch("default", samples(db, id, base+2000)), vfs.ErrInjected)
	fs.Set(nil)
	require.NoError(t, db.WriteBatch("default", samples(db, id, base+3000)))
	got := readAll(t, db, id, base, base+10_000)
	require.Equal(t, base+1000, got[0].T)
	require.Equal(t, base+3000, got[len(got)-1].T)
}

func TestConcurrentWritersAndReaders(t *testing.T) {
	clk := &clock{t: t0.Add(30 * time.Minute)}
	db := openDB(t, testOpts(t.TempDir(), clk))
	base := ms(t0)
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for j := 0; j < 50; j++ {
				batch := make([]Sample, 0, 20)
				for s := 0; s < 20; s++ {
					id := sid("c", "s", string(rune('a'+s)))
					batch = append(batch, Sample{ID: id, Shard: db.Shard(id), T: base + int64(w*1000+j), V: float64(j)})
				}
				require.NoError(t, db.WriteBatch("default", batch))
				if j%10 == 0 {
					_ = db.Tick()
					_, err := db.Query(context.Background(), "default", []*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, "__name__", "c")}, base, base+100_000, QueryOptions{})
					require.NoError(t, err)
				}
			}
		}(w)
	}
	wg.Wait()
	res, err := db.Query(context.Background(), "default", []*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, "__name__", "c")}, base, base+100_000, QueryOptions{})
	require.NoError(t, err)
	require.Len(t, res, 20)
	for _, r := range res {
		n := 0
		for r.Values.Next() {
			n++
		}
		require.Equal(t, 8*50, n)
	}
}

func countSeries(db *Database) int {
	n := 0
	for _, ns := range db.nsList {
		for _, sh := range ns.allShards() {
			n += len(sh.snapshotSeries())
		}
	}
	return n
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

var _ = encoding.ErrOutOfOrder

// TestTickCompactsOutOfOrderStreams: a tick merges the streams that
// out-of-order writes left in a bucket (reads would otherwise merge them
// sample by sample until the block is flushed) once they took no sample
// for a tick, and the series reads the same before and after, duplicates
// resolved last-write-wins.
func TestTickCompactsOutOfOrderStreams(t *testing.T) {
	clk := &clock{t: t0.Add(30 * time.Minute)}
	db := openDB(t, testOpts(t.TempDir(), clk))
	id := sid("ooo-tick")
	base := ms(t0)
	// Batches of ten in order, the batches in a shuffled order: several
	// streams, fewer than the write path's own compaction threshold.
	for _, k := range []int{3, 0, 5, 1, 4, 2} {
		var batch []Sample
		for i := range 10 {
			batch = append(batch, Sample{ID: id, Shard: db.Shard(id), T: base + int64(k*10+i)*1000, V: float64(k*10 + i)})
		}
		require.NoError(t, db.WriteBatch("default", batch))
	}
	require.NoError(t, db.WriteBatch("default", []Sample{{ID: id, Shard: db.Shard(id), T: base + 7000, V: -7}}))
	streams := func() int {
		se := storedSeries(t, db, id)
		se.mu.Lock()
		defer se.mu.Unlock()
		n := 0
		for b := range se.floatBuckets() {
			b.streams(func(*encoding.Encoder) bool { n++; return true })
		}
		return n
	}
	require.Greater(t, streams(), 1)
	before := readAll(t, db, id, base, base+100_000)
	require.Len(t, before, 60)
	require.Equal(t, tv{base + 7000, -7}, before[7])
	require.NoError(t, db.Tick())
	// Still written out of order since the previous tick: left alone.
	require.NoError(t, db.WriteBatch("default", []Sample{{ID: id, Shard: db.Shard(id), T: base + 7500, V: 7.5}}))
	require.NoError(t, db.Tick())
	require.Greater(t, streams(), 1, "streams still taking samples are not merged")
	before = readAll(t, db, id, base, base+100_000)
	require.Len(t, before, 61)
	require.NoError(t, db.Tick())
	require.Equal(t, 1, streams(), "a tick merges the streams that took no sample since the previous one")
	require.Equal(t, before, readAll(t, db, id, base, base+100_000))
	// Writes after the merge go on, in order or not.
	require.NoError(t, db.WriteBatch("default", []Sample{{ID: id, Shard: db.Shard(id), T: base + 60_000, V: 60},
		{ID: id, Shard: db.Shard(id), T: base + 500, V: 0.5}}))
	got := readAll(t, db, id, base, base+100_000)
	require.Len(t, got, 63)
	require.Equal(t, tv{base + 500, 0.5}, got[1])
	require.Equal(t, tv{base + 60_000, 60}, got[62])
}
