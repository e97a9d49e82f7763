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
	var memSeries, memSamples, memBytes int
	for _, ns := range db.nsList {
		d := map[int64]bool{}
		dirty[ns.opts.Name] = d
		retentionStart := now - ns.opts.Retention.Milliseconds()
		expireBefore := ns.blockStart(retentionStart) // blocks ending at or before retention start
		sealedBefore := now - ns.opts.BufferPast.Milliseconds() - ns.blockSize
		for _, sh := range ns.allShards() {
			n, err := db.tickShard(ns, sh, expireBefore, sealedBefore)
			if err != nil {
				errs = append(errs, err)
			}
			flushed = flushed || n > 0
			for _, s := range sh.snapshotSeries() {
				memSeries++
				s.stats(func(bs int64, samples, bytes int) {
					d[bs] = true
					memSamples += samples
					memBytes += bytes
				})
			}
		}
		if ns.index != nil {
			ns.index.DropBlocksBefore(expireBefore)
		}
	}
	db.flushedLast = flushed
	db.metrics.series.Update(float64(memSeries))
	db.metrics.memSamples.Update(float64(memSamples))
	db.metrics.memBytes.Update(float64(memBytes))
	if memSamples > 0 {
		db.metrics.bytesPerSamp.Update(float64(memBytes) / float64(memSamples))
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

// tickShard flushes the sealed blocks of one shard and expires old ones.
// It returns how many blocks it flushed.
func (db *Database) tickShard(ns *namespace, sh *shard, expireBefore, sealedBefore int64) (int, error) {
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

	all := sh.snapshotSeries()
	var emptied []*Series
	toFlush := map[int64][]*Series{}
	for _, s := range all {
		s.mu.Lock()
		for b := range s.buckets.all() {
			if b.start <= sealedBefore && b.start >= expireBefore {
				toFlush[b.start] = append(toFlush[b.start], s)
			}
		}
		if s.hist != nil {
			for _, b := range s.hist.buckets {
				if b.start <= sealedBefore && b.start >= expireBefore {
					toFlush[b.start] = append(toFlush[b.start], s)
				}
			}
		}
		s.mu.Unlock()
		if s.dropBefore(expireBefore) {
			emptied = append(emptied, s)
		}
	}
	starts := make([]int64, 0, len(toFlush))
	for bs := range toFlush {
		starts = append(starts, bs)
	}
	sort.Slice(starts, func(i, j int) bool { return starts[i] < starts[j] })
	var errs []error
	n := 0
	for _, bs := range starts {
		ss := dedupe(toFlush[bs])
		if err := db.flushBlock(ns, sh, bs, ss); err != nil {
			db.metrics.flushErrors.Inc(1)
			errs = append(errs, fmt.Errorf("flush namespace %s shard %d block %d: %w", ns.opts.Name, sh.id, bs, err))
			continue
		}
		n++
		for _, s := range ss {
			s.mu.Lock()
			if s.emptyLocked() {
				emptied = append(emptied, s)
			}
			s.mu.Unlock()
		}
	}
	if len(emptied) > 0 {
		sh.removeIfEmpty(emptied)
	}
	return n, errors.Join(errs...)
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

// flushBlock writes the memory of block bs of the given series, merged with
// the block's existing fileset if there is one, as the next volume.
func (db *Database) flushBlock(ns *namespace, sh *shard, bs int64, ss []*Series) error {
	mem := make(map[string]memFlush, len(ss))
	for _, s := range ss {
		if fl, h := s.startFlush(bs); fl != nil || h != nil {
			mem[s.id] = memFlush{fl, h}
		}
	}
	if len(mem) == 0 {
		return nil
	}
	prev := sh.reader(bs)
	var out []fileset.Series
	if prev != nil {
		// Cold flush: carry every series of the old volume over, merging
		// those that have new samples (memory wins on equal timestamps).
		err := rangeSeries(prev, func(id, data []byte, samples int) error {
			m, ok := mem[string(id)]
			if !ok {
				out = append(out, fileset.Series{ID: append([]byte(nil), id...), Data: append([]byte(nil), data...), Samples: samples})
				return nil
			}
			delete(mem, string(id))
			ofl, oh := encoding.PayloadIterators(append([]byte(nil), data...))
			fs, err := sealSeries(id, mergeTwo(ofl, m.fl), mergeTwoHist(oh, m.h))
			if err != nil {
				return err
			}
			out = append(out, fs)
			return nil
		})
		if err != nil {
			return fmt.Errorf("merge with volume %d: %w", prev.ID().Volume, err)
		}
	}
	for id, m := range mem {
		fs, err := sealSeries([]byte(id), m.fl, m.h)
		if err != nil {
			return err
		}
		out = append(out, fs)
	}
	sort.Slice(out, func(i, j int) bool { return bytes.Compare(out[i].ID, out[j].ID) < 0 })

	r, err := db.installVolume(ns, sh, bs, prev, out)
	if err != nil {
		return err
	}
	db.metrics.flushes.Inc(1)
	db.metrics.flushedBytes.Inc(r.DiskSize())
	for _, s := range ss {
		s.finishFlush(bs)
	}
	return nil
}

// installVolume writes series (sorted by ID) as the volume after prev (the
// block's current reader, nil for none) of block bs, and makes it the one
// reads see: its series are indexed first, so a read that finds the new
// volume also finds every series in it; then the reader is swapped in and
// prev is retired to the graveyard (closed and deleted on the next tick,
// after reads that hold it finish). A flush and a block streamed from a
// peer both install through here. The caller holds tickMu, so no other
// install of the shard races this one.
func (db *Database) installVolume(ns *namespace, sh *shard, bs int64, prev *fileset.Reader, series []fileset.Series) (*fileset.Reader, error) {
	id := fileset.ID{Namespace: ns.opts.Name, Shard: sh.id, BlockStart: bs}
	if prev != nil {
		id.Volume = prev.ID().Volume + 1
	}
	if err := fileset.Write(db.opts.FS, db.dataDir(), id, ns.blockSize, series); err != nil {
		return nil, err
	}
	r, err := fileset.Open(db.opts.FS, db.dataDir(), id)
	if err != nil {
		return nil, fmt.Errorf("reopen written fileset %+v: %w", id, err)
	}
	if ns.index != nil {
		for i := range series {
			if err := ns.index.Insert(series[i].ID, bs); err != nil {
				_ = r.Close()
				return nil, fmt.Errorf("index fileset %+v: %w", id, err)
			}
		}
	}
	sh.mu.Lock()
	sh.blocks[bs] = r
	sh.mu.Unlock()
	if prev != nil {
		db.graveyard = append(db.graveyard, removeOnClose{r: prev, db: db})
	}
	return r, nil
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
func sealSeries(id []byte, it encoding.Iterator, hit encoding.HistogramIterator) (fileset.Series, error) {
	var (
		sealed []byte
		n      int
	)
	if it != nil {
		stream, nf, err := encoding.Encode(it)
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

// removeOnClose closes a replaced or expired reader and deletes its files.
type removeOnClose struct {
	r  *fileset.Reader
	db *Database
}

func (x removeOnClose) Close() error {
	err := x.r.Close()
	if rerr := fileset.Remove(x.db.opts.FS, x.db.dataDir(), x.r.ID()); rerr != nil {
		err = errors.Join(err, rerr)
	}
	return err
}

// loadFilesets opens the latest complete volume of every block of every
// shard, deletes incomplete, superseded and expired filesets, and indexes
// the series of what it keeps.
func (db *Database) loadFilesets() error {
	now := db.opts.Now().UnixMilli()
	for _, ns := range db.nsList {
		expireBefore := ns.blockStart(now - ns.opts.Retention.Milliseconds())
		shards, err := fileset.Shards(db.opts.FS, db.dataDir(), ns.opts.Name)
		if err != nil {
			return fmt.Errorf("list shards of namespace %s: %w", ns.opts.Name, err)
		}
		for _, shardID := range shards {
			if shardID >= db.opts.NumShards {
				db.opts.Logger.Warn("ignoring fileset shard beyond numShards", "namespace", ns.opts.Name, "shard", shardID)
				continue
			}
			if n, err := fileset.RemoveIncomplete(db.opts.FS, db.dataDir(), ns.opts.Name, shardID); err != nil {
				return fmt.Errorf("remove incomplete filesets of shard %d: %w", shardID, err)
			} else if n > 0 {
				db.opts.Logger.Warn("removed incomplete filesets", "namespace", ns.opts.Name, "shard", shardID, "count", n)
			}
			ids, err := fileset.List(db.opts.FS, db.dataDir(), ns.opts.Name, shardID)
			if err != nil {
				return fmt.Errorf("list filesets of shard %d: %w", shardID, err)
			}
			// Per block, the newest volume that opens is served and the
			// older ones are obsolete. A newest volume failing its checks
			// does not make the older ones obsolete: one left beside it (a
			// crash before it was removed) holds the block's data.
			sort.Slice(ids, func(i, j int) bool {
				if ids[i].BlockStart != ids[j].BlockStart {
					return ids[i].BlockStart < ids[j].BlockStart
				}
				return ids[i].Volume > ids[j].Volume
			})
			sh := ns.shard(shardID)
			for _, id := range ids {
				if _, served := sh.blocks[id.BlockStart]; id.BlockStart < expireBefore || served {
					if err := fileset.Remove(db.opts.FS, db.dataDir(), id); err != nil {
						return fmt.Errorf("remove obsolete fileset %+v: %w", id, err)
					}
					continue
				}
				r, err := fileset.Open(db.opts.FS, db.dataDir(), id)
				if err != nil {
					// A corrupt fileset must not stop the node: the data
					// may still be in an older volume, on peers or in the
					// commit log.
					// Its files are moved aside, kept for inspection,
					// so the block can be flushed again (a new fileset
					// of the same name would otherwise be refused).
					moved, merr := fileset.MoveAside(db.opts.FS, db.dataDir(), id)
					if merr != nil {
						return fmt.Errorf("unreadable fileset %v (%v): %w", id, err, merr)
					}
					db.opts.Logger.Error("unreadable fileset moved aside; its block is not served from this node's disk",
						"fileset", id, "err", err, "moved_to", moved)
					db.metrics.filesetsUnreadable.Inc(1)
					db.recovery.UnreadableFilesets = append(db.recovery.UnreadableFilesets,
						fmt.Sprintf("%v: %v (its files are kept in %s as *%s)", id, err, fileset.ShardDir(db.dataDir(), id.Namespace, id.Shard), fileset.CorruptSuffix))
					continue
				}
				sh.blocks[id.BlockStart] = r
				if ns.index != nil {
					bs := id.BlockStart
					if err := r.RangeIndex(func(sid []byte, _ uint64, _ int, _ int) error {
						return ns.index.Insert(append([]byte(nil), sid...), bs)
					}); err != nil {
						return fmt.Errorf("index fileset %+v: %w", id, err)
					}
				}
			}
		}
	}
	return nil
}
