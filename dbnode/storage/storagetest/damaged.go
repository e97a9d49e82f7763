package storagetest

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/tessera-tsdb/tessera/dbnode/commitlog"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
	"github.com/tessera-tsdb/tessera/ident"
)

// DamagedBlock is a database whose one flushed block has its first data
// page damaged on disk, for tests of what a damaged page costs.
type DamagedBlock struct {
	DB *storage.Database
	// Start is the block's start (unix ms); series "damaged_test" with
	// label i = 000000, 000001, ... have samples at Start+1000, +2000,
	// +3000 with value t/1000.
	Start int64
	IDs   [][]byte // every series written, in order
	Now   func() time.Time
}

// OpenDamaged writes n series into a one-shard database, flushes their
// block to a fileset, damages one byte of its first data page and opens
// the database again (closed at tb's cleanup). n above ~3000 spreads the
// series over several pages, so only some of them are damaged.
func OpenDamaged(tb testing.TB, n int) DamagedBlock {
	tb.Helper()
	start := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC) // a 2h block boundary
	var mu sync.Mutex
	now := start.Add(30 * time.Minute)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	opts := Options(storage.Options{
		Dir:           tb.TempDir(),
		Namespaces:    []storage.NamespaceOptions{Namespace()},
		NumShards:     1,
		CommitLogMode: commitlog.ModeSync,
		Now:           clock,
	})
	db, err := storage.Open(opts)
	if err != nil {
		tb.Fatalf("open storage: %v", err)
	}
	d := DamagedBlock{Start: start.UnixMilli(), Now: clock}
	var batch []storage.Sample
	for i := range n {
		id := ident.FromLabels(labels.FromStrings("__name__", "damaged_test", "i", fmt.Sprintf("%06d", i)))
		d.IDs = append(d.IDs, id)
		for _, t := range []int64{d.Start + 1000, d.Start + 2000, d.Start + 3000} {
			batch = append(batch, storage.Sample{ID: id, T: t, V: float64(t) / 1000})
		}
	}
	if err := db.WriteBatch("default", batch); err != nil {
		tb.Fatalf("write: %v", err)
	}
	mu.Lock()
	now = now.Add(2 * time.Hour) // past the block's end and buffer: flushed by Tick
	mu.Unlock()
	if err := db.Tick(); err != nil {
		tb.Fatalf("tick: %v", err)
	}
	if err := db.Close(); err != nil {
		tb.Fatalf("close: %v", err)
	}
	m, err := filepath.Glob(filepath.Join(opts.Dir, "data", "default", "fileset-*-0-data.db"))
	if err != nil || len(m) != 1 {
		tb.Fatalf("want one data file, got %v (%v)", m, err)
	}
	b, err := os.ReadFile(m[0])
	if err != nil {
		tb.Fatal(err)
	}
	b[8+20] ^= 0x55 // inside page 0 of shard 0 (pages start after the 8-byte header)
	if err := os.WriteFile(m[0], b, 0o644); err != nil {
		tb.Fatal(err)
	}
	if d.DB, err = storage.Open(opts); err != nil {
		tb.Fatalf("reopen storage: %v", err)
	}
	tb.Cleanup(func() { _ = d.DB.Close() })
	return d
}
