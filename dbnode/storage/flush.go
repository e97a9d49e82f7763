package storage

import (
	"bytes"
	"errors"
	"fmt"
	"sort"

	"github.com/tessera-tsdb/tessera/dbnode/commitlog"
	"github.com/tessera-tsdb/tessera/dbnode/encoding"
	"github.com/tessera-tsdb/tessera/dbnode/fileset"
)

// Tick runs one round of background work: flush every block past its end
// plus bufferPast (and cold writes to already flushed blocks), expire data
// past retention, and delete commit log files whose data is all flushed.
func (db *Database) Tick() error {
	db.tickMu.Lock()
	defer db.tickMu.Unlock()

	// Readers replaced at the previous tick are closed now: any read that
	// picked one up has long finished with it.
	for _, c := range db.graveyard {
		_ = c.Close()
	}
	db.graveyard = db.graveyard[:0]

	// Snapshot the closed commit log files first (see writeMu).
	db.writeMu.Lock()
	var rotateErr error
	if db.flushedLast {
		rotateErr = db.cl.Rotate()
	}
	files := db.cl.Files()
	db.writeMu.Unlock()
	if rotateErr != nil {
		return fmt.Errorf("rotate commit log: %w", rotateErr)
	}

	now := db.opts.Now().UnixMilli()
	var errs []error
	flushed := false
	dirty := map[string]map[int64]bool{} // namespace -> block starts with memory left
	var mem tickStats
	for _, ns := range db.nsList {
		dirty[ns.opts.Name] = map[int64]bool{}
		mem.startNamespace(dirty[ns.opts.Name])
		retentionStart := now - ns.opts.Retention.Milliseconds()
		expireBefore := ns.blockStart(retentionStart) // blocks ending at or before retention start
		sealedBefore := now - ns.opts.BufferPast.Milliseconds() - ns.blockSize
		n, err := db.tickNamespace(ns, expireBefore, sealedBefore, &mem)
		if err != nil {
			errs = append(errs, err)
		}
		flushed = flushed || n > 0
		if ns.index != nil {
			ns.index.DropBlocksBefore(expireBefore)
		}
	}
	db.flushedLast = flushed
	if err := db.backfillRollups(now); err != nil {
		errs = append(errs, err)
	}
	if flushed && !db.invalidateRestartSnapshot() {
		// A snapshot older than this flush may hold values the flush
		// superseded; until it is gone no commit log file may go.
		return errors.Join(append(errs, errors.New("restart snapshot not removed after a flush: commit log files kept"))...)
	}
	db.metrics.series.Update(float64(mem.series))
	db.metrics.memSamples.Update(float64(mem.samples))
	db.metrics.memBytes.Update(float64(mem.bytes))
	if mem.samples > 0 {
		db.metrics.bytesPerSamp.Update(float64(mem.bytes) / float64(mem.samples))
	}

	for _, f := range files {
		if db.fileStillNeeded(f.Ranges, dirty) {
			continue
		}
		if err := db.cl.Remove(f.Path); err != nil {
			errs = append(errs, fmt.Errorf("remove commit log %s: %w", f.Path, err))
			continue
		}
		db.metrics.clRemoved.Inc(1)
	}
	return errors.Join(errs...)
}

// fileStillNeeded reports whether a commit log file may hold data not yet
// in a fileset: some block its samples fall in still has memory.
func (db *Database) fileStillNeeded(ranges map[string]commitlog.TimeRange, dirty map[string]map[int64]bool) bool {
	for name, r := range ranges {
		ns := db.namespaces[name]
		if ns == nil {
			continue
		}
		d := dirty[name]
		if len(d) == 0 {
			continue
		}
		from, to := ns.blockStart(r.Min), ns.blockStart(r.Max)
		for bs := range d {
			if bs >= from && bs <= to {
				return true
			}
		}
	}
	return false
}

