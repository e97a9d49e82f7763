package storage

import (
	"errors"
	"sync"
	"sync/atomic"

	"github.com/tessera-tsdb/tessera/dbnode/commitlog"
	"github.com/tessera-tsdb/tessera/dbnode/encoding"
)

// Series is one series' in-memory state in a shard. Outside this package
// a *Series is only an opaque handle (Sample.Ref) that spares the next
// write of the same series the shard map lookup.
//
// Its id, hash, ns and seq are immutable and read without the lock; next
// belongs to the shard's map (guarded by the shard's mu); the rest is
// guarded by mu.
//
// Layout is for the write path, where every sample touches a different
// series and each line touched is a likely cache miss (or a line pulled
// from the other core): the bucket most writes go to lives inline, and a
// write that hits the bucket it wrote last (hot) touches only the first
// four lines: the immutable head, then the lock, hot and the inline
// bucket's encoder state. The bucket list, and next (read only on a hash
// collision), are past them. Series is in the
// 320-byte size class, whose objects are 64-byte aligned;
// TestSeriesLayout keeps it so.
type Series struct {
	id   []byte
	hash uint64     // hashID(id)
	ns   *namespace // the namespace it belongs to, to check a caller's ref
	// seq is Seq, on the first line with the ID: a coordinator reads it
	// for every sample it replicates.
	seq uint64

	// clRef is the commit log's handle on this series, owned by the log's
	// flusher once the series has been written (commitlog.SeriesRef).
	clRef commitlog.SeriesRef

	mu sync.Mutex
	// removed is set when the shard dropped this series from its map after
	// a flush emptied it; a writer still holding the pointer must look the
	// series up again instead of writing into an orphan.
	removed bool
	// hot is the bucket the last write went to, checked before walking
	// buckets; nil whenever the bucket list shrinks.
	hot    *bucket
	inline bucket
	// buckets are few: one per open block, plus flushing/cold ones. They
	// start in bucketsInline; one of them may be inline.
	buckets       []*bucket
	bucketsInline [2]*bucket

	// next is the next series with the same hash in the shard's map: read
	// only when two IDs' 64-bit hashes collide, so off the written lines.
	next *Series
}

var errSeriesRemoved = errors.New("series removed from shard")

// seriesSeq numbers the series of the process as they are created.
var seriesSeq atomic.Uint64

// Seq is a number no other series of this process has, counting from 1 in
// creation order, so that a caller holding refs (Sample.Ref) can index a
// slice by it instead of hashing the ref or the ID: the coordinator's
// replication streams find a series' handle this way (rpc.WriteStream).
// Like the ref, it stands for exactly one ID.
func (s *Series) Seq() uint64 { return s.seq }

// ID is the series' ID: storage's own copy, immutable for as long as
// anything holds the series. Callers must not modify it. A coordinator
// hands it to the replicas' queues instead of copying the caller's bytes.
func (s *Series) ID() []byte { return s.id }

// write appends a sample to the writable bucket of its block. It returns
// whether a new bucket was opened (the caller then indexes the series for
// that block).
func (s *Series) write(blockStart, t int64, v float64) (newBucket bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.removed {
		return false, errSeriesRemoved
	}
	if b := s.hot; b != nil && b.start == blockStart && !b.flushing {
		return false, b.write(t, v)
	}
	var b *bucket
	for _, c := range s.buckets {
		if c.start == blockStart && !c.flushing {
			b = c
			break
		}
	}
	if b == nil {
		b = s.newBucket(blockStart)
		newBucket = true
	}
	s.hot = b
	return newBucket, b.write(t, v)
}

// newBucket opens a bucket for blockStart: the inline one when no bucket
// in use is it (a fresh value: nothing outside the lock holds a bucket or
// its bytes, readers copy them).
func (s *Series) newBucket(blockStart int64) *bucket {
	if s.buckets == nil {
		s.buckets = s.bucketsInline[:0]
	}
	b := &s.inline
	for _, c := range s.buckets {
		if c == b {
			b = &bucket{}
			break
		}
	}
	*b = bucket{start: blockStart}
	s.buckets = append(s.buckets, b)
	return b
}

// iterators returns copies of the buckets of blocks in [from, to] (block
// starts), flushing buckets before open ones so open (newer) data wins.
func (s *Series) iterators(from, to int64) []encoding.Iterator {
	s.mu.Lock()
	defer s.mu.Unlock()
	var its []encoding.Iterator
	for pass := 0; pass < 2; pass++ {
		for _, b := range s.buckets {
			if b.start < from || b.start > to || b.flushing != (pass == 0) {
				continue
			}
			its = append(its, b.iterator(true))
		}
	}
	return its
}

// startFlush marks the writable buckets of blockStart as flushing and
// returns their merged iterator (nil when the series has none).
func (s *Series) startFlush(blockStart int64) encoding.Iterator {
	s.mu.Lock()
	defer s.mu.Unlock()
	var its []encoding.Iterator
	for _, b := range s.buckets {
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
	kept := s.buckets[:0]
	for _, b := range s.buckets {
		if b.start == blockStart && b.flushing {
			continue
		}
		kept = append(kept, b)
	}
	for i := len(kept); i < len(s.buckets); i++ {
		s.buckets[i] = nil
	}
	s.buckets, s.hot = kept, nil
	return len(s.buckets) == 0
}

// dropBefore forgets buckets of blocks starting before t (retention).
func (s *Series) dropBefore(t int64) (empty bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	kept := s.buckets[:0]
	for _, b := range s.buckets {
		if b.start >= t {
			kept = append(kept, b)
		}
	}
	for i := len(kept); i < len(s.buckets); i++ {
		s.buckets[i] = nil
	}
	s.buckets, s.hot = kept, nil
	return len(s.buckets) == 0
}

// blockStarts lists the block starts with unflushed data.
func (s *Series) stats(fn func(blockStart int64, samples, bytes int)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, b := range s.buckets {
		fn(b.start, b.samples(), b.memBytes())
	}
}
