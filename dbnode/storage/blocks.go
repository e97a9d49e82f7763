package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/cespare/xxhash/v2"
	"github.com/tessera-tsdb/tessera/dbnode/commitlog"
	"github.com/tessera-tsdb/tessera/dbnode/encoding"
	"github.com/tessera-tsdb/tessera/dbnode/fileset"
)

// This file is the storage side of peer bootstrap: a source lists and
// pages out its flushed blocks as stored (sealed payloads, never decoded)
// and its unflushed memory; a receiver loads whole sealed blocks as
// filesets of its own.

// BlockMeta describes one flushed block of a shard. Digest is an xxhash64
// over the (ID, checksum) pairs of its series in ID order: replicas whose
// digests agree hold identical blocks, so a receiver fetches it once.
type BlockMeta struct {
	BlockStart int64
	Volume     int
	Series     int
	Samples    int
	Digest     uint64
}

// FlushedBlocks lists the flushed blocks of a shard, by block start.
func (db *Database) FlushedBlocks(nsName string, shard uint32) ([]BlockMeta, error) {
	ns, err := db.namespace(nsName)
	if err != nil {
		return nil, err
	}
	if shard >= db.opts.NumShards {
		return nil, fmt.Errorf("shard %d out of range", shard)
	}
	sh := ns.existingShard(shard)
	if sh == nil {
		return nil, nil
	}
	var out []BlockMeta
	for _, bs := range sh.blockStarts() {
		r := sh.reader(bs)
		if r == nil {
			continue
		}
		h := xxhash.New()
		var sum [8]byte
		err := r.RangeIndex(func(id []byte, checksum uint64, _ int, _ int) error {
			_, _ = h.Write(binary.AppendUvarint(sum[:0], uint64(len(id))))
			_, _ = h.Write(id)
			binary.LittleEndian.PutUint64(sum[:], checksum)
			_, _ = h.Write(sum[:])
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("block %d of shard %d: %w", bs, shard, err)
		}
		out = append(out, BlockMeta{BlockStart: bs, Volume: r.ID().Volume, Series: r.Len(), Samples: r.Samples(), Digest: h.Sum64()})
	}
	return out, nil
}

// ReadBlock pages through a flushed block: the series with ID > after (all
// when after is nil), in ID order, until their payloads add up to maxBytes
// (at least one series). Payloads are the sealed bytes as stored.
func (db *Database) ReadBlock(nsName string, shard uint32, blockStart int64, after []byte, maxBytes int) ([]fileset.Series, bool, error) {
	ns, err := db.namespace(nsName)
	if err != nil {
		return nil, false, err
	}
	sh := ns.existingShard(shard)
	var r *fileset.Reader
	if sh != nil {
		r = sh.reader(blockStart)
	}
	if r == nil {
		return nil, false, fmt.Errorf("shard %d has no flushed block at %d", shard, blockStart)
	}
	var out []fileset.Series
	size, more := 0, false
	errStop := fmt.Errorf("page full")
	err = rangeSeries(r, func(id, data []byte, samples int) error {
		if after != nil && bytes.Compare(id, after) <= 0 {
			return nil
		}
		if len(out) > 0 && size+len(data) > maxBytes {
			more = true
			return errStop
		}
		out = append(out, fileset.Series{ID: append([]byte(nil), id...), Data: append([]byte(nil), data...), Samples: samples})
		size += len(data)
		return nil
	})
	if err != nil && err != errStop {
		return nil, false, fmt.Errorf("read block %d of shard %d: %w", blockStart, shard, err)
	}
	return out, more, nil
}

// SeriesStream is a series' unflushed samples: its floats as one encoding
// stream, its native histograms as histogram streams in time order (nil
// when none).
type SeriesStream struct {
	ID         []byte
	Stream     []byte
	Histograms [][]byte
}

// streams is s's unflushed samples as ReadUnflushed gives them: its
// floats as one stream (nil when none), its histograms as histogram
// streams (nil when none). A series written in order within one block
// gives its stream's bytes as they are (a copy), no re-encoding.
func (s *Series) streams() (stream []byte, hist [][]byte, err error) {
	stream, n, sole := s.soleStream()
	if !sole {
		if its := s.iterators(-1<<62, 1<<62); len(its) > 0 {
			if stream, n, err = encoding.Encode(mergeAll(its)); err != nil {
				return nil, nil, err
			}
		}
	}
	hn := 0
	if hits := s.histIterators(-1<<62, 1<<62); len(hits) > 0 {
		if hist, hn, err = encoding.EncodeHistograms(encoding.MergeHistogramIterators(hits...)); err != nil {
			return nil, nil, fmt.Errorf("histograms: %w", err)
		}
	}
	if n == 0 {
		stream = nil
	}
	if hn == 0 {
		hist = nil
	}
	return stream, hist, nil
}

// ReadUnflushed pages through a shard's in-memory samples the same way.
func (db *Database) ReadUnflushed(nsName string, shard uint32, after []byte, maxBytes int) ([]SeriesStream, bool, error) {
	ns, err := db.namespace(nsName)
	if err != nil {
		return nil, false, err
	}
	sh := ns.existingShard(shard)
	if sh == nil {
		return nil, false, nil
	}
	all := sh.snapshotSeries()
	sort.Slice(all, func(i, j int) bool { return all[i].id < all[j].id })
	var out []SeriesStream
	size := 0
	for i, s := range all {
		if after != nil && s.id <= string(after) {
			continue
		}
		stream, hist, err := s.streams()
		if err != nil {
			return nil, false, fmt.Errorf("encode unflushed series of shard %d: %w", shard, err)
		}
		if stream == nil && hist == nil {
			continue
		}
		sz := len(stream)
		for _, h := range hist {
			sz += len(h)
		}
		if len(out) > 0 && size+sz > maxBytes {
			return out, i < len(all), nil
		}
		out = append(out, SeriesStream{ID: s.ID(), Stream: stream, Histograms: hist})
		size += sz
	}
	return out, false, nil
}

// LoadStreams loads series streamed from a peer's memory (the form
// ReadUnflushed gives) into shard, as LoadBatch would load their samples:
// through the commit log (durable on return in sync mode), cold writes
// taken, no active-series limit. Each series is looked up or created once
// instead of once per sample. It returns how many samples it wrote: with a
// *RejectedError (samples out of retention or the buffer window by now)
// the others are written and counted; with any other error, 0. A stream
// that does not decode fails the call before anything is written.
func (db *Database) LoadStreams(nsName string, shard uint32, series []SeriesStream) (int, error) {
	n, q, err := db.QueueStreams(nsName, shard, series)
	if werr := q.Wait(); werr != nil {
		return 0, werr
	}
	return n, err
}

// Queued is samples QueueStreams put in memory whose commit log records
// are queued (and already being written) but not known durable yet. A
// nil *Queued has nothing to wait for.
type Queued struct {
	floats queuedWrite
	hists  queuedWrite
}

// Wait returns once the samples are durable (sync mode: fsynced), or the
// commit log's error, after which none of them may be counted durable
// (they stay in memory; loading the same series again is idempotent). It
// must be called for every Queued that QueueStreams returned, before
// anything relies on the samples' durability (marking a bootstrapped
// shard available); calls after the first return nil. Not for concurrent
// use.
func (q *Queued) Wait() error {
	if q == nil {
		return nil
	}
	ferr := q.floats.wait()
	herr := q.hists.wait()
	return errors.Join(ferr, herr)
}

// QueueStreams is LoadStreams without the commit log wait: the samples
// are in memory and their records queued and handed to the commit log's
// flusher when it returns, and the caller waits (Queued.Wait) before
// counting them durable. Peer bootstrap loads a few thousand small pages
// per joining node: waiting for each page's fsync serialised the stream
// behind the disk, while one wait per batch of shards keeps the shard as
// durable before it is marked available. On an error other than a
// *RejectedError the returned Queued is nil (whatever was queued has been
// waited for), so the caller may retry the page whole.
func (db *Database) QueueStreams(nsName string, shard uint32, series []SeriesStream) (int, *Queued, error) {
	ns, err := db.namespace(nsName)
	if err != nil {
		return 0, nil, err
	}
	if shard >= db.opts.NumShards {
		return 0, nil, fmt.Errorf("load streams: shard %d out of range", shard)
	}
	// Floats are decoded straight into the commit log entries (pooled
	// scratch, no intermediate []Sample), which memory is then written
	// from; histograms go through the histogram write path.
	n := 0
	for _, s := range series {
		n += encoding.StreamLen(s.Stream)
	}
	sc := db.getScratch(n)
	release := true
	defer func() {
		if release {
			db.putScratch(sc)
		}
	}()
	now := db.opts.Now()
	// Streamed samples are history: only retention and bufferFuture
	// refuse them (never the cold-write rule), so one range test per
	// sample suffices and check only runs to explain a refusal.
	nowMs := now.UnixMilli()
	lo, hi := nowMs-ns.opts.Retention.Milliseconds(), nowMs+ns.opts.BufferFuture.Milliseconds()
	var rejected *RejectedError
	var hist []HistogramSample
	sh := ns.shard(shard)
	idx := 0
	for _, s := range series {
		var se *Series
		it := encoding.NewIterator(s.Stream)
		for it.Next() {
			t, v := it.At()
			idx++
			if t < lo || t > hi {
				reason, msg := ns.check(t, now)
				if rejected == nil {
					rejected = &RejectedError{}
				}
				rejected.add(SampleError{Index: idx - 1, Reason: reason, Msg: msg})
				db.metrics.rejected[reason].Inc(1)
				continue
			}
			if se == nil {
				se, _ = sh.getOrCreateUpTo(ns, hashID(s.ID), s.ID, 0) // 0: no limit
			}
			sc.series = append(sc.series, se)
			sc.entries = append(sc.entries, commitlog.Entry{Namespace: nsName, ID: se.ID(), Ref: &se.clRef, T: t, V: v})
		}
		if err := it.Err(); err != nil {
			return 0, nil, fmt.Errorf("decode streamed series %q of shard %d: %w", s.ID, shard, err)
		}
		if len(s.Histograms) == 0 {
			continue
		}
		if se == nil {
			se, _ = sh.getOrCreateUpTo(ns, hashID(s.ID), s.ID, 0)
		}
		its := make([]encoding.HistogramIterator, len(s.Histograms))
		for i, h := range s.Histograms {
			its[i] = encoding.NewHistogramIterator(h)
		}
		hit := encoding.MergeHistogramIterators(its...)
		for hit.Next() {
			hs := HistogramSample{ID: s.ID, Shard: shard, Ref: se.Ref()}
			if hit.IsFloat() {
				hs.T, hs.FH = hit.AtFloatHistogram(nil)
			} else {
				hs.T, hs.H = hit.AtHistogram(nil)
			}
			hist = append(hist, hs)
		}
		if err := hit.Err(); err != nil {
			return 0, nil, fmt.Errorf("decode streamed histograms of series %q of shard %d: %w", s.ID, shard, err)
		}
	}
	written := 0
	var refused []error
	if rejected != nil {
		refused = append(refused, rejected)
	}
	q := &Queued{}
	fail := func(err error) (int, *Queued, error) {
		_ = q.Wait() // release what was queued; err is what failed
		return 0, nil, err
	}
	if len(sc.entries) > 0 {
		release = false // the queued write owns sc now
		w, err := db.logAndApplyEntries(ns, shard, sc)
		if err != nil {
			return fail(fmt.Errorf("write batch to namespace %s: %w", nsName, err))
		}
		w.nsName = nsName
		q.floats = w
		written += w.n
		q.floats.ticket.Start()
	}
	if len(hist) > 0 {
		var err error
		q.hists, err = db.queue(nsName, Batch{Histograms: hist}, true)
		var rej *RejectedError
		switch {
		case errors.As(err, &rej):
			written += len(hist) - rej.Total
			refused = append(refused, err)
		case err != nil:
			return fail(err)
		default:
			written += len(hist)
		}
		q.hists.ticket.Start()
	}
	return written, q, errors.Join(refused...)
}

// LoadBlock installs a sealed block streamed from a peer. With no local
// fileset for the block it is written as is (no decoding); with one, the
// two are merged (local samples win on equal timestamps) into the next
// volume, as a cold flush would. Series must be sorted by ID.
func (db *Database) LoadBlock(nsName string, shard uint32, blockStart int64, series []fileset.Series) error {
	return db.LoadBlocks(nsName, []StreamedBlock{{Shard: shard, BlockStart: blockStart, Series: series}})
}

// StreamedBlock is one sealed block of a shard as a peer streamed it, for
// LoadBlocks. Series must be sorted by ID.
type StreamedBlock struct {
	Shard      uint32
	BlockStart int64
	Series     []fileset.Series
}

// LoadBlocks installs several streamed blocks as LoadBlock does, each
// durable (fsynced, checkpointed) when it returns. The blocks of one block
// start become one new volume holding every shard streamed for it (a peer
// bootstrap of many small shards would otherwise pay a volume's files and
// fsyncs per shard); a shard with a local fileset for the block is merged
// with it into that volume; a block named twice (one copy per differing
// replica) is merged in a second volume after the first. Every block is
// tried; the error names each block that failed.
func (db *Database) LoadBlocks(nsName string, blocks []StreamedBlock) error {
	ns, err := db.namespace(nsName)
	if err != nil {
		return err
	}
	for _, b := range blocks {
		if b.Shard >= db.opts.NumShards {
			return fmt.Errorf("load block %d of shard %d: shard out of range", b.BlockStart, b.Shard)
		}
		if b.BlockStart != ns.blockStart(b.BlockStart) {
			return fmt.Errorf("load block %d of shard %d: block start is not aligned to the block size", b.BlockStart, b.Shard)
		}
	}
	db.tickMu.Lock() // no flush meanwhile
	defer db.tickMu.Unlock()
	// Rounds: a (shard, block) named twice (one copy per differing
	// replica) goes to the next round, so it merges with what the first
	// round installed. Within a round each block start is one new volume
	// holding every shard streamed for it: one set of files and fsyncs
	// per block, not per shard.
	type key struct {
		shard uint32
		start int64
	}
	pending := make([]int, 0, len(blocks))
	for i, b := range blocks {
		if len(b.Series) > 0 {
			pending = append(pending, i)
		}
	}
	var errs []error
	for len(pending) > 0 {
		seen := make(map[key]bool, len(pending))
		byStart := map[int64][]int{}
		var later []int
		for _, i := range pending {
			k := key{blocks[i].Shard, blocks[i].BlockStart}
			if seen[k] {
				later = append(later, i)
				continue
			}
			seen[k] = true
			byStart[k.start] = append(byStart[k.start], i)
		}
		starts := make([]int64, 0, len(byStart))
		for bs := range byStart {
			starts = append(starts, bs)
		}
		slices.Sort(starts)
		for _, bs := range starts {
			idx := byStart[bs]
			sort.Slice(idx, func(x, y int) bool { return blocks[idx[x]].Shard < blocks[idx[y]].Shard })
			errs = append(errs, db.loadVolumeLocked(ns, bs, blocks, idx))
		}
		pending = later
	}
	return errors.Join(errs...)
}

// loadVolumeLocked installs the streamed blocks idx (distinct shards, in
// increasing order, all of block bs) as one new volume, each merged with
// the shard's current data for the block if it has any. A shard whose
// merge fails (its current volume has a damaged page) is left out and
// named in the error; the others are installed. The caller holds tickMu.
func (db *Database) loadVolumeLocked(ns *namespace, bs int64, blocks []StreamedBlock, idx []int) error {
	vw, err := db.newVolumeWrite(ns, bs)
	if err != nil {
		return fmt.Errorf("load block %d: %w", bs, err)
	}
	var errs []error
	added := 0
	for _, i := range idx {
		b := blocks[i]
		sh := ns.shard(b.Shard)
		prev := sh.reader(bs)
		out := b.Series
		switch {
		case prev != nil && ns.opts.RollupOf != "":
			if out, err = mergeRollupSealed(prev, b.Series); err != nil {
				errs = append(errs, fmt.Errorf("merge streamed rollup block %d of shard %d: %w", bs, b.Shard, err))
				continue
			}
		case prev != nil:
			if out, err = mergeSealed(prev, b.Series); err != nil {
				errs = append(errs, fmt.Errorf("merge streamed block %d of shard %d: %w", bs, b.Shard, err))
				continue
			}
		}
		if err := vw.add(sh, prev, out); err != nil {
			// The volume's writer is unusable now: every shard of this
			// volume fails, not just the one being added.
			vw.abort()
			shards := make([]uint32, len(idx))
			for k, j := range idx {
				shards[k] = blocks[j].Shard
			}
			return errors.Join(append(errs, fmt.Errorf("load block %d of shards %v: writing shard %d: %w", bs, shards, b.Shard, err))...)
		}
		added++
	}
	if added == 0 {
		vw.abort()
		return errors.Join(errs...)
	}
	if _, err := vw.install(); err != nil {
		errs = append(errs, fmt.Errorf("load block %d (%d shards): %w", bs, added, err))
	}
	return errors.Join(errs...)
}

// mergeSealed merges a local fileset with streamed series: series only on
// one side are kept as they are; series on both are decoded and merged.
func mergeSealed(prev *fileset.Reader, in []fileset.Series) ([]fileset.Series, error) {
	return mergeByID(in,
		func(fn func(id, data []byte, samples int) error) error { return rangeSeries(prev, fn) },
		func(id, data []byte, samples int) fileset.Series {
			return fileset.Series{ID: append([]byte(nil), id...), Data: append([]byte(nil), data...), Samples: samples}
		},
		func(id, data []byte, _ int, streamed fileset.Series) (fileset.Series, error) {
			local := append([]byte(nil), data...)
			rfl, rh := encoding.PayloadIterators(streamed.Data)
			lfl, lh := encoding.PayloadIterators(local)
			return sealSeries(id, mergeTwo(rfl, lfl), mergeTwoHist(rh, lh), nil)
		})
}

// mergeByID merges a local volume, walked by each, with streamed series:
// a series on one side only is kept as it is (a local one as keep copies
// it out of the volume), one on both becomes what both makes of the two.
// The result is in ID order, as a volume is written: the one walk the raw
// and the rollup merges (mergeSealed, mergeRollupSealed) share.
func mergeByID(in []fileset.Series, each func(fn func(id, data []byte, samples int) error) error,
	keep func(id, data []byte, samples int) fileset.Series,
	both func(id, data []byte, samples int, streamed fileset.Series) (fileset.Series, error)) ([]fileset.Series, error) {
	byID := make(map[string]int, len(in))
	for i := range in {
		byID[string(in[i].ID)] = i
	}
	used := make([]bool, len(in))
	var out []fileset.Series
	err := each(func(id, data []byte, samples int) error {
		i, ok := byID[string(id)]
		if !ok {
			out = append(out, keep(id, data, samples))
			return nil
		}
		used[i] = true
		s, err := both(id, data, samples, in[i])
		if err != nil {
			return err
		}
		out = append(out, s)
		return nil
	})
	if err != nil {
		return nil, err
	}
	for i := range in {
		if !used[i] {
			out = append(out, in[i])
		}
	}
	sort.Slice(out, func(i, j int) bool { return bytes.Compare(out[i].ID, out[j].ID) < 0 })
	return out, nil
}
