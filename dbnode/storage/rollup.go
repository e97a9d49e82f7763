package storage

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"math"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/uber-go/tally/v4"

	"github.com/tessera-tsdb/tessera/dbnode/encoding"
	"github.com/tessera-tsdb/tessera/dbnode/fileset"
	"github.com/tessera-tsdb/tessera/dbnode/rollup"
)

// Rollup namespaces (issue 26, docs/rollups.md). A rollup namespace holds,
// per series and block, the rollup.Window list of the source's samples at
// its resolution, as one fileset data entry (rollup.AppendPayload) under
// the source series' ID, so its index is the source's IDs and tags. Its
// blocks are written by the flush of the source: when a source block's
// volume is installed, every direct rollup recomputes, for the shards
// that flush wrote, the rollup block holding it, and a rollup of a
// rollup does the same from the level above's windows (Coarsen), never
// from raw. The computation reads only sealed, flushed data, so replicas
// holding equal source blocks write equal bytes.

// checkRollups refuses rollup options storage cannot act on (config
// validates the same with key paths; this guards other callers).
func checkRollups(nss []NamespaceOptions) error {
	byName := map[string]NamespaceOptions{}
	for _, n := range nss {
		byName[n.Name] = n
	}
	for _, n := range nss {
		if n.RollupOf == "" {
			continue
		}
		src, ok := byName[n.RollupOf]
		switch {
		case !ok:
			return fmt.Errorf("storage: namespace %q: rollup of unknown namespace %q", n.Name, n.RollupOf)
		case n.Resolution <= 0 || n.Resolution%time.Millisecond != 0:
			return fmt.Errorf("storage: namespace %q: rollup resolution %v", n.Name, n.Resolution)
		case n.BlockSize%n.Resolution != 0 || src.BlockSize%n.Resolution != 0:
			return fmt.Errorf("storage: namespace %q: resolution %v does not divide the block sizes", n.Name, n.Resolution)
		case src.Resolution > 0 && n.Resolution%src.Resolution != 0:
			return fmt.Errorf("storage: namespace %q: resolution %v is not a multiple of its source's %v", n.Name, n.Resolution, src.Resolution)
		}
	}
	return nil
}

// rollupProgress is the progress of one rollup namespace, kept on it
// (namespace.rollup) and exported as metrics.
type rollupProgress struct {
	once    sync.Once
	mu      sync.Mutex
	lastEnd int64 // end of the newest source block rolled up, ms (0: none)
	blocks  int64
	errors  int64
	// cursor: every source block starting before it is rolled up
	// (rollupbackfill.go); loaded from disk on first use.
	cursor       int64
	cursorLoaded bool
	backfilled   int64 // source blocks rolled up by the backfill
	// damaged: blocks of this rollup whose newest volume (or a shard's
	// section of it) failed its checks at start, or a page of which
	// failed its checksum on read; the next tick derives them again from
	// the source (rollupsync.go).
	damaged   map[int64]bool
	rederived int64 // rollup blocks derived again after damage

	lag, upTo, backfillTo tally.Gauge
	written, failure      tally.Counter
}

// progress returns ns's rollup progress, its metrics made on first use.
func (db *Database) progress(ns *namespace) *rollupProgress {
	p := &ns.rollup
	p.once.Do(func() {
		s := db.opts.Metrics.Tagged(map[string]string{"namespace": ns.opts.Name})
		p.lag = s.Gauge("rollup_lag_seconds")
		p.upTo = s.Gauge("rollup_rolled_up_to_seconds")
		p.backfillTo = s.Gauge("rollup_cursor_seconds")
		p.written = s.Counter("rollup_blocks_written")
		p.failure = s.Counter("rollup_errors")
	})
	return p
}

// RollupStatus is what a rollup namespace has done, for status pages.
type RollupStatus struct {
	Namespace  string
	RollupOf   string
	Resolution time.Duration
	// RolledUpTo is the end of the newest source block rolled up (zero:
	// none since start); Lag is now minus that.
	RolledUpTo time.Time
	Lag        time.Duration
	Blocks     int64 // rollup volumes written since start
	Errors     int64
	// Cursor: every source block starting before it is rolled up (zero
	// time: nothing to roll up yet); Backfilled counts the source blocks
	// the backfill rolled up since start.
	Cursor     time.Time
	Backfilled int64
	// Rederived counts rollup blocks derived again from the source
	// after damage (at start, or a page failing its checksum on read).
	Rederived int64
}

