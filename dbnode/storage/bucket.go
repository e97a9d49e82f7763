package storage

import (
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
	// streams start as the one inline stream (streamsInline[0] = &first),
	// so an in-order series' bucket is one allocation, read in one place.
	streams       []*encoding.Encoder
	streamsInline [1]*encoding.Encoder
	first         encoding.Encoder
	// flushing buckets are being written to a fileset: they stay readable
	// but take no more writes (a write to the same block opens a new
	// bucket, which the next flush merges in as a cold write).
	flushing bool
}

func (b *bucket) write(t int64, v float64) error {
	for _, s := range b.streams {
		if s.Len() == 0 || t > s.LastTimestamp() {
			return s.Append(t, v)
		}
	}
	if len(b.streams) >= maxStreams {
		if err := b.compact(); err != nil {
			return err
		}
		if s := b.streams[0]; t > s.LastTimestamp() {
			return s.Append(t, v)
		}
	}
	s := b.addStream()
	return s.Append(t, v)
}

// addStream appends an empty stream: the inline one first.
func (b *bucket) addStream() *encoding.Encoder {
	if len(b.streams) == 0 {
		b.streamsInline[0] = &b.first
		b.streams = b.streamsInline[:1]
		return &b.first
	}
	s := encoding.NewEncoder()
	b.streams = append(b.streams, s)
	return s
}

// compact merges all streams into one.
func (b *bucket) compact() error {
	if len(b.streams) <= 1 {
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
	// The merged encoder becomes the inline stream (moved by value).
	clear(b.streams)
	b.streams = b.streams[:0]
	b.first = enc
	b.addStream()
	return nil
}

// iterator merges the bucket's streams. With copyBytes the streams are
// copied first, so the iterator stays valid after the caller releases the
// series lock.
func (b *bucket) iterator(copyBytes bool) encoding.Iterator {
	if len(b.streams) == 1 {
		return encoding.NewIterator(streamBytes(b.streams[0], copyBytes))
	}
	its := make([]encoding.Iterator, len(b.streams))
	for i, s := range b.streams {
		its[i] = encoding.NewIterator(streamBytes(s, copyBytes))
	}
	return encoding.MergeIterators(its...)
}

func streamBytes(e *encoding.Encoder, copyBytes bool) []byte {
	b := e.Bytes()
	if !copyBytes {
		return b
	}
	return append([]byte(nil), b...)
}

func (b *bucket) samples() int {
	n := 0
	for _, s := range b.streams {
		n += s.Len()
	}
	return n
}

func (b *bucket) memBytes() int {
	n := 0
	for _, s := range b.streams {
		n += len(s.Bytes())
	}
	return n
}
