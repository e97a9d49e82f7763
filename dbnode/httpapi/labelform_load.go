package httpapi

import "encoding/binary"

// Little-endian loads from b at off, where the caller has checked that
// off+size <= len(b): encoding/binary's loads, one instruction on amd64
// and arm64 plus a bounds check: this package reads no memory past the
// type system (docs/performance.md, "Opaque refs").

func load64(b []byte, off int) uint64 { return binary.LittleEndian.Uint64(b[off:]) }

func load32(b []byte, off int) uint32 { return binary.LittleEndian.Uint32(b[off:]) }

func load16(b []byte, off int) uint16 { return binary.LittleEndian.Uint16(b[off:]) }
