package storage

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tessera-tsdb/tessera/dbnode/commitlog"
	"github.com/tessera-tsdb/tessera/dbnode/encoding"
	"github.com/tessera-tsdb/tessera/dbnode/index"
	"github.com/tessera-tsdb/tessera/dbnode/memsnap"
)

// The restart snapshot (issue 30, item 2): a copy of every shard's
// unflushed memory, written in the background once the commit log has
// grown, so that Open loads it and replays only the commit log files
// written after it. The full replay was a restart's whole time (~30 CPU
// s at 5 M series, where every series is found again in each of ~8
// files); loading finds each series once, and the files it covers are
// not read.
//
// Its rules, which keep kill -9 losing nothing:
//
//   - Coverage is exact. WriteRestartSnapshot rotates the commit log and
//     lists its closed files under writeMu held exclusively: writers hold
//     it shared across "enqueue in the log, apply to memory", so every
//     entry of a closed file is in memory then (or flushed), and memory is
//     copied after. Writes go on during the copy (into later files); what
//     of them the copy catches is replayed again from the tail, in log
//     order, so the last write of a sample still wins.
//   - Nothing is deleted because of it: commit log files are removed only
//     by Tick, when their blocks are flushed, as without it. So a snapshot
//     that is missing, torn, corrupt (memsnap.Decode checks it whole
//     before any of it is used), of another shard count, or that does not
//     name every commit log file it would skip, is ignored: the whole log
//     is replayed, and the fallback logged and counted
//     (restart_snapshot_fallbacks).
//   - Flushes after it: a flush writes memory to a fileset and releases
//     it, and the commit log files of the flushed blocks may then go,
//     with them writes made after the snapshot; the snapshot's older
//     values of the same samples would then shadow the flushed ones. So
//     a tick that flushed anything removes the snapshot (durably) before
//     it removes any commit log file, and the next one is due at once
//     (a restart meanwhile replays the whole log). Volumes written by
//     peer bootstrap (LoadBlock) release no memory and change nothing.
//   - Expiry: loaded samples pass the replay's retention check.
//
// Sections (a namespace's series in the order they were created, up to
// restartSnapSection of them each) load in parallel, each series created
// once and its samples written straight into it; the series go to the
// replayer's index stage, and the replayer then applies the tail.

const (
	restartSnapDir    = "restart-snapshot"
	restartSnapSuffix = ".tsrs"
	restartSnapTmp    = ".tmp"
)

// restartSnapSection is the most series a section holds: sections are
// what the loaders share out, hundreds of them at millions of series. A
// variable for tests, which make sections of a few series.
var restartSnapSection = 16384

func (db *Database) restartSnapPath() string { return filepath.Join(db.opts.Dir, restartSnapDir) }

// restartSnapState is what the background loop knows of the last
// snapshot (guarded by tickMu).
type restartSnapState struct {
	last    time.Time // when the last one was written (Open's time at first)
	logAt   int64     // the commit log's BytesWritten then
	covered uint64    // its CoveredSeq
	// owed: Open replayed commit log entries that no snapshot covers, so
	// one is due without waiting for the log to grow.
	owed bool
}

// maybeRestartSnapshot writes a restart snapshot when one is due: the
// last one is RestartSnapshotEvery old and the commit log has grown by
// RestartSnapshotLogBytes since (or Open replayed entries no snapshot
// covers).
func (db *Database) maybeRestartSnapshot() {
	if !db.opts.RestartSnapshot {
		return
	}
	db.tickMu.Lock()
	st := db.snap
	db.tickMu.Unlock()
	if db.opts.Now().Sub(st.last) < db.opts.RestartSnapshotEvery {
		return
	}
	if !st.owed && db.cl.BytesWritten()-st.logAt < db.opts.RestartSnapshotLogBytes {
		return
	}
	if _, err := db.WriteRestartSnapshot(); err != nil {
		db.metrics.snapErrors.Inc(1)
		db.opts.Logger.Error("restart snapshot", "err", err)
	}
}

