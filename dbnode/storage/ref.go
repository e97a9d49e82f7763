package storage

import (
	"sync"
	"sync/atomic"
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

// SeriesID returns the ID of the ref's series and true while that series
// is in memory; nil and false for a stale or zero ref. The bytes are the
// series' own (immutable: see Series.ID), so a caller may keep them
// instead of a copy.
func SeriesID(r SeriesRef) ([]byte, bool) {
	if s := resolveRef(r); s != nil {
		return s.ID(), true
	}
	return nil, false
}

// resolveRef returns the ref's series, nil if the ref is zero or stale
// (its series left memory; a later series in its slot has another Seq).
// A series it returns may be removed concurrently, as one found by ID
// may: writers check Series.removed under the series lock.
func resolveRef(r SeriesRef) *Series {
	if s := registry.get(uint32(r >> 32)); s != nil && s.seq == uint32(r) && s.seq != 0 {
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

type regPage [regPageSize]atomic.Pointer[Series]

type seriesRegistry struct {
	pages [regPages]atomic.Pointer[regPage]

	mu   sync.Mutex // guards next, free and page allocation
	next uint32     // first never-used slot
	free []uint32   // freed slots, reused first
}

// registry is the process's one registry: refs, like Seqs, are unique in
// the process, whatever Database made the series.
var registry seriesRegistry

func (g *seriesRegistry) get(slot uint32) *Series {
	if p := g.pages[(slot>>regPageBits)%regPages].Load(); p != nil {
		return p[slot%regPageSize].Load()
	}
	return nil
}

// add gives s a slot and returns it.
func (g *seriesRegistry) add(s *Series) uint32 {
	g.mu.Lock()
	var slot uint32
	if n := len(g.free); n > 0 {
		slot = g.free[n-1]
		g.free = g.free[:n-1]
	} else {
		slot = g.next
		if slot>>regPageBits >= regPages {
			g.mu.Unlock()
			panic("storage: more than 2^28 series in memory")
		}
		g.next++
		if pg := &g.pages[slot>>regPageBits]; pg.Load() == nil {
			pg.Store(new(regPage))
		}
	}
	g.mu.Unlock()
	g.pages[slot>>regPageBits].Load()[slot%regPageSize].Store(s)
	return slot
}

// release frees s's slot: its ref resolves to nothing from here on.
func (g *seriesRegistry) release(s *Series) {
	g.pages[s.slot>>regPageBits].Load()[s.slot%regPageSize].Store(nil)
	g.mu.Lock()
	g.free = append(g.free, s.slot)
	g.mu.Unlock()
}
