package index

import "sync/atomic"

const idPageBits = 12 // 4096 IDs per page

type idPage [1 << idPageBits]string

// idPages is the ref -> ID array. It grows by whole pages that never move,
// so growing copies only the small page directory (not every ID header, as a
// slice append would) and readers need no lock: the directory is replaced
// atomically and an entry is read only by someone ordered after its write
// (see seriesTable).
type idPages struct {
	dir atomic.Pointer[[]*idPage]
}

func (p *idPages) get(ref uint32) string {
	return (*p.dir.Load())[ref>>idPageBits][ref%(1<<idPageBits)]
}

func (p *idPages) set(ref uint32, id string) {
	(*p.dir.Load())[ref>>idPageBits][ref%(1<<idPageBits)] = id
}

// grow makes refs below n addressable. Callers serialise grows.
func (p *idPages) grow(n uint32) {
	need := int((uint64(n) + 1<<idPageBits - 1) >> idPageBits)
	cur := p.dir.Load()
	if cur != nil && len(*cur) >= need {
		return
	}
	var next []*idPage
	if cur != nil {
		next = append(next, *cur...)
	}
	for len(next) < need {
		next = append(next, new(idPage))
	}
	p.dir.Store(&next)
}
