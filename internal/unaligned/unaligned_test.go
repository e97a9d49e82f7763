package unaligned

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"
)

// Every load at every offset is encoding/binary's little-endian load.
func TestLoadsMatchBinary(t *testing.T) {
	b := make([]byte, 40)
	for i := range b {
		b[i] = byte(i*37 + 11)
	}
	for off := 0; off+8 <= len(b); off++ {
		require.Equal(t, binary.LittleEndian.Uint64(b[off:]), Load64(b, off), "off %d", off)
		require.Equal(t, binary.LittleEndian.Uint32(b[off:]), Load32(b, off), "off %d", off)
		require.Equal(t, binary.LittleEndian.Uint16(b[off:]), Load16(b, off), "off %d", off)
	}
}
