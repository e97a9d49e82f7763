package storage

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// The write path's lines: Series must stay in the 256-byte size class
// (64-byte aligned objects, and a million of them on a full node), with
// the lock and the bucket list in the second line and the inline
// bucket's encoder state ending by the end of the fourth, so a write to
// its first bucket touches four lines.
func TestSeriesLayout(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("the layout is laid out for 64-bit platforms")
	}
	var s Series
	size := unsafe.Sizeof(s)
	require.Greater(t, size, uintptr(240), "below the 256-byte class: objects no longer 64-byte aligned")
	require.LessOrEqual(t, size, uintptr(256), "above the 256-byte class: 32 or more bytes per series more")
	require.Equal(t, uintptr(64), unsafe.Offsetof(s.mu), "the lock starts the second line")
	encEnd := unsafe.Offsetof(s.inline) + unsafe.Offsetof(s.inline.first) + unsafe.Sizeof(s.inline.first)
	require.LessOrEqual(t, encEnd, uintptr(256), "inline encoder state spills into a fifth line")
	require.Less(t, unsafe.Offsetof(s.buckets), uintptr(128), "the bucket list left the lock's line")
}
