//go:build !amd64 && !arm64

package unaligned

import "encoding/binary"

// Other CPUs may not load unaligned words, or not cheaply: bounds-checked
// loads through encoding/binary.

func Load64(b []byte, off int) uint64 { return binary.LittleEndian.Uint64(b[off:]) }

func Load32(b []byte, off int) uint32 { return binary.LittleEndian.Uint32(b[off:]) }

func Load16(b []byte, off int) uint16 { return binary.LittleEndian.Uint16(b[off:]) }