// WriteRestartSnapshot rotates the commit log and writes a restart
// snapshot covering every closed file, then removes the older snapshot.
// It holds the tick lock throughout (no flush or expiry meanwhile) and
// blocks writes only for the rotation. It reports false when nothing was
// written to the log since the last snapshot (none is needed).
func (db *Database) WriteRestartSnapshot() (bool, error) {
	db.tickMu.Lock()
	defer db.tickMu.Unlock()
	start := time.Now()
	db.writeMu.Lock()
	var err error
	if db.cl.BytesWritten() != db.snap.logAt || db.snap.owed {
		err = db.cl.Rotate()
	}
	files := db.cl.Files()
	logAt := db.cl.BytesWritten()
	db.writeMu.Unlock()
	if err != nil {
		return false, fmt.Errorf("restart snapshot: rotate commit log: %w", err)
	}
	h := memsnap.Header{CreatedMs: db.opts.Now().UnixMilli(), NumShards: db.opts.NumShards}
	for _, f := range files {
		h.CoveredSeq = max(h.CoveredSeq, f.Seq)
		mf := memsnap.File{Seq: f.Seq}
		for name, r := range f.Ranges {
			mf.Ranges = append(mf.Ranges, memsnap.Range{Namespace: name, Min: r.Min, Max: r.Max})
		}
		slices.SortFunc(mf.Ranges, func(a, b memsnap.Range) int { return strings.Compare(a.Namespace, b.Namespace) })
		h.Files = append(h.Files, mf)
	}
	if h.CoveredSeq == 0 || (h.CoveredSeq == db.snap.covered && !db.snap.owed) {
		return false, nil
	}
	for _, ns := range db.nsList {
		h.Namespaces = append(h.Namespaces, memsnap.Namespace{Name: ns.opts.Name, Values: valueCounts(ns)})
	}

	dir := db.restartSnapPath()
	fs := db.opts.FS
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return false, fmt.Errorf("restart snapshot: %w", err)
	}
	final := filepath.Join(dir, fmt.Sprintf("%020d%s", h.CoveredSeq, restartSnapSuffix))
	tmp := final + restartSnapTmp
	f, err := fs.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return false, fmt.Errorf("restart snapshot: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			_ = f.Close()
			_ = fs.Remove(tmp)
		}
	}()
	w := memsnap.NewWriter(f, h)
	// Each namespace's series in the order of their registry slots, the
	// order they were created in (a removed series' slot is reused, as
	// its index ref is): a restart creates them, and the index gives
	// them refs, in that order again (memsnap.Writer says why).
	var all, bySlot []*Series
	for i, ns := range db.nsList {
		bySlot = ns.seriesBySlot(bySlot, &all)
		w.BeginSection(uint16(i))
		n := 0
		for _, s := range bySlot {
			shard := uint32(s.shard) - 1
			if s.shard == 0 {
				shard = db.Shard(s.ID()) // a shard number past uint16
			}
			added := s.addSoleStream(w, shard)
			if !added {
				stream, hist, err := s.streams()
				if err != nil {
					return false, fmt.Errorf("restart snapshot: series %s: %w", describeID(s.ID()), err)
				}
				if added = stream != nil || hist != nil; added {
					w.Add(shard, s.ID(), stream, hist)
				}
			}
			if added {
				n++
			}
			if n == restartSnapSection {
				if err := w.EndSection(); err != nil {
					return false, fmt.Errorf("restart snapshot: %w", err)
				}
				w.BeginSection(uint16(i))
				n = 0
			}
		}
		if err := w.EndSection(); err != nil {
			return false, fmt.Errorf("restart snapshot: %w", err)
		}
	}
	clear(all)
	clear(bySlot)
	if err := w.Close(); err != nil {
		return false, fmt.Errorf("restart snapshot: %w", err)
	}
	if err := f.Sync(); err != nil {
		return false, fmt.Errorf("restart snapshot: fsync: %w", err)
	}
	if err := f.Close(); err != nil {
		return false, fmt.Errorf("restart snapshot: close: %w", err)
	}
	if err := fs.Rename(tmp, final); err != nil {
		return false, fmt.Errorf("restart snapshot: %w", err)
	}
	if err := fs.SyncDir(dir); err != nil {
		return false, fmt.Errorf("restart snapshot: sync dir: %w", err)
	}
	ok = true
	db.removeRestartSnapshots(final)
	db.snap = restartSnapState{last: db.opts.Now(), logAt: logAt, covered: h.CoveredSeq}
	db.metrics.snapWritten.Inc(1)
	db.opts.Logger.Info("restart snapshot written", "file", final, "covered_seq", h.CoveredSeq,
		"series", w.Series(), "took", time.Since(start))
	return true, nil
}

