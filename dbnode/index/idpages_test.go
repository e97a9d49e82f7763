package index

import (
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// TestIDPages: entries keep each ID's bytes and length whole (an empty
// one, one over 64 KiB, on several pages), clearing gives "" back, and an
// entry is 16 bytes (12, and the tag's 4).
func TestIDPages(t *testing.T) {
	require.Equal(t, uintptr(16<<idPageBits), unsafe.Sizeof(idPage{}))
	var p idPages
	p.grow(3 << idPageBits)
	long := strings.Repeat("x", 70_000)
	ids := map[uint32]string{0: "a", 1: long, 1 << idPageBits: "b\x00c", 3<<idPageBits - 1: "last"}
	for ref, id := range ids {
		p.set(ref, id)
	}
	for ref, id := range ids {
		require.Equal(t, id, p.get(ref))
		require.Same(t, unsafe.StringData(id), unsafe.StringData(p.get(ref)), "the caller's bytes, not a copy")
	}
	require.Equal(t, "", p.get(2))
	p.set(1, "")
	require.Equal(t, "", p.get(1))
	require.Equal(t, "a", p.get(0))
}