// tickNamespace expires the blocks of every shard past retention, then
// flushes the sealed blocks of the namespace one block at a time across
// shards: each block becomes one volume holding every shard that had
// memory for it (plus, when the block has too many volumes, every other
// shard of it: see maxVolumesPerBlock), so a flush costs a bounded
// number of files and fsyncs per block, not per shard. It returns how
// many volumes it wrote.
//
// It adds the namespace's memory statistics to mem in the same walk over
// the series, one lock per series: at ten million series a second walk
// for the gauges alone was half of the tick's CPU (docs/performance.md,
// "tick30"). A series not queued for a flush is counted as the walk
// leaves it (nothing later in the tick changes its memory); one queued
// is counted once its flushes are done, as a walk after them would.
func (db *Database) tickNamespace(ns *namespace, expireBefore, sealedBefore int64, mem *tickStats) (int, error) {
	shards := ns.allShards()
	toFlush := map[int64][]shardFlush{}
	emptied := map[*shard][]*Series{}
	var pending []shardSeries // queued for a flush: counted after it
	var compactErr error      // the last, reported once the tick is done
	for _, sh := range shards {
		// Expire first: nothing below is flushed only to be deleted.
		sh.mu.Lock()
		for bs, r := range sh.blocks {
			if bs < expireBefore {
				delete(sh.blocks, bs)
				db.graveyard = append(db.graveyard, removeOnClose{r: r, db: db})
				db.metrics.expired.Inc(1)
			}
		}
		sh.mu.Unlock()

		byBlock := map[int64][]*Series{}
		db.tickSeries = sh.appendSeries(db.tickSeries[:0])
		mem.series += len(db.tickSeries)
		for i, s := range db.tickSeries {
			if i%touchAhead == 0 {
				mem.touched += touchSeries(db.tickSeries, i+touchAhead)
			}
			queued := false
			s.mu.Lock()
			// Memory past retention goes first, so it is neither
			// compacted nor queued for a flush.
			s.dropBeforeLocked(expireBefore)
			for b := range s.floatBuckets() {
				if b.start <= sealedBefore {
					byBlock[b.start] = append(byBlock[b.start], s)
					queued = true
				}
				if !b.flushing() && b.settledStreams() {
					// Out-of-order writes left several streams, which
					// every read merges sample by sample until the block
					// is flushed (over two hours): once they have taken
					// no sample for a tick, merge them. A series written
					// out of order all along keeps its streams (as
					// before), rather than being merged every tick. On
					// error the bucket is left as it was.
					if err := b.compact(); err != nil {
						compactErr = fmt.Errorf("compact the buckets of a series: %w", err)
					}
				}
			}
			if h := s.histLocked(); h != nil {
				for _, b := range h.buckets {
					if b.start <= sealedBefore {
						byBlock[b.start] = append(byBlock[b.start], s)
						queued = true
					}
				}
			}
			if !queued {
				mem.addLocked(s)
			}
			empty := s.emptyLocked()
			s.mu.Unlock()
			if queued {
				pending = append(pending, shardSeries{sh: sh, s: s})
			}
			if empty {
				emptied[sh] = append(emptied[sh], s)
			}
		}
		clear(db.tickSeries)
		for bs, ss := range byBlock {
			toFlush[bs] = append(toFlush[bs], shardFlush{sh: sh, series: dedupe(ss)})
		}
	}
	for bs, bv := range ns.vols {
		if bs < expireBefore {
			// Expired readers release their volumes when the graveyard
			// closes them (next tick); forget the block after that.
			if len(bv.users) == 0 && bv.v1 == 0 {
				delete(ns.vols, bs)
			}
			continue
		}
		if _, ok := toFlush[bs]; !ok && db.sourcesOf(ns, bs) > maxVolumesPerBlock {
			toFlush[bs] = nil // compact only
		}
	}
	starts := make([]int64, 0, len(toFlush))
	for bs := range toFlush {
		starts = append(starts, bs)
	}
	sort.Slice(starts, func(i, j int) bool { return starts[i] < starts[j] })
	var errs []error
	if compactErr != nil {
		errs = append(errs, fmt.Errorf("namespace %s: %w", ns.opts.Name, compactErr))
	}
	n := 0
	rolled := map[int64][]uint32{} // blocks written, for the rollups
	// With rollups, the blocks of one rollup block are rolled up as soon
	// as they are flushed, from the samples the flush sealed (sealroll.go),
	// which are then dropped: a backfill of many blocks in one tick keeps
	// one rollup block's samples at a time, and writes each rollup block
	// once, as one call after all flushes did.
	dsts := db.rollupsOf(ns.opts.Name)
	stopSealed := db.startSealed(ns)
	defer stopSealed()
	for i, bs := range starts {
		items := toFlush[bs]
		wrote, err := db.flushBlock(ns, bs, items)
		if err != nil {
			db.metrics.flushErrors.Inc(1)
			errs = append(errs, fmt.Errorf("flush namespace %s block %d: %w", ns.opts.Name, bs, err))
		}
		if wrote {
			n++
			if sh := flushedShards(items); len(sh) > 0 {
				rolled[bs] = sh // rolled up below, one volume per rollup block
			}
		}
		if len(dsts) > 0 && len(rolled) > 0 && (i+1 == len(starts) || rollupEdge(dsts, bs, starts[i+1])) {
			if err := db.rollUpBlocks(ns, rolled, rolledEnd(ns, rolled), nil); err != nil {
				errs = append(errs, err)
			}
			rolled = map[int64][]uint32{}
			db.dropSealed()
		}
	}
	// The queued series once all their blocks are flushed (or failed to
	// be: their memory stays and is counted).
	for _, p := range pending {
		p.s.mu.Lock()
		mem.addLocked(p.s)
		empty := p.s.emptyLocked()
		p.s.mu.Unlock()
		if empty {
			emptied[p.sh] = append(emptied[p.sh], p.s)
		}
	}
	if err := db.rollUpBlocks(ns, rolled, rolledEnd(ns, rolled), nil); err != nil {
		errs = append(errs, err)
	}
	for sh, ss := range emptied {
		mem.series -= sh.removeIfEmpty(ss)
	}
	return n, errors.Join(errs...)
}

