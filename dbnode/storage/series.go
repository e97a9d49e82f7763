package storage

import (
	"errors"
	"iter"
	"math"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/tessera-tsdb/tessera/dbnode/commitlog"
	"github.com/tessera-tsdb/tessera/dbnode/encoding"
)

// Series is one series' in-memory state in a shard. Outside this package
// it is never seen: callers hold its SeriesRef (Sample.Ref), which spares
// the next write of the same series the shard map lookup.
//
// Its id, slot, ns and seq are immutable and read without the lock; the
// rest is guarded by mu.
//
// It is the largest per-series object of a node (a million active series
// hold a million of them), so every field is paid for: Series is in the
// 176-byte size class (TestSeriesLayout). The ID is a string (no capacity
// word), the registry slot and the namespace are 32-bit, the commit log's ref
// is 8 bytes, what few series have (histograms, a second float bucket) is
// behind one pointer, the float bucket list is that pointer and a flag,
// the inline bucket's flushing flag lives in its encoder's padding, and
// there is no "last bucket written" pointer (the first bucket is the one
// written in all but the minutes after a block boundary). The bucket most
// writes go to lives inline, so a write touches this one object: its
// lock, flags and the inline encoder state. It was in the 192-byte class,
// whose objects are 64-byte aligned (a write touched exactly three
// lines); a 176-byte object spans three or four, which measured no cost
// in steady ingest CPU (docs/performance.md, "Memory per active series").
type Series struct {
	id string // immutable bytes; ID() returns them as a slice

	// clRef is the commit log's handle on this series, owned by the log's
	// flusher once the series has been written (commitlog.SeriesRef).
	clRef commitlog.SeriesRef
	// more is nil for nearly every series (see seriesMore). Guarded by mu.
	more *seriesMore

	mu sync.Mutex
	// slot is its registry slot (SeriesRef), while it is in its shard's
	// map; the map stores it, with hashID(id), in place of a pointer.
	slot uint32
	// ns is the number of the namespace it belongs to (namespace.num), to
	// check a caller's ref: 4 bytes where a pointer took 8.
	ns uint32
	// seq is Seq.
	seq uint32
	// removed is set when the shard dropped this series from its map after
	// a flush emptied it; a writer still holding the pointer must look the
	// series up again instead of writing into an orphan.
	removed bool
	// inlineUsed says inline is one of the series' float buckets (the
	// only one unless more lists them).
	inlineUsed bool
	// shard is the series' shard + 1 (0: not recorded, a shard number
	// past uint16), for a query that found the series by its registry
	// slot (the index's tag: Database.readIDs) and so skips hashing the
	// ID for its shard. It takes what was padding.
	shard  uint16
	inline bucket
}

// seriesMore is what few series have, behind one pointer (Series.more) so
// that the others do not pay for it: native histogram samples, and the
// float buckets of a series that has more than the inline one (a block
// boundary, a cold write: for minutes), or whose only one is not inline.
type seriesMore struct {
	// hist holds the native histogram samples (histograms.go); nil for a
	// series without any unflushed.
	hist *histSeries
	// buckets are all the series' float buckets in the order they were
	// opened (order matters: of two flushing buckets of one block, the
	// older folds in first), inline among them if it is in use; nil when
	// the inline bucket alone (inlineUsed) or nothing is the list.
	buckets []*bucket
}

// ID is the series' ID. It never changes and the caller must not modify
// it: a cache keyed by the series can keep this slice instead of a copy.
func (s *Series) ID() []byte { return unsafe.Slice(unsafe.StringData(s.id), len(s.id)) }

var errSeriesRemoved = errors.New("series removed from shard")

// seriesSeq numbers the series of the process as they are created.
var seriesSeq atomic.Uint64

// Seq is a number no other series of this process has, counting from 1 in
// creation order, so that a caller holding refs (Sample.Ref) can index a
// slice by it instead of hashing the ref or the ID: the coordinator's
// replication streams find a series' handle this way (rpc.WriteStream).
// Like the ref, it stands for exactly one ID. It is 0 (none: callers fall
// back to the ref) once a process has created 2^32-1 series, so it never
// wraps onto another series' number.
func (s *Series) Seq() uint64 { return uint64(s.seq) }

// nextSeq is the number of the series being created (0 past uint32).
func nextSeq() uint32 {
	if n := seriesSeq.Add(1); n <= math.MaxUint32 {
		return uint32(n)
	}
	return 0
}