// RollupStatuses lists every rollup namespace's progress.
func (db *Database) RollupStatuses() []RollupStatus {
	var out []RollupStatus
	now := db.opts.Now()
	for _, ns := range db.nsList {
		if ns.opts.RollupOf == "" {
			continue
		}
		p := db.progress(ns)
		p.mu.Lock()
		st := RollupStatus{Namespace: ns.opts.Name, RollupOf: ns.opts.RollupOf, Resolution: ns.opts.Resolution, Blocks: p.blocks, Errors: p.errors, Backfilled: p.backfilled, Rederived: p.rederived}
		if p.cursorLoaded && p.cursor != cursorUnset {
			st.Cursor = time.UnixMilli(p.cursor).UTC()
		}
		if p.lastEnd > 0 {
			st.RolledUpTo = time.UnixMilli(p.lastEnd).UTC()
			st.Lag = now.Sub(st.RolledUpTo)
		}
		p.mu.Unlock()
		out = append(out, st)
	}
	return out
}

// rollupsOf lists the direct rollups of the namespace named src.
func (db *Database) rollupsOf(src string) []*namespace {
	var out []*namespace
	for _, ns := range db.nsList {
		if ns.opts.RollupOf == src {
			out = append(out, ns)
		}
	}
	return out
}

// rollUp rolls up one source block (see rollUpBlocks).
func (db *Database) rollUp(src *namespace, bs int64, shards []uint32) error {
	if len(shards) == 0 {
		return nil
	}
	return db.rollUpBlocks(src, map[int64][]uint32{bs: shards}, bs+src.blockSize, nil)
}

// rollUpBlocks is the flush hook: the source blocks of src in blocks (start
// -> shards written) were just (re)written; in every rollup of src (only
// that one when only is set), recompute the windows they feed, one new
// volume per rollup block, then theirs down the chain. rawEnd is the end
// of the newest raw block behind the change (the progress figures). Errors
// are counted and returned; the source blocks stay flushed either way (the
// backfill cursor or a later flush of a block rolls it up again).
func (db *Database) rollUpBlocks(src *namespace, blocks map[int64][]uint32, rawEnd int64, only *namespace) error {
	return db.rollUpChain(src, blocks, rawEnd, only, nil)
}

// writtenBlock is one rollup block's windows as its volume just stored
// them, per shard and series ID: the next level down the chain coarsens
// them from memory instead of reading the volume back (decompressing and
// decoding what was encoded a moment ago). Only float-only shards are
// kept (a histogram window's decoded form is not checked to equal the
// one encoded); the others are read from the volume as before.
type writtenBlock struct {
	bs     int64
	shards map[uint32]map[string]seriesRollup
}