// tickStats is what a tick gathers for the memory gauges: the series in
// memory, their unflushed samples and bytes, and (for the commit log
// cleanup) the block starts of the namespace being walked that still
// have memory.
type tickStats struct {
	series, samples, bytes int
	dirty                  map[int64]bool
	touched                uint32 // touchSeries' sums, unused
	lastDirty              int64  // the block markDirty saw last
	hasLast                bool   // lastDirty is one of dirty's
}

// addLocked counts the memory of s (s.mu held).
func (m *tickStats) addLocked(s *Series) {
	for b := range s.floatBuckets() {
		m.markDirty(b.start)
		m.samples += b.samples()
		m.bytes += b.memBytes()
	}
	if h := s.histLocked(); h != nil {
		for _, b := range h.buckets {
			m.markDirty(b.start)
			m.samples += b.samples()
			m.bytes += b.memBytes()
		}
	}
}

// touchAhead is how many series the tick's walk brings into the cache at
// once (touchSeries).
const touchAhead = 16

// touchSeries reads an immutable field (seq) of each of the touchAhead
// series from ss[from]: with a million series each one's first touch is
// a cache miss, and the series lock (an atomic, which orders the loads
// around it) would take them one at a time; plain loads issued together
// overlap their misses. The sum only keeps the loads from being dropped.
func touchSeries(ss []*Series, from int) uint32 {
	var sum uint32
	for _, s := range ss[min(from, len(ss)):min(from+touchAhead, len(ss))] {
		sum += s.seq
	}
	return sum
}

// markDirty records that block bs of the namespace has memory. Nearly
// every series has memory in the same block, so the last one marked
// spares a map assignment per series.
func (m *tickStats) markDirty(bs int64) {
	if m.hasLast && m.lastDirty == bs {
		return
	}
	m.dirty[bs] = true
	m.lastDirty, m.hasLast = bs, true
}

// startNamespace points the statistics' dirty blocks at those of the
// namespace walked next.
func (m *tickStats) startNamespace(dirty map[int64]bool) {
	m.dirty, m.hasLast = dirty, false
}

// shardSeries is a series with its shard.
type shardSeries struct {
	sh *shard
	s  *Series
}

// shardFlush is one shard's series with memory in a block being flushed.
type shardFlush struct {
	sh     *shard
	series []*Series
}

