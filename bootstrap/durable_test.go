package bootstrap

import (
	"context"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/client"
	"github.com/tessera-tsdb/tessera/dbnode/commitlog"
	"github.com/tessera-tsdb/tessera/dbnode/rpc"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
	"github.com/tessera-tsdb/tessera/dbnode/storage/storagetest"
	"github.com/tessera-tsdb/tessera/dbnode/vfs"
	"github.com/tessera-tsdb/tessera/placement"
	"github.com/uber-go/tally/v4"
)

// powerCutFS is the real file system, remembering for every file written
// through it how many of its bytes an fsync made durable. cut copies the
// tree as a power cut at that moment would leave it: a written file keeps
// only its fsynced bytes (none if it was never fsynced). Directory entries
// are taken as durable (the storage layers SyncDir after creating and
// renaming; this models file contents, which is what a deferred fsync
// could lose).
type powerCutFS struct {
	vfs.FS
	mu     sync.Mutex
	synced map[string]int64 // written files -> durable bytes
}

func newPowerCutFS() *powerCutFS { return &powerCutFS{FS: vfs.OS(), synced: map[string]int64{}} }

type powerCutFile struct {
	vfs.File
	fs   *powerCutFS
	name string
}

func (f *powerCutFS) track(name string, file vfs.File, existing bool) vfs.File {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.synced[name]; !ok {
		var n int64
		if existing { // what was there before this FS wrote to it
			if st, err := file.Stat(); err == nil {
				n = st.Size()
			}
		}
		f.synced[name] = n
	}
	return &powerCutFile{File: file, fs: f, name: name}
}

func (f *powerCutFS) Create(name string) (vfs.File, error) {
	file, err := f.FS.Create(name)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.synced[name] = 0
	f.mu.Unlock()
	return f.track(name, file, false), nil
}

func (f *powerCutFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	file, err := f.FS.OpenFile(name, flag, perm)
	if err != nil || flag&(os.O_WRONLY|os.O_RDWR|os.O_APPEND) == 0 {
		return file, err
	}
	return f.track(name, file, true), nil
}

func (f *powerCutFS) Rename(oldpath, newpath string) error {
	if err := f.FS.Rename(oldpath, newpath); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if n, ok := f.synced[oldpath]; ok {
		delete(f.synced, oldpath)
		f.synced[newpath] = n
	}
	return nil
}

func (f *powerCutFS) Remove(name string) error {
	if err := f.FS.Remove(name); err != nil {
		return err
	}
	f.mu.Lock()
	delete(f.synced, name)
	f.mu.Unlock()
	return nil
}

func (p *powerCutFile) Sync() error {
	if err := p.File.Sync(); err != nil {
		return err
	}
	st, err := p.File.Stat()
	if err != nil {
		return err
	}
	p.fs.mu.Lock()
	p.fs.synced[p.name] = st.Size()
	p.fs.mu.Unlock()
	return nil
}

func (p *powerCutFile) Truncate(size int64) error {
	if err := p.File.Truncate(size); err != nil {
		return err
	}
	p.fs.mu.Lock()
	p.fs.synced[p.name] = min(p.fs.synced[p.name], size)
	p.fs.mu.Unlock()
	return nil
}

// cut copies src to dst as a power cut now would leave it.
func (f *powerCutFS) cut(t *testing.T, src, dst string) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		out := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(out, 0o755)
		}
		in, err := os.Open(path)
		if err != nil {
			return err
		}
		defer in.Close()
		st, err := in.Stat()
		if err != nil {
			return err
		}
		n := st.Size()
		if s, written := f.synced[path]; written {
			n = min(n, s)
		}
		w, err := os.Create(out)
		if err != nil {
			return err
		}
		if _, err := io.CopyN(w, in, n); err != nil {
			w.Close()
			return err
		}
		return w.Close()
	})
	require.NoError(t, err, "power cut copy")
}

// hookPeer runs onUnflushed before serving each FetchUnflushed call (n
// counts from 1).
type hookPeer struct {
	*fakePeer
	calls       atomic.Int64
	onUnflushed func(n int64)
}

func (h *hookPeer) FetchUnflushed(ctx context.Context, req *rpc.FetchUnflushedRequest) (*rpc.FetchUnflushedResponse, error) {
	if n := h.calls.Add(1); h.onUnflushed != nil {
		h.onUnflushed(n)
	}
	return h.fakePeer.FetchUnflushed(ctx, req)
}

