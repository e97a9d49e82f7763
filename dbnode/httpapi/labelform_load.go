package httpapi

import "github.com/tessera-tsdb/tessera/internal/unaligned"

// Little-endian loads from b at off, where the caller has checked that
// off+size <= len(b): one instruction each on amd64 and arm64 (package
// unaligned), without the bounds checks that doubled labelsAreID's
// instructions with encoding/binary's loads.

func load64(b []byte, off int) uint64 { return unaligned.Load64(b, off) }

func load32(b []byte, off int) uint32 { return unaligned.Load32(b, off) }

func load16(b []byte, off int) uint16 { return unaligned.Load16(b, off) }
