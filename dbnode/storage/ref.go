package storage

import (
	"sync"
	"sync/atomic"
	"unsafe"
)

// SeriesRef names one in-memory series of this process for a caller that
// wants its next write of the same series to skip the lookup by ID
// (Sample.Ref): an integer, not a pointer, so that the packages above
// storage hold no storage object and need not know its lifetime. Storage
// resolves it (resolveRef, SeriesID) and checks it: a ref outlives its
// series harmlessly, resolving to nothing once the series has left
// memory. 0 is no ref.
//
// It is the series' registry slot (high 32 bits) and its Seq (low 32):
// the slot finds the series in two loads, the Seq tells it from a later
// series given the same slot. Seqs are unique in the process, so a ref
// never names another series, of this or another Database.
type SeriesRef uint64

// Seq is the Seq of the ref's series (see Series.Seq): a number no other
// series of the process has, for a caller that indexes a slice by it.
// 0 for the zero ref.
func (r SeriesRef) Seq() uint64 { return uint64(uint32(r)) }

// Ref is the series' ref; 0 once the process has made 2^32-1 series (its
// Seq is then 0: no ref, and callers fall back to the ID).
func (s *Series) Ref() SeriesRef {
	if s.seq == 0 {
		return 0
	}
	return SeriesRef(uint64(s.slot)<<32 | uint64(s.seq))
}

// SeriesID returns the ID of the ref's series while that series is in
// memory; nil for a stale or zero ref (an ID is never empty). The bytes
// are the series' own (immutable: see Series.ID), so a caller may keep
// them instead of a copy. It inlines: the HTTP series cache calls it for
// every series of a request.
func SeriesID(r SeriesRef) []byte {
	if s := resolveRef(r); s != nil {
		return s.ID()
	}
	return nil
}

// resolveRef returns the ref's series, nil if the ref is zero (slot 0 is
// never given out) or stale (its series left memory; a later series in its
// slot has another Seq). No ref has Seq 0 (Ref), so a series with Seq 0
// is never resolved.
// A series it returns may be removed concurrently, as one found by ID
// may: writers check Series.removed under the series lock.
func resolveRef(r SeriesRef) *Series {
	if s := registry.get(uint32(r >> 32)); s != nil && s.seq == uint32(r) {
		return s
	}
	return nil
}

// The registry maps slot numbers to the in-memory series of the process:
// a directory of pages allocated as they are first needed, so that a
// lookup is two dependent loads and no lock, and slots of removed series
// are reused before fresh ones. A series holds its slot while it is in its
// shard's map (seriesMap takes and frees it), which stores slots, not
// pointers, and resolves them here too.
const (
	regPageBits = 14
	regPageSize = 1 << regPageBits
	regPages    = 1 << 14 // 2^28 slots: more live series than any node holds
)

// regPage holds *Series, read and written atomically (atomic.LoadPointer
// rather than atomic.Pointer: its generic methods cost get the inline
// budget that lets the write path and SeriesID inline it).
type regPage [regPageSize]unsafe.Pointer

type seriesRegistry struct {
	pages [regPages]unsafe.Pointer // *regPage, atomically

	mu   sync.Mutex // guards next, free and page allocation
	next uint32     // first never-used slot, from 1: slot 0 is the zero ref's
	free []uint32   // freed slots, reused first
}

// registry is the process's one registry: refs, like Seqs, are unique in
// the process, whatever Database made the series.
var registry seriesRegistry

func (g *seriesRegistry) get(slot uint32) *Series {
	if p := (*regPage)(atomic.LoadPointer(&g.pages[(slot>>regPageBits)%regPages])); p != nil {
		return (*Series)(atomic.LoadPointer(&p[slot%regPageSize]))
	}
	return nil
}

func (g *seriesRegistry) page(slot uint32) *regPage {
	return (*regPage)(atomic.LoadPointer(&g.pages[slot>>regPageBits]))
}

// add gives s a slot and returns it.
func (g *seriesRegistry) add(s *Series) uint32 {
	g.mu.Lock()
	var slot uint32
	if n := len(g.free); n > 0 {
		slot = g.free[n-1]
		g.free = g.free[:n-1]
	} else {
		slot = max(g.next, 1)
		if slot>>regPageBits >= regPages {
			g.mu.Unlock()
			panic("storage: more than 2^28 series in memory")
		}
		g.next = slot + 1
		if g.page(slot) == nil {
			atomic.StorePointer(&g.pages[slot>>regPageBits], unsafe.Pointer(new(regPage)))
		}
	}
	g.mu.Unlock()
	atomic.StorePointer(&g.page(slot)[slot%regPageSize], unsafe.Pointer(s))
	return slot
}

// release frees s's slot: its ref resolves to nothing from here on.
func (g *seriesRegistry) release(s *Series) {
	atomic.StorePointer(&g.page(s.slot)[s.slot%regPageSize], nil)
	g.mu.Lock()
	g.free = append(g.free, s.slot)
	g.mu.Unlock()
}