// write appends a sample of either kind to the writable bucket of its
// block: float v, or the native histogram of hs when it is not nil (to a
// histogram bucket, writeHistLocked). It returns whether a new bucket was
// opened (the caller then indexes the series for that block).
func (s *Series) write(blockStart, t int64, v float64, hs *HistogramSample) (newBucket bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.removed {
		return false, errSeriesRemoved
	}
	if hs != nil {
		return s.writeHistLocked(blockStart, t, hs.H, hs.FH)
	}
	if b := s.firstBucket(); b != nil && b.start == blockStart && !b.flushing() {
		return false, b.write(t, v)
	}
	var b *bucket
	for c := range s.floatBuckets() {
		if c.start == blockStart && !c.flushing() {
			b = c
			break
		}
	}
	if b == nil {
		b = s.newBucket(blockStart)
		newBucket = true
	}
	return newBucket, b.write(t, v)
}

// newBucket opens a bucket for blockStart: the inline one when no bucket
// in use is it (a fresh value: nothing outside the lock holds a bucket or
// its bytes, readers copy them).
func (s *Series) newBucket(blockStart int64) *bucket {
	b := &s.inline
	if s.inlineUsed {
		b = &bucket{}
	}
	*b = bucket{start: blockStart}
	s.addBucket(b)
	return b
}

// firstBucket is the oldest float bucket, nil when there is none (s.mu
// held).
func (s *Series) firstBucket() *bucket {
	switch {
	case s.more != nil && s.more.buckets != nil:
		return s.more.buckets[0]
	case s.inlineUsed:
		return &s.inline
	}
	return nil
}

// floatBuckets yields the float buckets in the order they were opened
// (s.mu held).
func (s *Series) floatBuckets() iter.Seq[*bucket] {
	return func(yield func(*bucket) bool) {
		if s.more != nil && s.more.buckets != nil {
			for _, b := range s.more.buckets {
				if !yield(b) {
					return
				}
			}
			return
		}
		if s.inlineUsed {
			yield(&s.inline)
		}
	}
}

// bucketCount is the number of float buckets (s.mu held).
func (s *Series) bucketCount() int {
	switch {
	case s.more != nil && s.more.buckets != nil:
		return len(s.more.buckets)
	case s.inlineUsed:
		return 1
	}
	return 0
}

// addBucket appends b, the inline bucket if that is not in use, to the
// float buckets (s.mu held). Only a second bucket allocates: the list.
func (s *Series) addBucket(b *bucket) {
	inline := b == &s.inline
	if s.more == nil || s.more.buckets == nil {
		if !s.inlineUsed && inline {
			s.inlineUsed = true
			return
		}
		list := make([]*bucket, 0, 2)
		if s.inlineUsed {
			list = append(list, &s.inline)
		}
		s.moreLocked().buckets = append(list, b)
	} else {
		s.more.buckets = append(s.more.buckets, b)
	}
	s.inlineUsed = s.inlineUsed || inline
}

// keepBuckets drops the float buckets keep rejects, preserving the order
// of the rest (s.mu held). A dropped inline bucket lets go of its stream
// at once. It allocates nothing: it runs on every series at every
// retention tick.
func (s *Series) keepBuckets(keep func(*bucket) bool) {
	if s.more == nil || s.more.buckets == nil {
		if s.inlineUsed && !keep(&s.inline) {
			s.inlineUsed, s.inline = false, bucket{}
		}
		return
	}
	all := s.more.buckets
	kept, inline := all[:0], false
	for _, b := range all {
		if keep(b) {
			kept = append(kept, b)
			inline = inline || b == &s.inline
		}
	}
	clear(all[len(kept):])
	if !inline && s.inlineUsed {
		s.inlineUsed, s.inline = false, bucket{}
	}
	if len(kept) == 0 || len(kept) == 1 && inline {
		s.more.buckets = nil
		s.dropMoreIfEmpty()
		return
	}
	s.more.buckets = kept
}

// moreLocked returns s.more, creating it (s.mu held).
func (s *Series) moreLocked() *seriesMore {
	if s.more == nil {
		s.more = &seriesMore{}
	}
	return s.more
}

// dropMoreIfEmpty frees s.more once it holds nothing (s.mu held).
func (s *Series) dropMoreIfEmpty() {
	if s.more != nil && s.more.hist == nil && s.more.buckets == nil {
		s.more = nil
	}
}