// addSoleStream adds s to the snapshot's section under one lock and with
// no copy of its own when its floats are one stream of one bucket and it
// has nothing else (nearly every series); it reports false otherwise.
func (s *Series) addSoleStream(w *memsnap.Writer, shard uint32) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.more != nil || !s.inlineUsed || s.inline.more != nil || s.inline.first.Len() == 0 {
		return false
	}
	w.Add(shard, s.ID(), s.inline.first.Bytes(), nil)
	return true
}

// seriesBySlot returns the series of every shard of ns in the order of
// their registry slots, in buf's memory (its contents are dropped); all
// is scratch.
func (ns *namespace) seriesBySlot(buf []*Series, all *[]*Series) []*Series {
	// Placed at their slots, then closed up: linear, where a sort of
	// ten million would take seconds.
	dst := buf[:0]
	for _, sh := range ns.allShards() {
		*all = sh.appendSeries((*all)[:0])
		for _, s := range *all {
			if at := int(s.slot); at >= len(dst) {
				n := len(dst)
				dst = slices.Grow(dst, at+1-n)[:at+1]
				clear(dst[n:])
			}
			dst[s.slot] = s
		}
	}
	out := dst[:0]
	for _, s := range dst {
		if s != nil {
			out = append(out, s)
		}
	}
	clear(dst[len(out):])
	return out
}

// invalidateRestartSnapshot removes the restart snapshots after a flush
// (see the rules above) and makes the removal durable; it reports
// whether it did. The next snapshot is due at once.
func (db *Database) invalidateRestartSnapshot() bool {
	dir := db.restartSnapPath()
	ents, err := db.opts.FS.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) || (err == nil && len(ents) == 0) {
		db.snap.covered, db.snap.owed = 0, true
		return true
	}
	if err != nil {
		db.opts.Logger.Error("restart snapshot: list after a flush", "err", err)
		return false
	}
	for _, e := range ents {
		if err := db.opts.FS.Remove(filepath.Join(dir, e.Name())); err != nil {
			db.opts.Logger.Error("restart snapshot: remove after a flush", "err", err)
			return false
		}
	}
	if err := db.opts.FS.SyncDir(dir); err != nil {
		db.opts.Logger.Error("restart snapshot: sync dir after a flush", "err", err)
		return false
	}
	db.snap.covered, db.snap.owed = 0, true
	db.metrics.snapInvalidated.Inc(1)
	return true
}

// removeRestartSnapshots removes every snapshot file but keep (all when
// keep is ""): the older ones once a newer is durable, all when
// snapshots are off (one left behind could be loaded after data written
// meanwhile was flushed and its log removed: not by the rules above,
// which hold for it, but there is no reason to keep it).
func (db *Database) removeRestartSnapshots(keep string) {
	dir := db.restartSnapPath()
	ents, err := db.opts.FS.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		if p == keep {
			continue
		}
		if err := db.opts.FS.Remove(p); err != nil {
			db.opts.Logger.Warn("restart snapshot: remove old", "file", p, "err", err)
		}
	}
}

// errSnapUnusable is wrapped by every reason a snapshot is not loaded.
var errSnapUnusable = errors.New("restart snapshot not used")

