package storage

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// The write path's lines: Series must stay in the 192-byte size class
// (64-byte aligned objects, and a million of them on a full node), with
// the commit log's ref, the lock and the bucket list's flag in the first
// line and the inline bucket, its encoder state included, filling the
// other two, so a write to its first bucket touches three lines.
func TestSeriesLayout(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("the layout is laid out for 64-bit platforms")
	}
	var s Series
	size := unsafe.Sizeof(s)
	require.Greater(t, size, uintptr(160), "below the 176-byte class: update the layout notes")
	require.LessOrEqual(t, size, uintptr(176), "above the 176-byte class: 16 or more bytes per series more")
	require.Equal(t, uintptr(120), unsafe.Sizeof(s.inline), "the inline bucket: start, encoder (flushing in its Mark), more")
	require.Equal(t, size, unsafe.Offsetof(s.inline)+unsafe.Sizeof(s.inline), "no padding after the inline bucket")
}

// TestBucketFlushingMark: a bucket's flushing flag (its encoder's Mark)
// survives the writes, reads and compaction a flushing bucket sees, and a
// new bucket, inline or not, starts open.
func TestBucketFlushingMark(t *testing.T) {
	var s Series
	b := s.newBucket(0)
	require.NoError(t, b.write(10, 1))
	require.False(t, b.flushing())
	require.NotNil(t, s.startFloatFlushLocked(0))
	require.True(t, b.flushing())
	_ = b.first.Bytes()
	require.True(t, b.flushing(), "reading the stream keeps the mark")
	// A write to the block now opens a new bucket, out of line.
	newBucket, err := s.write(0, 20, 2, nil)
	require.NoError(t, err)
	require.True(t, newBucket)
	require.Equal(t, 2, s.bucketCount())
	open := s.more.buckets[1]
	require.False(t, open.flushing())
	// Out of order writes, then compaction, keep the open bucket open and
	// the samples whole.
	for i := range maxStreams + 2 {
		_, err := s.write(0, int64(30-i), float64(i), nil)
		require.NoError(t, err)
	}
	require.False(t, open.flushing())
	require.True(t, b.flushing())
	b.first.Reset()
	require.True(t, b.flushing(), "Reset keeps the mark")
	require.True(t, s.finishFlush(0) == false)
	require.Equal(t, 1, s.bucketCount(), "finishFlush dropped the flushing bucket only")
	require.False(t, s.firstBucket().flushing())
	s.inlineUsed, s.more = false, nil
	require.False(t, s.newBucket(0).flushing(), "a reused inline bucket starts open")
}

func bucketStarts(t *testing.T, s *Series) []int64 {
	var out []int64
	for b := range s.floatBuckets() {
		out = append(out, b.start)
	}
	require.Equal(t, len(out), s.bucketCount())
	return out
}

// TestSeriesBucketOrder: the float bucket list keeps opening order through
// new buckets and filters, whichever bucket a filter drops (the inline
// one, first, middle, last, all), and goes back to the inline bucket
// alone, without the overflow pointer, once that is all that is left.
func TestSeriesBucketOrder(t *testing.T) {
	var s Series
	require.Empty(t, bucketStarts(t, &s))
	require.Nil(t, s.firstBucket())
	b := s.newBucket(1)
	require.Same(t, &s.inline, b, "the first bucket is inline")
	require.Nil(t, s.more, "one bucket: no overflow list")
	for i := int64(2); i <= 4; i++ {
		require.NotSame(t, &s.inline, s.newBucket(i))
	}
	require.Equal(t, []int64{1, 2, 3, 4}, bucketStarts(t, &s))
	require.Equal(t, int64(1), s.firstBucket().start)

	s.keepBuckets(func(b *bucket) bool { return b.start != 1 })
	require.Equal(t, []int64{2, 3, 4}, bucketStarts(t, &s))
	require.False(t, s.inlineUsed)
	require.Equal(t, bucket{}, s.inline, "a dropped inline bucket lets go of its stream")
	require.Same(t, &s.inline, s.newBucket(5), "the free inline bucket is reused")
	require.Equal(t, []int64{2, 3, 4, 5}, bucketStarts(t, &s))
	s.keepBuckets(func(b *bucket) bool { return b.start != 3 })
	require.Equal(t, []int64{2, 4, 5}, bucketStarts(t, &s))
	s.keepBuckets(func(b *bucket) bool { return b.start == 4 })
	require.Equal(t, []int64{4}, bucketStarts(t, &s))
	require.NotNil(t, s.more, "the only bucket is not inline: listed")
	require.Same(t, &s.inline, s.newBucket(6))
	require.Equal(t, []int64{4, 6}, bucketStarts(t, &s))
	s.keepBuckets(func(b *bucket) bool { return b.start == 6 })
	require.Equal(t, []int64{6}, bucketStarts(t, &s))
	require.Nil(t, s.more, "inline alone again: the overflow list is freed")
	require.True(t, s.inlineUsed)
	s.keepBuckets(func(*bucket) bool { return true })
	require.Equal(t, []int64{6}, bucketStarts(t, &s))
	s.keepBuckets(func(*bucket) bool { return false })
	require.Empty(t, bucketStarts(t, &s))
	require.True(t, s.emptyLocked())
	require.Nil(t, s.more)
	require.False(t, s.inlineUsed)
	require.Equal(t, bucket{}, s.inline)
}

// TestSeriesKeepBucketsAllocatesNothing: retention ticks filter every
// series' buckets; that must not allocate, one bucket or several.
func TestSeriesKeepBucketsAllocatesNothing(t *testing.T) {
	var s Series
	s.newBucket(1)
	keep := func(b *bucket) bool { return b.start >= 0 }
	require.Zero(t, testing.AllocsPerRun(100, func() { s.keepBuckets(keep) }))
	s.newBucket(2)
	require.Zero(t, testing.AllocsPerRun(100, func() { s.keepBuckets(keep) }))
	require.Equal(t, []int64{1, 2}, bucketStarts(t, &s))
}
