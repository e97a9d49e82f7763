//go:build !amd64 && !arm64

package httpapi

import "encoding/binary"

// Little-endian loads from b at off (see labelform_unaligned.go), bounds
// checked: other CPUs may not load unaligned words, or not cheaply.

func load64(b []byte, off int) uint64 { return binary.LittleEndian.Uint64(b[off:]) }

func load32(b []byte, off int) uint32 { return binary.LittleEndian.Uint32(b[off:]) }

func load16(b []byte, off int) uint16 { return binary.LittleEndian.Uint16(b[off:]) }