// iterators returns copies of the buckets of blocks in [from, to] (block
// starts), flushing buckets before open ones so open (newer) data wins.
func (s *Series) iterators(from, to int64) []encoding.Iterator {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.appendIteratorsLocked(nil, from, to)
}

// soleStream returns a copy of the series' float samples and their count
// when they are all in one stream of one bucket (a series written in
// order within one block: nearly every series), so ReadUnflushed can send
// them as they are instead of decoding and re-encoding them (the bytes
// are those re-encoding would give). ok is false otherwise.
func (s *Series) soleStream() (stream []byte, n int, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.bucketCount() != 1 {
		return nil, 0, false
	}
	b := s.firstBucket()
	if b.more != nil || b.first.Len() == 0 {
		return nil, 0, false
	}
	return append([]byte(nil), b.first.Bytes()...), b.first.Len(), true
}

// readIterators appends to srcs and hits what iterators and
// histIterators return, under one lock and without slices of their own:
// a query reads every series it selects. Each float source comes with
// its block and the bounds of its samples, so that the reader can
// concatenate blocks instead of merging them and skip filtering a range
// the samples lie inside.
func (s *Series) readIterators(srcs []readSource, hits []encoding.HistogramIterator, from, to int64, slab *byteSlab) ([]readSource, []encoding.HistogramIterator) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for pass := 0; pass < 2; pass++ {
		for b := range s.floatBuckets() {
			if b.start < from || b.start > to || b.flushing() != (pass == 0) {
				continue
			}
			lo, hi := b.bounds()
			if slab != nil && b.more == nil {
				srcs = append(srcs, readSource{stream: slab.copy(b.first.Bytes()), block: b.start, lo: lo, hi: hi})
				continue
			}
			srcs = append(srcs, readSource{it: b.iterator(true), block: b.start, lo: lo, hi: hi})
		}
	}
	return srcs, s.appendHistIteratorsLocked(hits, from, to)
}

func (s *Series) appendIteratorsLocked(its []encoding.Iterator, from, to int64) []encoding.Iterator {
	for pass := 0; pass < 2; pass++ {
		for b := range s.floatBuckets() {
			if b.start < from || b.start > to || b.flushing() != (pass == 0) {
				continue
			}
			its = append(its, b.iterator(true))
		}
	}
	return its
}

// startFlush marks the writable buckets of blockStart, float and
// histogram, as flushing and returns their merged iterators (each nil when
// the series has none of that type).
func (s *Series) startFlush(blockStart int64) (encoding.Iterator, encoding.HistogramIterator) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.startFloatFlushLocked(blockStart), s.startHistFlushLocked(blockStart)
}

func (s *Series) startFloatFlushLocked(blockStart int64) encoding.Iterator {
	var its []encoding.Iterator
	for b := range s.floatBuckets() {
		if b.start == blockStart {
			// A bucket already flushing belongs to a failed earlier attempt:
			// fold it in again; it is older than the open one, so first.
			b.startFlushing()
			its = append(its, b.iterator(true))
		}
	}
	switch len(its) {
	case 0:
		return nil
	case 1:
		return its[0]
	}
	return encoding.MergeIterators(its...)
}

// finishFlush drops the flushing buckets of blockStart once their fileset
// is durable and visible. It reports whether the series is now empty.
func (s *Series) finishFlush(blockStart int64) (empty bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keepBuckets(func(b *bucket) bool { return !(b.start == blockStart && b.flushing()) })
	s.keepHistBucketsLocked(func(b *histBucket) bool { return !(b.start == blockStart && b.flushing) })
	return s.emptyLocked()
}

// dropBeforeLocked forgets buckets of blocks starting before t
// (retention) (s.mu held).
func (s *Series) dropBeforeLocked(t int64) {
	s.keepBuckets(func(b *bucket) bool { return b.start >= t })
	s.keepHistBucketsLocked(func(b *histBucket) bool { return b.start >= t })
}

// stats calls fn for each bucket with unflushed data: its block start,
// samples and bytes.
func (s *Series) stats(fn func(blockStart int64, samples, bytes int)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for b := range s.floatBuckets() {
		fn(b.start, b.samples(), b.memBytes())
	}
	if h := s.histLocked(); h != nil {
		for _, b := range h.buckets {
			fn(b.start, b.samples(), b.memBytes())
		}
	}
}