// rollUpChain is rollUpBlocks with src's block known.bs (if known is set)
// given in memory.
func (db *Database) rollUpChain(src *namespace, blocks map[int64][]uint32, rawEnd int64, only *namespace, known *writtenBlock) error {
	if len(blocks) == 0 {
		return nil
	}
	var errs []error
	now := db.opts.Now().UnixMilli()
	for _, dst := range db.rollupsOf(src.opts.Name) {
		if only != nil && dst != only {
			continue
		}
		p := db.progress(dst)
		type job struct {
			changed []int64
			shards  map[uint32]bool
		}
		jobs := map[int64]*job{}
		for bs, shards := range blocks {
			rbs := dst.blockStart(bs)
			if rbs+dst.blockSize <= now-dst.opts.Retention.Milliseconds() || len(shards) == 0 {
				continue // already past the rollup's retention
			}
			j := jobs[rbs]
			if j == nil {
				j = &job{shards: map[uint32]bool{}}
				jobs[rbs] = j
			}
			j.changed = append(j.changed, bs)
			for _, id := range shards {
				j.shards[id] = true
			}
		}
		rstarts := make([]int64, 0, len(jobs))
		for rbs := range jobs {
			rstarts = append(rstarts, rbs)
		}
		sort.Slice(rstarts, func(i, j int) bool { return rstarts[i] < rstarts[j] })
		child := map[int64][]uint32{}
		// When every rollup of dst has dst's block size, a block of dst
		// feeds exactly one block of each, so the chain goes on block by
		// block with the windows just written handed over in memory
		// (one rollup block's windows held at a time); otherwise the
		// blocks are gathered and rolled up after, read from disk.
		grand := db.rollupsOf(dst.opts.Name)
		perBlock := len(grand) > 0
		for _, g := range grand {
			perBlock = perBlock && g.blockSize == dst.blockSize
		}
		for _, rbs := range rstarts {
			j := jobs[rbs]
			sort.Slice(j.changed, func(a, b int) bool { return j.changed[a] < j.changed[b] })
			shards := make([]uint32, 0, len(j.shards))
			for id := range j.shards {
				shards = append(shards, id)
			}
			var keep *writtenBlock
			if perBlock {
				keep = &writtenBlock{bs: rbs, shards: map[uint32]map[string]seriesRollup{}}
			}
			wrote, err := db.writeRollupBlock(src, dst, rbs, j.changed, shards, known, keep)
			p.mu.Lock()
			if err != nil {
				p.errors++
				p.failure.Inc(1)
				errs = append(errs, fmt.Errorf("rollup %s of %s block %d: %w", dst.opts.Name, src.opts.Name, rbs, err))
			} else {
				if wrote {
					p.blocks++
					p.written.Inc(1)
				}
				if rawEnd > p.lastEnd {
					p.lastEnd = rawEnd
					p.upTo.Update(float64(rawEnd) / 1000)
				}
				p.lag.Update(float64(now-p.lastEnd) / 1000)
			}
			p.mu.Unlock()
			if err != nil {
				continue
			}
			for _, bs := range j.changed {
				if err := db.advanceCursor(dst, src, bs); err != nil {
					errs = append(errs, err)
				}
			}
			switch {
			case wrote && perBlock:
				if err := db.rollUpChain(dst, map[int64][]uint32{rbs: shards}, rawEnd, nil, keep); err != nil {
					errs = append(errs, err)
				}
			case wrote:
				child[rbs] = shards
			}
		}
		if err := db.rollUpChain(dst, child, rawEnd, nil, nil); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// writeRollupBlock writes a new volume of dst's block rbs holding, for
// each of shards, its windows with the source blocks changed recomputed.
// known (if set) is a block of src given in memory; keep (if set) gets
// the windows written, per shard.
func (db *Database) writeRollupBlock(src, dst *namespace, rbs int64, changed []int64, shards []uint32, known, keep *writtenBlock) (bool, error) {
	shards = append([]uint32(nil), shards...)
	sort.Slice(shards, func(i, j int) bool { return shards[i] < shards[j] })
	var vw *volumeWrite
	for _, id := range shards {
		ssh := src.existingShard(id)
		if ssh == nil {
			continue
		}
		dsh := dst.shard(id)
		prev := dsh.reader(rbs)
		var (
			given     map[string]seriesRollup
			givenBS   int64
			keptShard map[string]seriesRollup
		)
		if known != nil {
			given, givenBS = known.shards[id], known.bs
		}
		if keep != nil {
			keptShard = map[string]seriesRollup{}
		}
		out, err := computeRollupShard(ssh, src, dst, rbs, changed, prev, given, givenBS, keptShard, db.sealed, &db.sealedUsed)
		if err != nil {
			if vw != nil {
				vw.abort()
			}
			return false, fmt.Errorf("shard %d: %w", id, err)
		}
		if len(out) == 0 {
			continue
		}
		if vw == nil {
			if vw, err = db.newVolumeWrite(dst, rbs); err != nil {
				return false, err
			}
		}
		if err := vw.add(dsh, prev, out); err != nil {
			vw.abort()
			return false, err
		}
		if keptShard != nil && len(keptShard) == len(out) { // emptied: histograms
			keep.shards[id] = keptShard
		}
	}
	if vw == nil {
		return false, nil
	}
	size, err := vw.install()
	if err != nil {
		return false, err
	}
	db.metrics.flushes.Inc(1)
	db.metrics.flushedBytes.Inc(size)
	return true, nil
}

// seriesRollup gathers one series' input to a rollup block.
type seriesRollup struct {
	fl []rollup.Sample
	h  []rollup.HSample
	ws []rollup.Window  // source windows (src is a rollup)
	hs []rollup.HWindow // source histogram windows
}

// computeRollupShard computes one shard's series of rollup block rbs of
// dst (sorted by ID) after the source blocks changed (inside the rollup
// block) were rewritten. A window is a function of its own samples only,
// so only the windows a changed block feeds are recomputed: those ending
// in [bs, bs+S] for each changed bs (S the source block size), from
// the source blocks bs-S, bs and bs+S inside the rollup block (raw
// samples concatenated and Computed, or a rollup source's windows
// Coarsened); every other window is kept from prev (the rollup volume
// served now, nil for none). The result equals computing the whole
// rollup block from all its source blocks at once: a window cut by a
// source block edge inside the rollup block is whole, and one cut by the
// rollup block's own edges is stored as two halves that readers Merge
// (the window ending exactly at rbs holds only a sample at rbs).
//
// Source blocks expire before the rollup's: where the block before a
// changed one is gone, prev's window ending at the edge (holding that
// block's samples) is merged with the recomputed one, unless it already
// holds the sample at that instant.
//
// given (if not nil) is src's block givenBS of this shard in memory, read
// instead of its volume; keep (if not nil) gets the windows of the
// series returned, and is emptied when one has histogram windows. sealed
// holds, by reader, the float samples of raw sections a flush just
// sealed (sealroll.go): those are taken from it, not read back, and
// counted in *used.
func computeRollupShard(sh *shard, src, dst *namespace, rbs int64, changed []int64, prev *fileset.Reader, given map[string]seriesRollup, givenBS int64, keep map[string]seriesRollup, sealed map[*fileset.Reader]map[string][]rollup.Sample, used *int) ([]fileset.Series, error) {
	S, rend := src.blockSize, rbs+dst.blockSize
	need := map[int64]bool{}
	for _, bs := range changed {
		for _, b := range []int64{bs - S, bs, bs + S} {
			if b >= rbs && b < rend {
				need[b] = true
			}
		}
	}
	var readers []*fileset.Reader
	for _, bs := range sh.blockStarts() {
		if need[bs] {
			if r := sh.reader(bs); r != nil {
				readers = append(readers, r)
			}
		}
	}
	present := map[int64]bool{}
	for _, r := range readers {
		present[r.ID().BlockStart] = true
	}
	inRange := func(end int64) bool {
		for _, bs := range changed {
			if end >= bs && end <= bs+S {
				return true
			}
		}
		return false
	}
	// Edges whose earlier source block (inside the rollup block) is gone.
	orphan := map[int64]bool{}
	for _, bs := range changed {
		if bs-S >= rbs && !present[bs-S] {
			orphan[bs] = true
		}
	}
	res := dst.opts.Resolution.Milliseconds()
	in := map[string]*seriesRollup{}
	var ids []string
	get := func(id []byte) *seriesRollup {
		s := in[string(id)]
		if s == nil {
			s = &seriesRollup{}
			in[string(id)] = s
			ids = append(ids, string(id))
		}
		return s
	}
	for _, r := range readers {
		if kept, ok := sealed[r]; ok && src.opts.RollupOf == "" {
			// The samples the section holds, as the flush sealed them:
			// the same series and samples the volume would give below.
			*used++
			for id, fl := range kept {
				s := in[id]
				if s == nil {
					s = &seriesRollup{}
					in[id] = s
					ids = append(ids, id)
				}
				switch {
				case s.fl == nil && len(readers) == 1:
					s.fl = fl // clipped: an append would copy
				case s.fl == nil:
					// Room for the other blocks, guessing each holds as
					// many samples (as below).
					s.fl = append(make([]rollup.Sample, 0, len(fl)*len(readers)), fl...)
				default:
					s.fl = append(s.fl, fl...)
				}
			}
			continue
		}
		if given != nil && src.opts.RollupOf != "" && r.ID().BlockStart == givenBS {
			for id, g := range given {
				s := get([]byte(id))
				s.ws = append(s.ws, g.ws...)
			}
			continue
		}
		err := r.RangeData(func(id, data []byte) error {
			s := get(id)
			if src.opts.RollupOf != "" {
				_, ws, hs, err := rollup.DecodePayload(data)
				if err != nil {
					return fmt.Errorf("series %q: %w", id, err)
				}
				s.ws = append(s.ws, ws...)
				s.hs = append(s.hs, hs...)
				return nil
			}
			// The iterators are drained inside this callback, so they may
			// read data in place (no copy).
			fl, hit := encoding.PayloadIterators(data)
			if fl != nil {
				first := len(s.fl) == 0
				for fl.Next() {
					t, v := fl.At()
					s.fl = append(s.fl, rollup.Sample{T: t, V: v})
				}
				if first && len(readers) > 1 {
					// Reserve room for the other source blocks, guessing
					// each holds as many samples as this one: one more
					// allocation instead of doubling growth.
					s.fl = slices.Grow(s.fl, len(s.fl)*(len(readers)-1))
				}
				if err := fl.Err(); err != nil {
					return fmt.Errorf("series %q: %w", id, err)
				}
			}
			if hit != nil {
				for hit.Next() {
					t, h := hit.AtFloatHistogram(nil)
					s.h = append(s.h, rollup.HSample{T: t, H: h})
				}
				if err := hit.Err(); err != nil {
					return fmt.Errorf("series %q histograms: %w", id, err)
				}
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("read %s block %d: %w", src.opts.Name, r.ID().BlockStart, err)
		}
	}
	old := map[string]seriesRollup{}
	if prev != nil {
		err := prev.RangeData(func(id, data []byte) error {
			_, ws, hs, err := rollup.DecodePayload(data)
			if err != nil {
				return fmt.Errorf("series %q: %w", id, err)
			}
			old[string(id)] = seriesRollup{ws: ws, hs: hs}
			get(id)
			return nil
		})
		if errors.Is(err, fileset.ErrCorrupt) {
			// A damaged page (rollupsync.go): keep what the other pages
			// hold, series by series; the damaged series keep only the
			// windows recomputed here.
			clear(old)
			err = readIntactRollups(prev, old, get)
		}
		if err != nil {
			return nil, fmt.Errorf("read previous rollup volume %d: %w", prev.ID().Volume, err)
		}
	}
	sort.Strings(ids)
	fOps := winOps[rollup.Window]{
		end: func(w rollup.Window) int64 { return w.End }, firstT: func(w rollup.Window) int64 { return w.First.T },
		lastT: func(w rollup.Window) int64 { return w.Last.T }, count: func(w rollup.Window) uint64 { return w.Count }, merge: rollup.Merge,
	}
	hOps := winOps[rollup.HWindow]{
		end: func(w rollup.HWindow) int64 { return w.End }, firstT: func(w rollup.HWindow) int64 { return w.First.T },
		lastT: func(w rollup.HWindow) int64 { return w.Last.T }, count: func(w rollup.HWindow) uint64 { return w.Count }, merge: rollup.MergeHistograms,
	}
	out := make([]fileset.Series, 0, len(ids))
	for _, id := range ids {
		s := in[id]
		var (
			ws  []rollup.Window
			hs  []rollup.HWindow
			err error
		)
		if src.opts.RollupOf != "" {
			if ws, err = rollup.Coarsen(s.ws, res); err == nil {
				hs, err = rollup.CoarsenHistograms(s.hs, res)
			}
		} else {
			if ws, err = rollup.Compute(s.fl, res); err == nil {
				hs, err = rollup.ComputeHistograms(s.h, res)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("series %q: %w", id, err)
		}
		o := old[id]
		if ws, err = splice(o.ws, ws, inRange, orphan, fOps); err != nil {
			return nil, fmt.Errorf("series %q: %w", id, err)
		}
		if hs, err = splice(o.hs, hs, inRange, orphan, hOps); err != nil {
			return nil, fmt.Errorf("series %q: %w", id, err)
		}
		if len(ws)+len(hs) == 0 {
			continue
		}
		data, err := rollup.AppendPayload(nil, res, ws, hs)
		if err != nil {
			return nil, fmt.Errorf("series %q: %w", id, err)
		}
		out = append(out, fileset.Series{ID: []byte(id), Data: data, Samples: len(ws) + len(hs)})
		if keep != nil {
			if len(hs) > 0 {
				clear(keep)
				keep = nil
			} else {
				keep[id] = seriesRollup{ws: ws}
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return bytes.Compare(out[i].ID, out[j].ID) < 0 })
	return out, nil
}

// winOps are the accessors splice needs of a window kind.
type winOps[W any] struct {
	end, firstT, lastT func(W) int64
	count              func(W) uint64
	merge              func(a, b W) (W, error)
}

// splice joins prev (the windows stored now) and fresh (recomputed from
// the source blocks around the changed ones): fresh's windows whose End
// inRange reports replace prev's, prev's others stay. At an orphan edge
// (the source block before it is gone), prev's window there holds that
// block's samples: it is kept when it already holds the sample at the
// edge, merged with fresh's otherwise (a prev window of the edge sample
// alone is simply replaced).
func splice[W any](prev, fresh []W, inRange func(int64) bool, orphan map[int64]bool, ops winOps[W]) ([]W, error) {
	if len(prev) == 0 {
		// Nothing stored yet (a new rollup block, the common case of a
		// backfill): fresh's windows in range, already in End order.
		out := fresh[:0]
		for _, w := range fresh {
			if inRange(ops.end(w)) {
				out = append(out, w)
			}
		}
		return out, nil
	}
	out := make([]W, 0, len(prev)+len(fresh))
	freshAt := map[int64]W{}
	for _, w := range fresh {
		if inRange(ops.end(w)) {
			freshAt[ops.end(w)] = w
		}
	}
	used := map[int64]bool{}
	for _, w := range prev {
		e := ops.end(w)
		if !inRange(e) {
			out = append(out, w)
			continue
		}
		if !orphan[e] || ops.count(w) == 0 || ops.firstT(w) >= e {
			continue // recomputed
		}
		f, ok := freshAt[e]
		switch {
		case !ok || ops.lastT(w) == e:
			out = append(out, w)
		default:
			m, err := ops.merge(w, f)
			if err != nil {
				return nil, err
			}
			out = append(out, m)
		}
		used[e] = true
	}
	for _, w := range fresh {
		if e := ops.end(w); inRange(e) && !used[e] {
			out = append(out, w)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return ops.end(out[i]) < ops.end(out[j]) })
	return out, nil
}

// RollupSeries is one series' windows read from a rollup namespace.
type RollupSeries struct {
	ID         []byte
	Shard      uint32
	Resolution int64 // ms
	Windows    []rollup.Window
	HWindows   []rollup.HWindow
}

// IsRollup reports whether nsName is a rollup namespace, and its
// resolution.
func (db *Database) IsRollup(nsName string) (bool, time.Duration) {
	ns := db.namespaces[nsName]
	if ns == nil || ns.opts.RollupOf == "" {
		return false, 0
	}
	return true, ns.opts.Resolution
}

// ReadRollup returns the windows of series id in rollup namespace nsName
// ending in [start, end], halves cut by block edges merged.
func (db *Database) ReadRollup(nsName string, id []byte, start, end int64) (RollupSeries, error) {
	ns, err := db.namespace(nsName)
	if err != nil {
		return RollupSeries{}, err
	}
	if ns.opts.RollupOf == "" {
		return RollupSeries{}, fmt.Errorf("namespace %s is not a rollup namespace", nsName)
	}
	return db.readRollup(ns, id, db.Shard(id), start, end)
}

func (db *Database) readRollup(ns *namespace, id []byte, shard uint32, start, end int64) (RollupSeries, error) {
	sh := ns.existingShard(shard)
	if sh == nil {
		return RollupSeries{ID: id, Shard: shard, Resolution: ns.opts.Resolution.Milliseconds()}, nil
	}
	var buf []rollup.Window
	// One allocation for the windows in range (plus a half per block edge).
	if res := ns.opts.Resolution.Milliseconds(); res > 0 && end >= start {
		from, to := ns.blockStart(start)-ns.blockSize, ns.blockStart(end)
		buf = make([]rollup.Window, 0, (end-start)/res+1+(to-from)/ns.blockSize+1)
	}
	return db.readRollupFrom(ns, rollupBlocks(ns, sh, start, end), id, shard, start, end, buf)
}

// rollupBlocks lists, in block order, the volumes of sh that may hold
// windows ending in [start, end]: a block holds the windows ending in
// [bs, bs+blockSize], so the one ending at start may be in the block
// before start's.
func rollupBlocks(ns *namespace, sh *shard, start, end int64) []*fileset.Reader {
	from, to := ns.blockStart(start)-ns.blockSize, ns.blockStart(end)
	var out []*fileset.Reader
	for _, bs := range sh.blockStarts() {
		if bs < from || bs > to {
			continue
		}
		if r := sh.reader(bs); r != nil {
			out = append(out, r)
		}
	}
	return out
}

// readRollupFrom reads series id's windows ending in [start, end] from
// the volumes blocks (rollupBlocks), appending the float windows to buf.
func (db *Database) readRollupFrom(ns *namespace, blocks []*fileset.Reader, id []byte, shard uint32, start, end int64, buf []rollup.Window) (RollupSeries, error) {
	rs := RollupSeries{ID: id, Shard: shard, Resolution: ns.opts.Resolution.Milliseconds(), Windows: buf[:0]}
	for _, r := range blocks {
		data, ok, err := r.ReadShared(id) // only decoded: no copy
		if err != nil {
			if errors.Is(err, fileset.ErrCorrupt) {
				db.rollupDamaged(ns, r.ID().BlockStart) // derived again at the next tick
			}
			return rs, fmt.Errorf("read rollup block %d: %w", r.ID().BlockStart, err)
		}
		if !ok {
			continue
		}
		n := len(rs.Windows)
		_, ws, hs, err := rollup.AppendDecodePayload(rs.Windows, data)
		if err != nil {
			return rs, fmt.Errorf("rollup block %d: %w: %w", r.ID().BlockStart, fileset.ErrCorrupt, err)
		}
		// Keep, of the windows just appended, those ending in range.
		kept := ws[:n]
		for _, w := range ws[n:] {
			if w.End >= start && w.End <= end {
				kept = append(kept, w)
			}
		}
		rs.Windows = kept
		for _, w := range hs {
			if w.End >= start && w.End <= end {
				rs.HWindows = append(rs.HWindows, w)
			}
		}
	}
	var err error
	if hasEqualEnds(rs.Windows, func(w rollup.Window) int64 { return w.End }) {
		if rs.Windows, err = rollup.MergeEqualEnds(rs.Windows); err != nil {
			return rs, err
		}
	}
	if hasEqualEnds(rs.HWindows, func(w rollup.HWindow) int64 { return w.End }) {
		if rs.HWindows, err = rollup.MergeEqualEndsHistograms(rs.HWindows); err != nil {
			return rs, err
		}
	}
	if len(rs.Windows) == 0 {
		rs.Windows = nil
	}
	return rs, nil
}

// hasEqualEnds reports whether two neighbours of ws share an End (halves
// of a window cut by a block edge): only then is a merge (and its copy)
// needed.
func hasEqualEnds[W any](ws []W, end func(W) int64) bool {
	for i := 1; i < len(ws); i++ {
		if end(ws[i]) == end(ws[i-1]) {
			return true
		}
	}
	return false
}

// QueryRollup returns the series of rollup namespace nsName matching all
// matchers with windows ending in [start, end].
func (db *Database) QueryRollup(ctx context.Context, nsName string, matchers []*labels.Matcher, start, end int64, qo QueryOptions) ([]RollupSeries, error) {
	ns, err := db.namespace(nsName)
	if err != nil {
		return nil, err
	}
	if ns.opts.RollupOf == "" {
		return nil, fmt.Errorf("namespace %s is not a rollup namespace", nsName)
	}
	if ns.index == nil {
		return nil, fmt.Errorf("namespace %s is not indexed: queries by label need index: true", nsName)
	}
	ids, err := ns.index.Query(matchers, start-ns.blockSize, end)
	if err != nil {
		return nil, fmt.Errorf("query index: %w", err)
	}
	if qo.Limit <= 0 && len(ids) > 1 {
		return db.readRollups(ctx, ns, ids, start, end, qo)
	}
	out := make([]RollupSeries, 0, len(ids))
	for i, id := range ids {
		if i%256 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		shard := db.Shard(id)
		if qo.Shards != nil && !qo.Shards(shard) {
			continue
		}
		rs, err := db.readRollup(ns, id, shard, start, end)
		if err != nil {
			return nil, fmt.Errorf("series %q: %w", id, err)
		}
		if len(rs.Windows)+len(rs.HWindows) == 0 {
			continue
		}
		out = append(out, rs)
		if qo.Limit > 0 && len(out) >= qo.Limit {
			break
		}
	}
	return out, nil
}

// readRollups is QueryRollup's read of ids without a limit: series are
// independent, so GOMAXPROCS workers decode them side by side (a 30-day
// query of thousands of series is mostly decoding); the answer keeps
// ids' order.
func (db *Database) readRollups(ctx context.Context, ns *namespace, ids [][]byte, start, end int64, qo QueryOptions) ([]RollupSeries, error) {
	got := make([]RollupSeries, len(ids))
	errs := make([]error, len(ids))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(ids)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(ids) {
					return
				}
				if i%256 == 0 {
					if err := ctx.Err(); err != nil {
						errs[i] = err
						return
					}
				}
				id := ids[i]
				shard := db.Shard(id)
				if qo.Shards != nil && !qo.Shards(shard) {
					continue
				}
				rs, err := db.readRollup(ns, id, shard, start, end)
				if err != nil {
					errs[i] = fmt.Errorf("series %q: %w", id, err)
					return
				}
				got[i] = rs
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	out := got[:0]
	for _, rs := range got {
		if len(rs.Windows)+len(rs.HWindows) > 0 {
			out = append(out, rs)
		}
	}
	return out, nil
}

// ScanRollup is QueryRollup handing each series to fn instead of
// returning them all: fn is called from GOMAXPROCS goroutines at once,
// with the series' index among the index's matches (ascending in
// QueryRollup's order) and its windows, which are valid only during the
// call (each goroutine decodes every series into one reused buffer). A
// 30-day query of thousands of series then never holds every window at
// once, and the caller's per-series work runs on the same cores as the
// decoding. Series without windows in range are skipped; qo.Limit is not
// supported (refused). The first error fn or a read returns stops it.
func (db *Database) ScanRollup(ctx context.Context, nsName string, matchers []*labels.Matcher, start, end int64, qo QueryOptions,
	fn func(i int, rs RollupSeries) error) error {
	if qo.Limit > 0 {
		return errors.New("rollup scan: a limit is not supported, use QueryRollup")
	}
	ns, err := db.namespace(nsName)
	if err != nil {
		return err
	}
	if ns.opts.RollupOf == "" {
		return fmt.Errorf("namespace %s is not a rollup namespace", nsName)
	}
	if ns.index == nil {
		return fmt.Errorf("namespace %s is not indexed: queries by label need index: true", nsName)
	}
	ids, err := ns.index.Query(matchers, start-ns.blockSize, end)
	if err != nil {
		return fmt.Errorf("query index: %w", err)
	}
	var (
		next   atomic.Int64
		failed atomic.Bool
		wg     sync.WaitGroup
	)
	errs := make([]error, min(runtime.GOMAXPROCS(0), len(ids)))
	for k := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf []rollup.Window
			blocks := map[uint32][]*fileset.Reader{} // per shard, listed once
			for !failed.Load() {
				i := int(next.Add(1) - 1)
				if i >= len(ids) {
					return
				}
				if i%256 == 0 {
					if err := ctx.Err(); err != nil {
						errs[k] = err
						failed.Store(true)
						return
					}
				}
				id := ids[i]
				shard := db.Shard(id)
				if qo.Shards != nil && !qo.Shards(shard) {
					continue
				}
				bl, ok := blocks[shard]
				if !ok {
					if sh := ns.existingShard(shard); sh != nil {
						bl = rollupBlocks(ns, sh, start, end)
					}
					blocks[shard] = bl
				}
				rs, err := db.readRollupFrom(ns, bl, id, shard, start, end, buf)
				if err == nil && len(rs.Windows)+len(rs.HWindows) > 0 {
					err = fn(i, rs)
				}
				if err != nil {
					errs[k] = fmt.Errorf("series %q: %w", id, err)
					failed.Store(true)
					return
				}
				if cap(rs.Windows) > cap(buf) {
					buf = rs.Windows[:0]
				}
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// flushedShards lists the shards a flush wrote memory of (not those only
// carried over into a compacted volume, whose data did not change).
func flushedShards(items []shardFlush) []uint32 {
	var out []uint32
	for _, it := range items {
		if len(it.series) > 0 {
			out = append(out, it.sh.id)
		}
	}
	return out
}

// NamespaceDiskBytes is the size of namespace nsName's filesets on disk
// (every file under its directory), for status pages.
func (db *Database) NamespaceDiskBytes(nsName string) (int64, error) {
	if _, err := db.namespace(nsName); err != nil {
		return 0, err
	}
	var n int64
	err := filepath.WalkDir(fileset.NamespaceDir(db.dataDir(), nsName), func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.Type().IsRegular() {
			info, err := d.Info()
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil // removed while walking
				}
				return err
			}
			n += info.Size()
		}
		return nil
	})
	return n, err
}

// rolledEnd is the end of the newest of blocks (block starts of ns).
func rolledEnd(ns *namespace, blocks map[int64][]uint32) int64 {
	var end int64
	for bs := range blocks {
		end = max(end, bs+ns.blockSize)
	}
	return end
}

// rollupWriteError refuses a write to a rollup namespace (its blocks are
// written by its source's flushes only): ErrUnknownNamespace for callers,
// so HTTP answers 400 and Prometheus does not retry.
func rollupWriteError(nsName string) error {
	return fmt.Errorf("%w: %q is a rollup namespace, filled from its source only, and takes no writes", ErrUnknownNamespace, nsName)
}

// queryRollupAsRaw answers Query (remote read, /api/v1/series) over a
// rollup namespace with each window's first and last float samples (a
// stale marker at the End of a window whose series ended): plain
// selectors at window ends read what they would over raw; everything
// else is an approximation (the PromQL API answers rollups properly,
// dbnode/promapi/rollup.go). Histogram windows are left out.
func (db *Database) queryRollupAsRaw(ctx context.Context, nsName string, matchers []*labels.Matcher, start, end int64, qo QueryOptions) ([]SeriesIterator, error) {
	ns := db.namespaces[nsName]
	rs, err := db.QueryRollup(ctx, nsName, matchers, start, end+ns.opts.Resolution.Milliseconds(), qo)
	if err != nil {
		return nil, err
	}
	out := make([]SeriesIterator, 0, len(rs))
	for _, s := range rs {
		var pts []rollup.Sample
		add := func(p rollup.Sample) {
			if p.T >= start && p.T <= end && (len(pts) == 0 || pts[len(pts)-1].T < p.T) {
				pts = append(pts, p)
			}
		}
		for _, w := range s.Windows {
			if w.Count > 0 {
				add(w.First)
				add(w.Last)
			}
			if w.Stale {
				add(rollup.Sample{T: w.End, V: math.Float64frombits(value.StaleNaN)})
			}
		}
		out = append(out, SeriesIterator{ID: s.ID, Shard: s.Shard, Values: &sampleIterator{pts: pts, i: -1}})
	}
	return out, nil
}

// sampleIterator is an encoding.Iterator over samples in memory.
type sampleIterator struct {
	pts []rollup.Sample
	i   int
}

func (it *sampleIterator) Next() bool {
	if it.i < len(it.pts) {
		it.i++
	}
	return it.i < len(it.pts)
}
func (it *sampleIterator) At() (int64, float64) { return it.pts[it.i].T, it.pts[it.i].V }
func (it *sampleIterator) Err() error           { return nil }

// RollupDigest is the digest of one shard's block of a rollup namespace:
// FNV-1a over every series' ID and stored entry in ID order. The entries
// are canonical and computed only from flushed raw blocks, so replicas
// holding equal raw blocks report equal digests.
type RollupDigest struct {
	BlockStart int64
	Series     int
	Digest     uint64
}

// RollupDigests returns the digests of shard's flushed blocks of rollup
// namespace nsName, by block start.
func (db *Database) RollupDigests(nsName string, shard uint32) ([]RollupDigest, error) {
	ns, err := db.namespace(nsName)
	if err != nil {
		return nil, err
	}
	if ns.opts.RollupOf == "" {
		return nil, fmt.Errorf("namespace %s is not a rollup namespace", nsName)
	}
	sh := ns.existingShard(shard)
	if sh == nil {
		return nil, nil
	}
	var out []RollupDigest
	for _, bs := range sh.blockStarts() {
		r := sh.reader(bs)
		if r == nil {
			continue
		}
		h := fnv.New64a()
		d := RollupDigest{BlockStart: bs}
		if err := r.RangeData(func(id, data []byte) error {
			var n [8]byte
			binary.LittleEndian.PutUint64(n[:], uint64(len(id)))
			h.Write(n[:])
			h.Write(id)
			binary.LittleEndian.PutUint64(n[:], uint64(len(data)))
			h.Write(n[:])
			h.Write(data)
			d.Series++
			return nil
		}); err != nil {
			return nil, fmt.Errorf("digest rollup block %d of shard %d: %w", bs, shard, err)
		}
		d.Digest = h.Sum64()
		out = append(out, d)
	}
	return out, nil
}
