package storage

import (
	"fmt"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/tessera-tsdb/tessera/dbnode/commitlog"
	"github.com/tessera-tsdb/tessera/dbnode/encoding"
	"github.com/tessera-tsdb/tessera/dbnode/fileset"
)

// HistogramSample is one native histogram sample of one series: H
// (integer counts) or FH (float counts), exactly one set. The rest is as in
// Sample. It is a type of its own so that Sample, and the float write path
// that moves millions of them, does not grow by two pointers.
type HistogramSample struct {
	ID    []byte
	Shard uint32
	T     int64 // unix ms
	H     *histogram.Histogram
	FH    *histogram.FloatHistogram
	Ref   SeriesRef
}

// histSeries is a series' unflushed histogram samples: one histBucket per
// block, as bucket is for floats. It hangs off Series.more, nil for a
// series without any, so floats pay nothing for it.
type histSeries struct {
	buckets []*histBucket
}

// histBucket holds one series' unflushed histogram samples of one block.
// Streams follow bucket's rule (a sample goes to the first stream that can
// take it in order, else a new one at the end; later streams win on equal
// timestamps), with one more condition: a stream holds one kind, integer
// or float, so a sample goes to the first stream of its kind (or empty).
type histBucket struct {
	start    int64
	flushing bool
	streams  []*encoding.HistogramEncoder
}

func (b *histBucket) write(t int64, h *histogram.Histogram, fh *histogram.FloatHistogram) error {
	pick := func() *encoding.HistogramEncoder {
		for _, s := range b.streams {
			if s.Len() == 0 || (t > s.LastTimestamp() && s.IsFloat() == (fh != nil)) {
				return s
			}
		}
		return nil
	}
	s := pick()
	if s == nil && len(b.streams) >= maxStreams {
		if err := b.compact(); err != nil {
			return err
		}
		s = pick()
	}
	if s == nil {
		s = encoding.NewHistogramEncoder()
		b.streams = append(b.streams, s)
	}
	if fh != nil {
		return s.AppendFloatHistogram(t, fh)
	}
	return s.AppendHistogram(t, h)
}

// compact merges the streams into as few as their kinds allow (one per
// run of a kind, in time order).
func (b *histBucket) compact() error {
	var out []*encoding.HistogramEncoder
	if _, err := encoding.EncodeHistogramRuns(b.iterator(false), func() *encoding.HistogramEncoder {
		out = append(out, encoding.NewHistogramEncoder())
		return out[len(out)-1]
	}); err != nil {
		return err
	}
	b.streams = out
	return nil
}

// iterator merges the bucket's streams; with copyBytes they are copied
// first, so it stays valid after the series lock is released.
func (b *histBucket) iterator(copyBytes bool) encoding.HistogramIterator {
	its := make([]encoding.HistogramIterator, 0, len(b.streams))
	for _, s := range b.streams {
		bs := s.Bytes()
		if copyBytes {
			bs = append([]byte(nil), bs...)
		}
		its = append(its, encoding.NewHistogramIterator(bs))
	}
	return encoding.MergeHistogramIterators(its...)
}

func (b *histBucket) samples() int {
	n := 0
	for _, s := range b.streams {
		n += s.Len()
	}
	return n
}

func (b *histBucket) memBytes() int {
	n := 0
	for _, s := range b.streams {
		n += s.Size()
	}
	return n
}

// writeHistLocked is write's histogram half: it appends a histogram
// sample to the writable histogram bucket of its block (s.mu held).
func (s *Series) writeHistLocked(blockStart, t int64, h *histogram.Histogram, fh *histogram.FloatHistogram) (newBucket bool, err error) {
	hs := s.histLocked()
	if hs == nil {
		hs = &histSeries{}
		s.moreLocked().hist = hs
	}
	var b *histBucket
	for _, c := range hs.buckets {
		if c.start == blockStart && !c.flushing {
			b = c
			break
		}
	}
	if b == nil {
		b = &histBucket{start: blockStart}
		hs.buckets = append(hs.buckets, b)
		newBucket = true
	}
	return newBucket, b.write(t, h, fh)
}

// histIterators is appendHistIteratorsLocked under the series' lock, for
// callers that read histograms alone (unflushed streaming, repair).
func (s *Series) histIterators(from, to int64) []encoding.HistogramIterator {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.appendHistIteratorsLocked(nil, from, to)
}

