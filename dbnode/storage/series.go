package storage

import (
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/tessera-tsdb/tessera/dbnode/commitlog"
	"github.com/tessera-tsdb/tessera/dbnode/encoding"
)

// Series is one series' in-memory state in a shard. Outside this package
// a *Series is only an opaque handle (Sample.Ref) that spares the next
// write of the same series the shard map lookup.
//
// Its id, hash, ns and seq are immutable and read without the lock; the
// rest is guarded by mu.
//
// Layout is for the write path, where every sample touches a different
// series and each line touched is a likely cache miss (or a line pulled
// from the other core): the bucket most writes go to lives inline, and a
// write to it touches only the series' four lines: the immutable head,
// then the lock, the bucket list and the inline bucket's encoder state.
// Series is in the 256-byte size class, whose objects are 64-byte
// aligned; TestSeriesLayout keeps it so. It is the largest per-series
// object of a node (a million active series hold a million of them), so
// every field is paid for: the ID is a string (no capacity word), the
// bucket list is two pointers, and there is no "last bucket written"
// pointer (the first bucket is the one written in all but the minutes
// after a block boundary).
type Series struct {
	id   string     // immutable bytes; ID() returns them as a slice
	hash uint64     // hashID(id)
	ns   *namespace // the namespace it belongs to, to check a caller's ref
	// 8 bytes free (the shard map's collision chain, before it became an
	// open-addressing table): they keep mu at the start of the second line.
	_ [8]byte

	// clRef is the commit log's handle on this series, owned by the log's
	// flusher once the series has been written (commitlog.SeriesRef).
	clRef commitlog.SeriesRef
	// hist holds the native histogram samples (histograms.go); nil for a
	// series without any unflushed, so floats never touch it. Guarded by mu.
	hist *histSeries

	mu sync.Mutex
	// removed is set when the shard dropped this series from its map after
	// a flush emptied it; a writer still holding the pointer must look the
	// series up again instead of writing into an orphan.
	removed bool
	// seq is Seq, in the padding after removed: on the lock's line, which
	// the coordinator's own write of the sample has just touched, and
	// without taking the series out of its size class.
	seq uint32
	// buckets are few: one per open block, plus flushing/cold ones; one
	// of them may be inline.
	buckets bucketList
	inline  bucket
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

// write appends a sample to the writable bucket of its block. It returns
// whether a new bucket was opened (the caller then indexes the series for
// that block).
func (s *Series) write(blockStart, t int64, v float64) (newBucket bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.removed {
		return false, errSeriesRemoved
	}
	if b := s.buckets.first; b != nil && b.start == blockStart && !b.flushing {
		return false, b.write(t, v)
	}
	var b *bucket
	for c := range s.buckets.all() {
		if c.start == blockStart && !c.flushing {
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
	for c := range s.buckets.all() {
		if c == b {
			b = &bucket{}
			break
		}
	}
	*b = bucket{start: blockStart}
	s.buckets.append(b)
	return b
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
	if s.buckets.len() != 1 {
		return nil, 0, false
	}
	b := s.buckets.first
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
func (s *Series) readIterators(srcs []readSource, hits []encoding.HistogramIterator, from, to int64) ([]readSource, []encoding.HistogramIterator) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for pass := 0; pass < 2; pass++ {
		for b := range s.buckets.all() {
			if b.start < from || b.start > to || b.flushing != (pass == 0) {
				continue
			}
			lo, hi := b.bounds()
			srcs = append(srcs, readSource{it: b.iterator(true), block: b.start, lo: lo, hi: hi})
		}
	}
	return srcs, s.appendHistIteratorsLocked(hits, from, to)
}

func (s *Series) appendIteratorsLocked(its []encoding.Iterator, from, to int64) []encoding.Iterator {
	for pass := 0; pass < 2; pass++ {
		for b := range s.buckets.all() {
			if b.start < from || b.start > to || b.flushing != (pass == 0) {
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
	for b := range s.buckets.all() {
		if b.start == blockStart {
			// A bucket already flushing belongs to a failed earlier attempt:
			// fold it in again; it is older than the open one, so first.
			b.flushing = true
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
	s.buckets.keep(func(b *bucket) bool { return !(b.start == blockStart && b.flushing) })
	s.keepHistBucketsLocked(func(b *histBucket) bool { return !(b.start == blockStart && b.flushing) })
	return s.emptyLocked()
}

// dropBefore forgets buckets of blocks starting before t (retention).
func (s *Series) dropBefore(t int64) (empty bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buckets.keep(func(b *bucket) bool { return b.start >= t })
	s.keepHistBucketsLocked(func(b *histBucket) bool { return b.start >= t })
	return s.emptyLocked()
}

// blockStarts lists the block starts with unflushed data.
func (s *Series) stats(fn func(blockStart int64, samples, bytes int)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for b := range s.buckets.all() {
		fn(b.start, b.samples(), b.memBytes())
	}
	if s.hist != nil {
		for _, b := range s.hist.buckets {
			fn(b.start, b.samples(), b.memBytes())
		}
	}
}