// loadRestartSnapshot hands the newest restart snapshot's samples to r
// and returns the commit log's Covered function for the files it covers;
// nil (replay everything) when there is none or it fails a check, which
// is logged and counted. An error is an apply error (Open fails, as on
// a replay error).
func (db *Database) loadRestartSnapshot(r *replayer) (func(uint64) (map[string]commitlog.TimeRange, bool), error) {
	if !db.opts.RestartSnapshot {
		db.removeRestartSnapshots("")
		return nil, nil
	}
	clDir := filepath.Join(db.opts.Dir, "commitlog")
	seqs, err := commitlog.FileSeqs(db.opts.FS, clDir)
	if err != nil {
		return nil, err
	}
	path, b, err := db.readRestartSnapshot()
	if err == nil && path == "" {
		if len(seqs) > 0 {
			err = fmt.Errorf("%w: none in %s", errSnapUnusable, db.restartSnapPath())
		} else {
			return nil, nil // a fresh node: nothing to replay either
		}
	}
	var snap *memsnap.Snapshot
	if err == nil {
		snap, err = memsnap.Decode(b)
	}
	var files map[uint64]map[string]commitlog.TimeRange
	if err == nil {
		files, err = db.checkRestartSnapshot(snap, seqs)
	}
	if err != nil {
		reason := "corrupt"
		switch {
		case path == "":
			reason = "missing"
		case errors.Is(err, errSnapUnusable):
			reason = "mismatch"
		}
		db.metrics.snapFallback(reason)
		db.opts.Logger.Warn("restart snapshot not used: replaying the whole commit log", "file", path, "reason", reason, "err", err)
		db.snap.owed = len(seqs) > 0
		return nil, nil
	}
	start := time.Now()
	samples, err := db.feedRestartSnapshot(r, snap)
	if err != nil {
		return nil, err
	}
	db.metrics.snapLoaded.Inc(1)
	db.opts.Logger.Info("storage recovering: restart snapshot loaded", "file", path, "covered_seq", snap.Header.CoveredSeq,
		"series", snap.Series, "samples", samples, "took", time.Since(start))
	db.snap.covered = snap.Header.CoveredSeq
	return func(seq uint64) (map[string]commitlog.TimeRange, bool) {
		rs, ok := files[seq]
		return rs, ok
	}, nil
}

// readRestartSnapshot reads the newest snapshot file ("" when none).
func (db *Database) readRestartSnapshot() (string, []byte, error) {
	dir := db.restartSnapPath()
	ents, err := db.opts.FS.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", nil, nil
		}
		return "", nil, fmt.Errorf("list %s: %w", dir, err)
	}
	var newest string
	for _, e := range ents {
		if n := e.Name(); strings.HasSuffix(n, restartSnapSuffix) && n > newest {
			newest = n
		}
	}
	if newest == "" {
		return "", nil, nil
	}
	path := filepath.Join(dir, newest)
	f, err := db.opts.FS.Open(path)
	if err != nil {
		return path, nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return path, nil, fmt.Errorf("stat %s: %w", path, err)
	}
	// One buffer of the file's size: it is hundreds of MB at millions
	// of series, and io.ReadAll's doubling would copy it several times.
	b := make([]byte, fi.Size())
	if _, err := io.ReadFull(f, b); err != nil {
		return path, nil, fmt.Errorf("read %s: %w", path, err)
	}
	return path, b, nil
}

// checkRestartSnapshot checks that snap can stand for the commit log
// files it covers: same shard count, and every file at or below its
// CoveredSeq still on disk is one it names (else that file would be
// replayed on top of newer memory, or skipped unread). It returns the
// covered files' ranges by sequence number.
func (db *Database) checkRestartSnapshot(snap *memsnap.Snapshot, seqs []uint64) (map[uint64]map[string]commitlog.TimeRange, error) {
	h := snap.Header
	if h.NumShards != db.opts.NumShards {
		return nil, fmt.Errorf("%w: taken with %d shards, the node has %d", errSnapUnusable, h.NumShards, db.opts.NumShards)
	}
	named := map[uint64]map[string]commitlog.TimeRange{}
	for _, f := range h.Files {
		rs := map[string]commitlog.TimeRange{}
		for _, r := range f.Ranges {
			rs[r.Namespace] = commitlog.TimeRange{Min: r.Min, Max: r.Max}
		}
		named[f.Seq] = rs
	}
	out := map[uint64]map[string]commitlog.TimeRange{}
	for _, seq := range seqs {
		if seq > h.CoveredSeq {
			continue
		}
		rs, ok := named[seq]
		if !ok {
			return nil, fmt.Errorf("%w: commit log file %d is at or below the covered %d but not named by it", errSnapUnusable, seq, h.CoveredSeq)
		}
		out[seq] = rs
	}
	return out, nil
}