// unflushedPeer holds only unflushed data: per shard, series x samples
// from memT, served pageSeries series per page.
func unflushedPeer(t *testing.T, series, samples, pageSeries int) (*fakePeer, map[string][]sample) {
	p := newFakePeer()
	p.pageSeries = pageSeries
	want := map[string][]sample{}
	for sh := uint32(0); sh < numShards; sh++ {
		m := map[string][]sample{}
		for i, id := range ids(sh, series) {
			m[id] = run(memT, samples, float64(int(sh)*1000+i)+0.25)
			want[id] = m[id]
		}
		p.addUnflushed(t, sh, m)
	}
	return p, want
}

func openDurable(t *testing.T, dir string, fsys vfs.FS) *storage.Database {
	t.Helper()
	db, err := storage.Open(storagetest.Options(storage.Options{Dir: dir, FS: fsys, Namespaces: []storage.NamespaceOptions{storagetest.Namespace()},
		NumShards: numShards, Now: func() time.Time { return now }, CommitLogMode: commitlog.ModeSync}))
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func newDurableBootstrapper(t *testing.T, db *storage.Database, store *fakeStore, peer Peer) *Bootstrapper {
	t.Helper()
	b, err := New(Options{
		InstanceID: self, DB: db, Store: store,
		Dial:    func(string) (Peer, error) { return peer, nil },
		Workers: 2, ShardsPerFetch: 2,
		MarkAvailableAttempts: 1, MarkAvailableBackoff: time.Millisecond,
	})
	require.NoError(t, err)
	return b
}

func requireSeries(t *testing.T, db *storage.Database, want map[string][]sample) {
	t.Helper()
	for id, ss := range want {
		it, err := db.Read(ns, []byte(id), blockA-1, nowMs+1)
		require.NoError(t, err)
		var got []sample
		for it.Next() {
			ts, v := it.At()
			got = append(got, sample{ts, v})
		}
		require.NoError(t, it.Err())
		require.Equal(t, ss, got, "series %s", id)
	}
}

// Streamed unflushed samples are queued in the commit log without waiting
// for each page's fsync; they must all be durable by the time the
// mark-available CAS is sent. The power cut is taken inside the CAS: a
// node that dies right after it must restart with everything it streamed.
func TestStreamedUnflushedSurvivesPowerCutAtMarkAvailable(t *testing.T) {
	peer, want := unflushedPeer(t, 40, 360, 3)
	dir := t.TempDir()
	pc := newPowerCutFS()
	db := openDurable(t, dir, pc)
	all := []uint32{0, 1, 2, 3}
	snap := t.TempDir()
	cuts := 0
	store := &fakeStore{p: mkPlacement(all, "p1"), beforeMark: func(call int, _ *placement.Placement) {
		cuts++
		pc.cut(t, dir, snap)
	}}
	b := newDurableBootstrapper(t, db, store, peer)
	p, err := store.Placement(context.Background())
	require.NoError(t, err)
	require.NoError(t, b.Reconcile(context.Background(), client.NewMap(p)))
	require.Equal(t, 1, cuts, "one mark-available CAS")
	for _, sh := range all {
		st, _ := store.state(self, sh)
		require.Equal(t, placement.Available, st, "shard %d", sh)
	}
	requireSeries(t, db, want) // in memory
	restarted := openDurable(t, snap, vfs.OS())
	requireSeries(t, restarted, want) // what survived the power cut
}

// A node that dies mid-stream (power cut before any CAS) restarts with
// its shards still INITIALIZING and whatever the cut kept; streaming
// again completes them, exactly (no sample twice, none missing).
func TestPowerCutMidStreamRestreamsOnRestart(t *testing.T) {
	fp, want := unflushedPeer(t, 40, 360, 3)
	all := []uint32{0, 1, 2, 3}
	dir, snap := t.TempDir(), t.TempDir()
	pc := newPowerCutFS()
	db := openDurable(t, dir, pc)
	peer := &hookPeer{fakePeer: fp}
	peer.onUnflushed = func(n int64) {
		if n == 12 { // a few pages in: some loaded, some queued
			pc.cut(t, dir, snap)
		}
	}
	store := &fakeStore{p: mkPlacement(all, "p1")}
	p, err := store.Placement(context.Background())
	require.NoError(t, err)
	require.NoError(t, newDurableBootstrapper(t, db, store, peer).Reconcile(context.Background(), client.NewMap(p)))
	require.GreaterOrEqual(t, peer.calls.Load(), int64(12), "the cut happened")

	// Restart from the cut, with the placement as it was before any CAS.
	restarted := openDurable(t, snap, vfs.OS())
	store2 := &fakeStore{p: mkPlacement(all, "p1")}
	b2 := newDurableBootstrapper(t, restarted, store2, fp)
	p2, err := store2.Placement(context.Background())
	require.NoError(t, err)
	require.NoError(t, b2.Reconcile(context.Background(), client.NewMap(p2)))
	for _, sh := range all {
		st, _ := store2.state(self, sh)
		require.Equal(t, placement.Available, st, "shard %d", sh)
	}
	requireSeries(t, restarted, want)
}

// bootstrap.maxBytesPerSecond paces unflushed streaming: a bootstrap
// cannot finish before its bytes are due at the configured rate (the
// limiter's contract). Only the lower bound is asserted: a loaded
// machine can only make it slower.
func TestUnflushedStreamingIsPaced(t *testing.T) {
	fp, want := unflushedPeer(t, 20, 360, 4)
	db := storagetest.Open(t, numShards, func() time.Time { return now })
	const rate = 4 << 10 // bytes per second
	store := &fakeStore{p: mkPlacement([]uint32{0, 1, 2, 3}, "p1")}
	b, err := New(Options{
		InstanceID: self, DB: db, Store: store,
		Dial:    func(string) (Peer, error) { return fp, nil },
		Workers: 2, ShardsPerFetch: 2, MaxBytesPerSecond: rate,
		MarkAvailableAttempts: 1, MarkAvailableBackoff: time.Millisecond,
	})
	require.NoError(t, err)
	p, err := store.Placement(context.Background())
	require.NoError(t, err)
	start := time.Now()
	require.NoError(t, b.Reconcile(context.Background(), client.NewMap(p)))
	took := time.Since(start)
	bytes := b.Progress().Bytes
	require.Greater(t, bytes, int64(2*rate), "enough data for the pace to show")
	due := time.Duration(float64(bytes) / rate * float64(time.Second))
	require.GreaterOrEqual(t, took, due-50*time.Millisecond, "%d bytes at %d B/s", bytes, rate)
	requireSeries(t, db, want)
}

// A commit log queue far smaller than what the bootstrap streams (the
// disk lagging, or live writes filling it) refuses pages with
// ErrQueueFull; the bootstrapper waits for its own queued pages to drain
// and offers the page again, and the shards complete.
func TestUnflushedStreamingWaitsOutAFullCommitLogQueue(t *testing.T) {
	fp, want := unflushedPeer(t, 40, 360, 1)
	scope := tally.NewTestScope("", nil)
	db, err := storage.Open(storagetest.Options(storage.Options{Dir: t.TempDir(), Namespaces: []storage.NamespaceOptions{storagetest.Namespace()},
		NumShards: numShards, Now: func() time.Time { return now }, CommitLogMode: commitlog.ModeSync,
		Metrics: scope,
		// A page is ~25 KiB estimated, a batch of shards may queue
		// maxQueuedSamples (~2 MiB) before it waits.
		CommitLogMaxPending: 1 << 20}))
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	store := &fakeStore{p: mkPlacement([]uint32{0, 1, 2, 3}, "p1")}
	b := newDurableBootstrapper(t, db, store, fp)
	p, err := store.Placement(context.Background())
	require.NoError(t, err)
	require.NoError(t, b.Reconcile(context.Background(), client.NewMap(p)))
	for sh := uint32(0); sh < numShards; sh++ {
		st, _ := store.state(self, sh)
		require.Equal(t, placement.Available, st, "shard %d", sh)
	}
	requireSeries(t, db, want)
	full := int64(0)
	for name, c := range scope.Snapshot().Counters() {
		if strings.HasSuffix(name, "queue_full+") {
			full += c.Value()
		}
	}
	t.Logf("commit log refused %d pages as queue full", full)
}