func dedupe(ss []*Series) []*Series {
	seen := make(map[*Series]bool, len(ss))
	out := ss[:0]
	for _, s := range ss {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// flushBlock writes, as one new volume of block bs, the memory of the
// given shards' series merged with each shard's current data for the block
// (a cold flush); when the block is served from too many volumes it also
// carries over every shard not served from the largest one, so their old
// volumes can go. A shard whose data cannot be built (its current volume has a
// damaged page) is left out, keeps its memory and is reported; the
// others are flushed. It reports whether a volume was written.
func (db *Database) flushBlock(ns *namespace, bs int64, items []shardFlush) (bool, error) {
	compact := db.sourcesOf(ns, bs)+1 > maxVolumesPerBlock
	byShard := map[uint32]shardFlush{}
	for _, it := range items {
		byShard[it.sh.id] = it
	}
	if compact {
		// Carry over every shard not served from the block's largest
		// volume: the block is then served from two volumes, and the
		// copying is proportional to what lies outside the largest one
		// (a bootstrap adding a volume per shard does not rewrite the
		// whole block at every tick).
		base := ns.volumes(bs).largest()
		for _, sh := range ns.allShards() {
			if _, ok := byShard[sh.id]; ok {
				continue
			}
			r := sh.reader(bs)
			if r == nil || (r.Version() != 1 && r.ID().Volume == base) {
				continue
			}
			byShard[sh.id] = shardFlush{sh: sh}
		}
	}
	ids := make([]uint32, 0, len(byShard))
	for id := range byShard {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })

	var (
		vw      *volumeWrite
		errs    []error
		flushed [][]*Series
		capts   []*sealCapture // per shard added, for the rollups
	)
	for _, id := range ids {
		it := byShard[id]
		prev := it.sh.reader(bs)
		var (
			out  []fileset.Series
			err  error
			capt *sealCapture
		)
		if it.series != nil {
			if db.capturing() {
				capt = db.newSealCapture()
			}
			out, err = shardMemory(it.series, bs, prev, capt)
		} else {
			out, err = copySeries(prev)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("shard %d: %w", id, err))
			continue
		}
		if len(out) == 0 {
			continue
		}
		if vw == nil {
			if vw, err = db.newVolumeWrite(ns, bs); err != nil {
				return false, errors.Join(append(errs, err)...)
			}
		}
		if err := vw.add(it.sh, prev, out); err != nil {
			vw.abort()
			return false, errors.Join(append(errs, err)...)
		}
		flushed = append(flushed, it.series)
		capts = append(capts, capt)
	}
	if vw == nil {
		return false, errors.Join(errs...)
	}
	size, err := vw.install()
	if err != nil {
		return false, errors.Join(append(errs, err)...)
	}
	db.metrics.flushes.Inc(1)
	db.metrics.flushedBytes.Inc(size)
	db.keepSealed(vw, capts)
	for _, ss := range flushed {
		for _, s := range ss {
			s.finishFlush(bs)
		}
	}
	return true, errors.Join(errs...)
}