// feedRestartSnapshot loads every sample of snap into memory but those
// past retention and those of namespaces no longer configured. It
// returns how many it loaded.
func (db *Database) feedRestartSnapshot(r *replayer, snap *memsnap.Snapshot) (int, error) {
	loads := make([]*namespace, len(snap.Header.Namespaces))
	for i, hn := range snap.Header.Namespaces {
		loads[i] = db.namespaces[hn.Name] // nil: no longer configured
	}
	// Sections are loaded in parallel, a worker creating each series of
	// its section once and writing its samples straight into it: no
	// per-sample hand-over as the log's entries need, since a series is
	// in one section only. The index inserts go to the replayer's index
	// stage, as the log replay's do.
	// The index's series table is sized once for what is coming.
	perNS := make([]int, len(loads))
	for _, sec := range snap.Sections {
		perNS[sec.NS] += int(sec.Count)
	}
	for i, ns := range loads {
		if ns != nil && ns.index != nil {
			ns.index.ReserveSeries(perNS[i])
		}
	}
	// And its value tables for the values they held (version 3).
	reserveValues(snap, loads, perNS, false)
	defer reserveValues(snap, loads, perNS, true)
	nw := max(1, min(runtime.GOMAXPROCS(0), 16))
	db.reserveShards(snap, loads, nw)
	var next, total atomic.Int64
	var firstErr atomic.Pointer[error]
	var wg sync.WaitGroup
	now := db.opts.Now()
	for range nw {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var ix *replayIndexBatch
			for firstErr.Load() == nil {
				i := int(next.Add(1) - 1)
				if i >= len(snap.Sections) {
					break
				}
				sec := snap.Sections[i]
				ns := loads[sec.NS]
				if ns == nil {
					continue // as the replay drops a namespace removed from config
				}
				n, err := db.loadSection(r, ns, sec, now, &ix)
				total.Add(int64(n))
				if err != nil {
					firstErr.CompareAndSwap(nil, &err)
				}
			}
			r.flushIndex(&ix)
		}()
	}
	wg.Wait()
	if p := firstErr.Load(); p != nil {
		return int(total.Load()), *p
	}
	return int(total.Load()), nil
}

// valueCounts are ns's index's label value counts per block, for the
// snapshot's header.
func valueCounts(ns *namespace) []memsnap.BlockValues {
	if ns.index == nil {
		return nil
	}
	var out []memsnap.BlockValues
	for _, bv := range ns.index.ValueCounts() {
		mb := memsnap.BlockValues{Start: bv.Start}
		for _, nv := range bv.Names {
			mb.Names = append(mb.Names, memsnap.NameValues{Name: nv.Name, Values: uint64(nv.Values)})
		}
		out = append(out, mb)
	}
	return out
}

// reserveValues hands the index of each namespace loaded the label value
// counts the snapshot recorded, each capped at the namespace's series in
// the snapshot (a hint from a file sizes no table beyond what the load
// could fill); loaded drops the hints no table took.
func reserveValues(snap *memsnap.Snapshot, loads []*namespace, perNS []int, loaded bool) {
	for i, ns := range loads {
		if ns == nil || ns.index == nil {
			continue
		}
		if loaded {
			ns.index.ReserveValues(nil, 0)
			continue
		}
		var blocks []index.BlockValues
		for _, mb := range snap.Header.Namespaces[i].Values {
			bv := index.BlockValues{Start: mb.Start}
			for _, nv := range mb.Names {
				bv.Names = append(bv.Names, index.NameValues{Name: nv.Name, Values: int(min(nv.Values, uint64(perNS[i])))})
			}
			blocks = append(blocks, bv)
		}
		ns.index.ReserveValues(blocks, perNS[i])
	}
}

