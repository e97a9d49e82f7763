//go:build amd64 || arm64

package httpapi

import "unsafe"

// Little-endian loads from b at off, where the caller has checked that
// off+size <= len(b): on these CPUs an unaligned load is one instruction,
// and without the bounds checks of binary.LittleEndian the comparison of
// a cache hit's label bytes (labelsAreID) keeps its registers.

func load64(b []byte, off int) uint64 {
	return *(*uint64)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(b)), off))
}

func load32(b []byte, off int) uint32 {
	return *(*uint32)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(b)), off))
}

func load16(b []byte, off int) uint16 {
	return *(*uint16)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(b)), off))
}
