//go:build amd64 || arm64

// Package unaligned loads little-endian words from byte slices at any
// offset without bounds checks, for hot comparisons whose caller has
// checked the bounds once for many loads (the HTTP series cache's
// comparison of label bytes with an ID's form, httpapi.labelsAreID). On
// these CPUs an unaligned load is one instruction; encoding/binary's
// loads, bounds-checked each, doubled that comparison's instructions
// (docs/performance.md, "Opaque refs"). The unsafe reads live here, in a
// package with this one job, so that the packages above storage use none.
package unaligned

import "unsafe"

// Load64 is the little-endian uint64 at b[off:off+8]; the caller has
// checked that off+8 <= len(b).
func Load64(b []byte, off int) uint64 {
	return *(*uint64)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(b)), off))
}

// Load32 is the little-endian uint32 at b[off:off+4]; off+4 <= len(b).
func Load32(b []byte, off int) uint32 {
	return *(*uint32)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(b)), off))
}

// Load16 is the little-endian uint16 at b[off:off+2]; off+2 <= len(b).
func Load16(b []byte, off int) uint16 {
	return *(*uint16)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(b)), off))
}