// reserveShards sizes the series table of every shard the snapshot has
// series of, once, for what is coming: sections mix shards, so the
// tables would otherwise grow by steps while they load, at random (an
// eighth of a 10 M-series load re-placing entries). Counting takes one
// walk of the sections' series on nw goroutines.
func (db *Database) reserveShards(snap *memsnap.Snapshot, loads []*namespace, nw int) {
	ns := len(loads)
	counts := make([][]int32, nw)
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := range nw {
		counts[w] = make([]int32, ns*int(db.opts.NumShards))
		wg.Go(func() {
			c := counts[w]
			for {
				i := int(next.Add(1) - 1)
				if i >= len(snap.Sections) {
					return
				}
				sec := snap.Sections[i]
				if loads[sec.NS] == nil {
					continue
				}
				base := int(sec.NS) * int(db.opts.NumShards)
				_ = sec.Each(func(x memsnap.Series) error { // Decode checked it: no error
					c[base+int(x.Shard)]++
					return nil
				})
			}
		})
	}
	wg.Wait()
	for i, n := range counts[0] {
		for _, c := range counts[1:] {
			n += c[i]
		}
		if n == 0 {
			continue
		}
		sh := loads[i/int(db.opts.NumShards)].shard(uint32(i % int(db.opts.NumShards)))
		sh.mu.Lock()
		sh.series.t.Reserve(sh.series.len() + int(n))
		sh.mu.Unlock()
	}
}

// loadSection loads one section's series into memory, handing the
// series that open a block to the index stage through *ix. It returns
// how many samples it loaded.
func (db *Database) loadSection(r *replayer, ns *namespace, sec memsnap.Section, now time.Time, ix **replayIndexBatch) (int, error) {
	n := 0
	keep := func(t int64) bool {
		rs, _ := ns.check(t, now)
		return rs != ReasonTooOld
	}
	apply := func(shard uint32, s *Series, t int64, v float64, hs *HistogramSample) (*Series, error) {
		s, bs, newBucket, err := db.applyData(ns, shard, s, t, v, hs)
		if err != nil {
			return s, fmt.Errorf("restart snapshot: series %s: %w", describeID(s.ID()), err)
		}
		n++
		if newBucket && ns.index != nil {
			if err := r.indexSeries(ix, ns, s.id, bs, s.slot); err != nil {
				return s, err
			}
		}
		return s, nil
	}
	// One reader for all the section's float streams: an iterator
	// allocated per series was 2% of a 5 M-series load.
	var it encoding.StreamReader
	err := sec.Each(func(x memsnap.Series) error {
		var s *Series
		get := func() *Series {
			if s == nil {
				s = ns.shard(x.Shard).getOrCreateLocked(ns, hashID(x.ID), x.ID)
			}
			return s
		}
		if x.Floats != nil {
			it.Reset(x.Floats)
			for it.Next() {
				t, v := it.At()
				if !keep(t) {
					continue
				}
				var err error
				if s, err = apply(x.Shard, get(), t, v, nil); err != nil {
					return err
				}
			}
			if err := it.Err(); err != nil {
				return fmt.Errorf("restart snapshot: series %s: %w", describeID(x.ID), err)
			}
		}
		if len(x.Histograms) == 0 {
			return nil
		}
		its := make([]encoding.HistogramIterator, len(x.Histograms))
		for i, h := range x.Histograms {
			its[i] = encoding.NewHistogramIterator(h)
		}
		hit := encoding.MergeHistogramIterators(its...)
		for hit.Next() {
			hs := &HistogramSample{}
			var t int64
			if hit.IsFloat() {
				t, hs.FH = hit.AtFloatHistogram(nil)
			} else {
				t, hs.H = hit.AtHistogram(nil)
			}
			if !keep(t) {
				continue
			}
			// As a live histogram write does: float writes to the
			// namespace check their series for a histogram from now on.
			ns.hadHist.Store(true)
			var err error
			if s, err = apply(x.Shard, get(), t, 0, hs); err != nil {
				return err
			}
		}
		if err := hit.Err(); err != nil {
			return fmt.Errorf("restart snapshot: histograms of series %s: %w", describeID(x.ID), err)
		}
		return nil
	})
	return n, err
}
