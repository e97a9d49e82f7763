package storage

import (
	"math"

	"github.com/tessera-tsdb/tessera/dbnode/encoding"
)

// maxStreams bounds the streams of one bucket: past it the bucket is
// compacted into a single stream, so a series written badly out of order
// does not make every read merge dozens of streams.
const maxStreams = 8

// bucket holds one series' unflushed samples of one block.
//
// Samples go to the FIRST stream whose last timestamp is older than the
// sample, or to a new stream appended at the end. This keeps the streams in
// write order for any one timestamp: when a timestamp t is written again,
// every stream before the one holding the old value still ends at or after
// t (last timestamps only grow), so the new value lands in a later stream,
// and MergeIterators lets later streams win. Hence last-write-wins.
type bucket struct {
	start int64 // block start, ms
	// first is stream 0, inline: an in-order series' bucket is one
	// allocation, its write state beside the series lock. Its Mark is
	// whether the bucket is flushing (see flushing): a bool of its own
	// would be a word with the padding, and the inline bucket's 120 bytes
	// are what keeps Series in the 176-byte class. more are the later
	// streams (nil, or never empty), behind a pointer: only a series
	// written out of order has them, and a slice header inline would take
	// every series out of its size class.
	first encoding.Encoder
	more  *overflow
}

// overflow is a bucket's streams after the first, and what the tick
// needs to know whether they have settled.
type overflow struct {
	streams []*encoding.Encoder
	// seen is how many samples the streams held at the previous tick
	// (mod 2^32): the tick merges the streams once that stops changing,
	// when out-of-order writes to the bucket have ended (tickNamespace).
	seen uint32
}

// flushing buckets are being written to a fileset: they stay readable but
// take no more writes (a write to the same block opens a new bucket, which
// the next flush merges in as a cold write).
func (b *bucket) flushing() bool { return b.first.Mark }

// startFlushing marks the bucket flushing; nothing unmarks it.
func (b *bucket) startFlushing() { b.first.Mark = true }

// moreStreams returns the streams after the first.
func (b *bucket) moreStreams() []*encoding.Encoder {
	if b.more == nil {
		return nil
	}
	return b.more.streams
}

func (b *bucket) write(t int64, v float64) error {
	if s := &b.first; s.Len() == 0 || t > s.LastTimestamp() {
		return s.Append(t, v)
	}
	for _, s := range b.moreStreams() {
		if t > s.LastTimestamp() {
			return s.Append(t, v)
		}
	}
	if 1+len(b.moreStreams()) >= maxStreams {
		if err := b.compact(); err != nil {
			return err
		}
		if s := &b.first; t > s.LastTimestamp() {
			return s.Append(t, v)
		}
	}
	s := encoding.NewEncoder()
	if b.more == nil {
		b.more = &overflow{streams: []*encoding.Encoder{s}}
	} else {
		b.more.streams = append(b.more.streams, s)
	}
	return s.Append(t, v)
}

// settledStreams reports whether the bucket has streams after the first
// that took no sample since the previous call (the tick's), and
// remembers their samples for the next call.
func (b *bucket) settledStreams() bool {
	if b.more == nil {
		return false
	}
	var n uint32
	for _, s := range b.more.streams {
		n += uint32(s.Len())
	}
	settled := n == b.more.seen
	b.more.seen = n
	return settled
}

// streams calls fn for each stream in order, stopping when it returns false.
func (b *bucket) streams(fn func(*encoding.Encoder) bool) {
	if !fn(&b.first) {
		return
	}
	for _, s := range b.moreStreams() {
		if !fn(s) {
			return
		}
	}
}

// compact merges all streams into one.
func (b *bucket) compact() error {
	if b.more == nil {
		return nil
	}
	stream, _, err := encoding.Encode(b.iterator(false))
	if err != nil {
		return err
	}
	var enc encoding.Encoder
	it := encoding.NewIterator(stream)
	for it.Next() {
		t, v := it.At()
		if err := enc.Append(t, v); err != nil {
			return err
		}
	}
	if err := it.Err(); err != nil {
		return err
	}
	enc.Mark = b.first.Mark
	b.first, b.more = enc, nil // moved by value
	return nil
}

// iterator merges the bucket's streams. With copyBytes the streams are
// copied first, so the iterator stays valid after the caller releases the
// series lock.
func (b *bucket) iterator(copyBytes bool) encoding.Iterator {
	if b.more == nil {
		return encoding.NewIterator(streamBytes(&b.first, copyBytes))
	}
	its := make([]encoding.Iterator, 0, 1+len(b.more.streams))
	b.streams(func(s *encoding.Encoder) bool {
		its = append(its, encoding.NewIterator(streamBytes(s, copyBytes)))
		return true
	})
	return encoding.MergeIterators(its...)
}

// bounds returns timestamps that every sample of the bucket lies within:
// the first and last of its streams (the bucket's block when a stream's
// head does not say).
func (b *bucket) bounds() (lo, hi int64) {
	lo, hi = math.MaxInt64, math.MinInt64
	b.streams(func(s *encoding.Encoder) bool {
		if s.Len() == 0 {
			return true
		}
		first, ok := encoding.StreamFirstTimestamp(s.Bytes())
		if !ok {
			first = math.MinInt64
		}
		lo, hi = min(lo, first), max(hi, s.LastTimestamp())
		return true
	})
	return lo, hi
}

func streamBytes(e *encoding.Encoder, copyBytes bool) []byte {
	b := e.Bytes()
	if !copyBytes {
		return b
	}
	return append([]byte(nil), b...)
}

// byteSlab hands out copies of small byte slices cut from shared chunks:
// a query copying millions of streams makes a few large allocations
// without pointers, which the collector neither counts one by one nor
// scans. A chunk lives as long as any copy cut from it, so a slab serves
// one query's answer, whose copies are dropped together.
type byteSlab struct{ buf []byte }

// slabChunk is a byteSlab's chunk size; a slice larger than a quarter of
// it gets its own allocation, so at most a quarter of a chunk is wasted.
const slabChunk = 64 << 10

func (s *byteSlab) copy(b []byte) []byte {
	if len(b) > slabChunk/4 {
		return append([]byte(nil), b...)
	}
	if len(b) > cap(s.buf)-len(s.buf) {
		s.buf = make([]byte, 0, slabChunk)
	}
	n := len(s.buf)
	s.buf = append(s.buf, b...)
	return s.buf[n:len(s.buf):len(s.buf)]
}

func (b *bucket) samples() int {
	n := 0
	b.streams(func(s *encoding.Encoder) bool { n += s.Len(); return true })
	return n
}

func (b *bucket) memBytes() int {
	n := 0
	b.streams(func(s *encoding.Encoder) bool { n += s.Size(); return true })
	return n
}