// appendHistIteratorsLocked is appendIteratorsLocked for histograms
// (called with s.mu held).
func (s *Series) appendHistIteratorsLocked(its []encoding.HistogramIterator, from, to int64) []encoding.HistogramIterator {
	hs := s.histLocked()
	if hs == nil {
		return its
	}
	for pass := 0; pass < 2; pass++ {
		for _, b := range hs.buckets {
			if b.start < from || b.start > to || b.flushing != (pass == 0) {
				continue
			}
			its = append(its, b.iterator(true))
		}
	}
	return its
}

// startHistFlush is startFlush for histograms (called with s.mu held).
func (s *Series) startHistFlushLocked(blockStart int64) encoding.HistogramIterator {
	hs := s.histLocked()
	if hs == nil {
		return nil
	}
	var its []encoding.HistogramIterator
	for _, b := range hs.buckets {
		if b.start == blockStart {
			b.flushing = true
			its = append(its, b.iterator(true))
		}
	}
	if len(its) == 0 {
		return nil
	}
	return encoding.MergeHistogramIterators(its...)
}

// keepHistBuckets keeps the histogram buckets keep accepts (s.mu held),
// and drops the histogram state once none is left.
func (s *Series) keepHistBucketsLocked(keep func(*histBucket) bool) {
	hs := s.histLocked()
	if hs == nil {
		return
	}
	kept := hs.buckets[:0]
	for _, b := range hs.buckets {
		if keep(b) {
			kept = append(kept, b)
		}
	}
	for i := len(kept); i < len(hs.buckets); i++ {
		hs.buckets[i] = nil
	}
	hs.buckets = kept
	if len(kept) == 0 {
		s.more.hist = nil
		s.dropMoreIfEmpty()
	}
}

// holdsFloatAt reports whether the series holds an unflushed float
// sample at t (in the block starting at blockStart): a histogram there
// would be a second sample at one timestamp.
func (s *Series) holdsFloatAt(blockStart, t int64) bool {
	s.mu.Lock()
	its := s.appendIteratorsLocked(nil, blockStart, blockStart) // copies: read after unlocking
	s.mu.Unlock()
	return anyAt(its, floatT, t)
}

// holdsHistAt is holdsFloatAt for a native histogram sample.
func (s *Series) holdsHistAt(blockStart, t int64) bool {
	s.mu.Lock()
	its := s.appendHistIteratorsLocked(nil, blockStart, blockStart)
	s.mu.Unlock()
	return anyAt(its, encoding.HistogramIterator.AtT, t)
}

// anyAt reports whether one of its, each in time order, holds a sample at
// t (read by at), of whichever kind.
func anyAt[I interface{ Next() bool }](its []I, at func(I) int64, t int64) bool {
	for _, it := range its {
		for it.Next() {
			if ts := at(it); ts >= t {
				if ts == t {
					return true
				}
				break
			}
		}
	}
	return false
}

// floatT is the time of a float iterator's current sample.
func floatT(it encoding.Iterator) int64 {
	t, _ := it.At()
	return t
}

// histLocked is the series' histogram state, nil when it has no unflushed
// histogram sample (s.mu held).
func (s *Series) histLocked() *histSeries {
	if s.more == nil {
		return nil
	}
	return s.more.hist
}

// emptyLocked reports whether the series holds no unflushed sample of
// either type (s.mu held).
func (s *Series) emptyLocked() bool {
	return s.firstBucket() == nil && s.histLocked() == nil
}

// WriteHistograms writes native histogram samples to namespace ns, with
// WriteBatch's rules and errors: samples the time rules refuse, and
// histograms that are invalid (Prometheus' validation: spans and buckets
// that disagree, negative or inconsistent counts), are skipped and
// reported in a *RejectedError (Index: position in batch); the rest is
// durable in the commit log (sync mode) when it returns nil.
func (db *Database) WriteHistograms(nsName string, batch []HistogramSample) error {
	return db.write(nsName, Batch{Histograms: batch}, false)
}

// LoadHistograms is LoadBatch for histogram samples.
func (db *Database) LoadHistograms(nsName string, batch []HistogramSample) error {
	return db.write(nsName, Batch{Histograms: batch}, true)
}

