package storage

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func starts(l *bucketList) []int64 {
	var out []int64
	for b := range l.all() {
		out = append(out, b.start)
	}
	return out
}

// TestBucketListOrder: the list keeps opening order through appends and
// filters, whichever bucket a filter drops (first, middle, last, all).
func TestBucketListOrder(t *testing.T) {
	var l bucketList
	require.Equal(t, 0, l.len())
	require.Empty(t, starts(&l))
	for i := int64(1); i <= 4; i++ {
		l.append(&bucket{start: i})
	}
	require.Equal(t, 4, l.len())
	require.Equal(t, []int64{1, 2, 3, 4}, starts(&l))

	l.keep(func(b *bucket) bool { return b.start != 1 })
	require.Equal(t, []int64{2, 3, 4}, starts(&l))
	l.keep(func(b *bucket) bool { return b.start != 3 })
	require.Equal(t, []int64{2, 4}, starts(&l))
	l.append(&bucket{start: 5})
	require.Equal(t, []int64{2, 4, 5}, starts(&l))
	l.keep(func(b *bucket) bool { return b.start != 5 })
	require.Equal(t, []int64{2, 4}, starts(&l))
	l.keep(func(b *bucket) bool { return b.start == 4 })
	require.Equal(t, []int64{4}, starts(&l))
	require.Nil(t, l.rest, "one bucket: no overflow slice")
	l.keep(func(*bucket) bool { return true })
	require.Equal(t, []int64{4}, starts(&l))
	l.keep(func(*bucket) bool { return false })
	require.Equal(t, 0, l.len())
	require.Equal(t, bucketList{}, l)
	l.append(&bucket{start: 6})
	require.Equal(t, []int64{6}, starts(&l))
}

// TestBucketListKeepOneAllocatesNothing: retention ticks filter every
// series' list; a list of one bucket is filtered in place.
func TestBucketListKeepOneAllocatesNothing(t *testing.T) {
	l := bucketList{first: &bucket{start: 1}}
	keep := func(b *bucket) bool { return b.start >= 0 }
	require.Zero(t, testing.AllocsPerRun(100, func() { l.keep(keep) }))
}
