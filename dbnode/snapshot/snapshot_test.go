package snapshot

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/tessera-tsdb/tessera/dbnode/commitlog"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
	"github.com/tessera-tsdb/tessera/dbnode/storage/storagetest"
	"github.com/tessera-tsdb/tessera/ident"
	"github.com/tessera-tsdb/tessera/internal/waitfor"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// clock is the tests' settable clock.
type clock = storagetest.Clock

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

func open(t *testing.T, clk *clock) (*storage.Database, string) {
	dir := t.TempDir()
	db, err := storage.Open(storagetest.Options(storage.Options{Dir: dir, NumShards: 8, CommitLogMode: commitlog.ModeSync, Now: clk.Now,
		Namespaces: []storage.NamespaceOptions{{Name: "default", Retention: 48 * time.Hour, BlockSize: 2 * time.Hour,
			BufferPast: 10 * time.Minute, BufferFuture: 2 * time.Minute, ColdWrites: true, Index: true}}}))
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return db, dir
}

func sid(i int) []byte {
	return ident.FromLabels(labels.FromStrings("__name__", "m", "i", fmt.Sprint(i)))
}

// TestSnapshotHoldsEverythingAcknowledgedBefore takes a snapshot while
// writers write and the clock and ticks move blocks from memory into
// filesets: loaded into a fresh database, the snapshot holds every
// sample acknowledged before Create was called.
func TestSnapshotHoldsEverythingAcknowledgedBefore(t *testing.T) {
	clk := storagetest.NewClock(t0.Add(131 * time.Minute))
	db, dir := open(t, clk)
	const n = 30
	var acked atomic.Int64 // samples per series acknowledged so far (all series, in order)
	writeRound := func(k int64) error {
		var batch []storage.Sample
		ts := t0.UnixMilli() + k*60_000
		for i := range n {
			batch = append(batch, storage.Sample{ID: sid(i), Shard: db.Shard(sid(i)), T: ts, V: float64(k)})
		}
		return db.WriteBatch("default", batch)
	}
	for k := range int64(60) {
		require.NoError(t, writeRound(k))
		acked.Store(k + 1)
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Go(func() {
		for k := acked.Load(); !stop.Load() && k < 200; k++ {
			clk.Add(time.Minute)
			if writeRound(k) != nil {
				return
			}
			acked.Store(k + 1)
			_ = db.Tick()
		}
	})
	// A writer that fails stops short, and this wait fails at its deadline.
	waitfor.Condition(t, time.Minute, time.Millisecond, "three rounds written beside the snapshot's start", func() error {
		if n := acked.Load(); n < 63 {
			return fmt.Errorf("%d rounds written", n)
		}
		return nil
	})
	before := acked.Load()
	m, err := Create(db, dir, Options{ID: "s", NodeID: "n"})
	stop.Store(true)
	wg.Wait()
	require.NoError(t, err)
	require.NotEmpty(t, m.Blocks, "some blocks were flushed")

	s, err := OpenID(dir, "s")
	require.NoError(t, err)
	defer s.Close()
	fresh, _ := open(t, clk)
	for _, b := range m.Blocks {
		part, _, _, err := s.BlockPart(b)
		require.NoError(t, err)
		h, series, err := DecodeBlock(part)
		require.NoError(t, err)
		require.NoError(t, fresh.LoadBlocks(h.Namespace, []storage.StreamedBlock{{Shard: h.Shard, BlockStart: h.BlockStart, Series: series}}))
	}
	for _, u := range m.Unflushed {
		part, err := s.UnflushedPart(u)
		require.NoError(t, err)
		h, streams, err := DecodeUnflushed(part)
		require.NoError(t, err)
		_, err = fresh.LoadStreams(h.Namespace, h.Shard, streams)
		require.NoError(t, err)
	}
	for i := range n {
		it, err := fresh.Read("default", sid(i), 0, 1<<62)
		require.NoError(t, err)
		got := map[int64]bool{}
		for it.Next() {
			ts, _ := it.At()
			got[ts] = true
		}
		require.NoError(t, it.Err())
		for k := range before {
			require.True(t, got[t0.UnixMilli()+k*60_000], "series %d sample %d (acknowledged before the snapshot) missing", i, k)
		}
	}
	list, err := List(dir)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.NoError(t, Delete(dir, "s"))
	list, err = List(dir)
	require.NoError(t, err)
	require.Empty(t, list)
}

// TestUnflushedPartsInOneFile: every shard's unflushed part is in one
// file of the snapshot; a damaged byte in it fails that shard's part only,
// naming it; the one-file-per-shard layout of earlier snapshots still
// reads.
func TestUnflushedPartsInOneFile(t *testing.T) {
	clk := storagetest.NewClock(t0.Add(30 * time.Minute))
	db, dir := open(t, clk)
	var batch []storage.Sample
	for i := range 40 {
		batch = append(batch, storage.Sample{ID: sid(i), Shard: db.Shard(sid(i)), T: t0.UnixMilli() + int64(i), V: float64(i)})
	}
	require.NoError(t, db.WriteBatch("default", batch))
	m, err := Create(db, dir, Options{ID: "s", NodeID: "n1"})
	require.NoError(t, err)
	require.Greater(t, len(m.Unflushed), 1)
	s, err := OpenID(dir, "s")
	require.NoError(t, err)
	defer s.Close()
	series := 0
	for _, e := range m.Unflushed {
		require.Equal(t, unflushedFile, e.File)
		b, err := s.UnflushedPart(e)
		require.NoError(t, err)
		_, got, err := DecodeUnflushed(b)
		require.NoError(t, err)
		series += len(got)
	}
	require.Equal(t, 40, series)

	// The earlier layout: the same bytes in a file of their own.
	e := m.Unflushed[0]
	want, err := s.UnflushedPart(e)
	require.NoError(t, err)
	p := unflushedPath(s.Dir, e.Namespace, e.Shard)
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, want, 0o644))
	old := e
	old.File, old.Offset = "", 0
	got, err := s.UnflushedPart(old)
	require.NoError(t, err)
	require.Equal(t, want, got)

	// One flipped byte in the second part.
	bad := m.Unflushed[1]
	f := filepath.Join(s.Dir, unflushedFile)
	raw, err := os.ReadFile(f)
	require.NoError(t, err)
	raw[bad.Offset+bad.Bytes/2] ^= 0x01
	require.NoError(t, os.WriteFile(f, raw, 0o644))
	_, err = s.UnflushedPart(bad)
	require.ErrorIs(t, err, ErrCorrupt)
	require.ErrorContains(t, err, fmt.Sprintf("shard %d", bad.Shard))
	_, err = s.UnflushedPart(m.Unflushed[0])
	require.NoError(t, err)
}