// histograms admits the histogram samples of batch into sc, as floats
// does the floats: also refused are invalid histograms and those of a
// series holding a float at their timestamp, already or earlier in sc.
func (a *admit) histograms(nsName string, batch []HistogramSample, sc *writeScratch) {
	// A float of the same batch at the same series and time is not in
	// memory yet: the histogram loses to it, as to one written before.
	if len(sc.entries) > 0 {
		a.floatAt = make(map[seriesAt]bool, len(sc.entries))
		for k, se := range sc.series {
			a.floatAt[seriesAt{se, sc.entries[k].T}] = true
		}
	}
	a.checkKind = true
	for i := range batch {
		s := &batch[i]
		se := a.sample(i, s.ID, s.Shard, s.Ref, s.T, s)
		if se == nil {
			continue
		}
		sc.hseries = append(sc.hseries, se)
		sc.hindex = append(sc.hindex, int32(i))
		sc.hentries = append(sc.hentries, commitlog.HistEntry{Namespace: nsName, ID: se.ID(), Ref: &se.clRef, T: s.T, H: s.H, FH: s.FH})
	}
}

type seriesAt struct {
	s *Series
	t int64
}

// checkHistogram refuses what Prometheus' TSDB refuses (Validate) and
// what the stream encoding cannot hold, before anything is logged.
func checkHistogram(h *histogram.Histogram, fh *histogram.FloatHistogram) error {
	switch {
	case (h == nil) == (fh == nil):
		return fmt.Errorf("exactly one of an integer and a float histogram must be given")
	case h != nil:
		if err := h.Validate(); err != nil {
			return err
		}
		return encoding.CheckHistogram(h)
	default:
		if err := fh.Validate(); err != nil {
			return err
		}
		return encoding.CheckFloatHistogram(fh)
	}
}

// ReadHistograms returns the histogram samples of one series in [start,
// end] (ms, inclusive), merged across filesets and memory.
func (db *Database) ReadHistograms(nsName string, id []byte, start, end int64) (encoding.HistogramIterator, error) {
	ns, err := db.namespace(nsName)
	if err != nil {
		return nil, err
	}
	_, h, err := db.readBoth(ns, id, nil, db.Shard(id), start, end, nil)
	if err != nil {
		return nil, err
	}
	if h == nil {
		return encoding.NewHistogramIterator(nil), nil
	}
	return h, nil
}

// rangeHistIterator keeps the samples of it inside [start, end].
type rangeHistIterator struct {
	encoding.HistogramIterator
	window
}

func (r *rangeHistIterator) Next() bool {
	return nextIn(&r.window, r.HistogramIterator, encoding.HistogramIterator.AtT)
}

// holdsHistograms reports whether one of the series ids (of the shards
// accepted, all when nil) holds histogram samples in the blocks of
// [start, end] known without reading any: unflushed ones in memory (when
// the namespace has taken histograms since it opened), or flushed ones a
// fileset's index records (index version 4; only filesets holding some
// are searched). Filesets older than the kind say nothing here: readIDs
// finds their histograms when it reads them.
func (db *Database) holdsHistograms(ns *namespace, ids [][]byte, start, end int64, shards func(uint32) bool) bool {
	from, to := ns.blockStart(start), ns.blockStart(end)
	mem, flushed := ns.hadHist.Load(), ns.flushedHist.Load()
	for _, id := range ids {
		shard := db.Shard(id)
		if shards != nil && !shards(shard) {
			continue
		}
		sh := ns.existingShard(shard)
		if sh == nil {
			continue
		}
		var s *Series
		sh.mu.RLock()
		if mem {
			s = sh.series.get(hashID(id), id)
		}
		inFile := flushed && sh.flushedHistIn(id, from, to)
		sh.mu.RUnlock()
		if inFile || s != nil && s.holdsHistIn(from, to) {
			return true
		}
	}
	return false
}

// flushedHistIn reports whether a fileset of the shard for a block of
// [from, to] records series id as holding histograms. sh.mu is held.
func (sh *shard) flushedHistIn(id []byte, from, to int64) bool {
	for bs, r := range sh.blocks {
		if bs < from || bs > to {
			continue
		}
		if holds, _ := r.HoldsHistograms(); !holds {
			continue
		}
		if k, _ := r.Kind(id); k == fileset.KindHistograms {
			return true
		}
	}
	return false
}

// holdsHistIn reports whether the series holds unflushed histogram
// samples in a block of [from, to] (block starts), flushing or open.
func (s *Series) holdsHistIn(from, to int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	hs := s.histLocked()
	if hs == nil {
		return false
	}
	for _, b := range hs.buckets {
		if b.start >= from && b.start <= to {
			return true
		}
	}
	return false
}