// shardMemory builds one shard's series for a block: the flushing memory
// of ss, merged with prev (the shard's current data for the block, nil
// for none): every series of prev is carried over, those with new samples
// merged (memory wins on equal timestamps). Sorted by ID. capt (nil:
// none) keeps the float samples sealed (sealCapture).
func shardMemory(ss []*Series, bs int64, prev *fileset.Reader, capt *sealCapture) ([]fileset.Series, error) {
	mem := make(map[string]memFlush, len(ss))
	for _, s := range ss {
		if fl, h := s.startFlush(bs); fl != nil || h != nil {
			mem[s.id] = memFlush{fl, h}
		}
	}
	if len(mem) == 0 {
		return nil, nil
	}
	var out []fileset.Series
	if prev != nil {
		err := rangeSeries(prev, func(id, data []byte, samples int) error {
			m, ok := mem[string(id)]
			if !ok {
				if capt != nil {
					capt.ok = false // carried over undecoded
				}
				out = append(out, fileset.Series{ID: append([]byte(nil), id...), Data: append([]byte(nil), data...), Samples: samples})
				return nil
			}
			delete(mem, string(id))
			ofl, oh := encoding.PayloadIterators(append([]byte(nil), data...))
			fs, err := sealSeries(id, mergeTwo(ofl, m.fl), mergeTwoHist(oh, m.h), capt)
			if err != nil {
				return err
			}
			out = append(out, fs)
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("merge with volume %d: %w", prev.ID().Volume, err)
		}
	}
	for id, m := range mem {
		fs, err := sealSeries([]byte(id), m.fl, m.h, capt)
		if err != nil {
			return nil, err
		}
		out = append(out, fs)
	}
	sort.Slice(out, func(i, j int) bool { return bytes.Compare(out[i].ID, out[j].ID) < 0 })
	return out, nil
}

// copySeries copies the series of r as stored (no decoding), for a shard
// carried into a new volume.
func copySeries(r *fileset.Reader) ([]fileset.Series, error) {
	out := make([]fileset.Series, 0, r.Len())
	err := rangeSeries(r, func(id, data []byte, samples int) error {
		out = append(out, fileset.Series{ID: append([]byte(nil), id...), Data: append([]byte(nil), data...), Samples: samples})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("carry volume %d over: %w", r.ID().Volume, err)
	}
	return out, nil
}

// memFlush is a series' memory of one block being flushed: its float and
// histogram samples, either nil when it has none.
type memFlush struct {
	fl encoding.Iterator
	h  encoding.HistogramIterator
}

// sealSeries builds a series' block payload (encoding.AppendPayload) from
// its float samples and its histogram samples, either nil for none. A
// series with floats only gets the sealed float form, as before histograms.
// capt (nil: none) keeps the float samples encoded for the rollups
// (sealCapture); a series with histograms leaves it incomplete.
func sealSeries(id []byte, it encoding.Iterator, hit encoding.HistogramIterator, capt *sealCapture) (fileset.Series, error) {
	var (
		sealed []byte
		n      int
	)
	if capt != nil && (it == nil || hit != nil) {
		capt.ok = false
	}
	if it != nil {
		var (
			stream []byte
			nf     int
			err    error
		)
		if capt != nil && capt.ok {
			stream, nf, err = capt.encode(id, it)
		} else {
			stream, nf, err = encoding.Encode(it)
		}
		if err != nil {
			return fileset.Series{}, fmt.Errorf("encode series: %w", err)
		}
		if nf > 0 || hit == nil {
			if sealed, err = encoding.Seal(stream); err != nil {
				return fileset.Series{}, fmt.Errorf("seal series: %w", err)
			}
		}
		n += nf
	}
	var hist [][]byte
	if hit != nil {
		var nh int
		var err error
		if hist, nh, err = encoding.EncodeHistograms(hit); err != nil {
			return fileset.Series{}, fmt.Errorf("encode histograms of series: %w", err)
		}
		n += nh
	}
	return fileset.Series{ID: append([]byte(nil), id...), Data: encoding.AppendPayload(nil, sealed, hist), Samples: n}, nil
}

// mergeTwo merges older and newer float samples (newer wins ties); either
// may be nil.
func mergeTwo(older, newer encoding.Iterator) encoding.Iterator {
	switch {
	case older == nil:
		return newer
	case newer == nil:
		return older
	}
	return encoding.MergeIterators(older, newer)
}

// mergeTwoHist is mergeTwo for histograms.
func mergeTwoHist(older, newer encoding.HistogramIterator) encoding.HistogramIterator {
	switch {
	case older == nil:
		return newer
	case newer == nil:
		return older
	}
	return encoding.MergeHistogramIterators(older, newer)
}

// rangeSeries walks a fileset's series in ID order with their payloads
// and the sample counts its index records, so carrying a series over
// never decodes it. id and data are valid only during fn.
func rangeSeries(r *fileset.Reader, fn func(id, data []byte, samples int) error) error {
	counts := make([]int, 0, r.Len())
	if err := r.RangeIndex(func(_ []byte, _ uint64, _ int, samples int) error {
		counts = append(counts, samples)
		return nil
	}); err != nil {
		return err
	}
	i := 0
	return r.RangeData(func(id, data []byte) error {
		if i >= len(counts) {
			return fmt.Errorf("fileset %v: more data than index entries", r.ID())
		}
		i++
		return fn(id, data, counts[i-1])
	})
}

// removeOnClose closes a replaced or expired reader and deletes what
// only it used: a version 1 fileset's files; for a shard of a version 2
// volume, the volume once no shard serves from it any more.
type removeOnClose struct {
	r  *fileset.Reader
	db *Database
}

func (x removeOnClose) Close() error {
	err := x.r.Close()
	id := x.r.ID()
	if x.r.Version() == 1 {
		x.db.releaseV1(id)
		if rerr := fileset.Remove(x.db.opts.FS, x.db.dataDir(), id); rerr != nil {
			err = errors.Join(err, rerr)
		}
		return err
	}
	if rerr := x.db.releaseVolume(id); rerr != nil {
		err = errors.Join(err, rerr)
	}
	return err
}
