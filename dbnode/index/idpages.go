package index

import (
	"sync/atomic"
	"unsafe"
)

const idPageBits = 12 // 4096 IDs per page

// idPage holds its IDs as a data pointer and a 32-bit length each, 12
// bytes where a string header takes 16 (4 bytes a series less; an ID
// longer than 4 GiB is refused before it gets here, see maxIDLen).
//
// tags are the inserters' tags (Index.InsertTagged), beside the IDs, 4
// bytes a series (16 an entry in all): written by an insert holding its
// ID's stripe lock, read by queries without one, hence atomic. They
// spare a query over every series a hash and a map probe per series in
// the storage engine (Database.readIDs).
type idPage struct {
	data [1 << idPageBits]*byte
	lens [1 << idPageBits]uint32
	tags [1 << idPageBits]atomic.Uint32
}

// maxIDLen is the longest ID a page entry holds.
const maxIDLen = 1<<32 - 1

// idPages is the ref -> ID array. It grows by whole pages that never move,
// so growing copies only the small page directory (not every ID header, as a
// slice append would) and readers need no lock: the directory is replaced
// atomically and an entry is read only by someone ordered after its write
// (see seriesTable).
type idPages struct {
	dir atomic.Pointer[[]*idPage]
}

func (p *idPages) get(ref uint32) string {
	pg, i := (*p.dir.Load())[ref>>idPageBits], ref%(1<<idPageBits)
	return unsafe.String(pg.data[i], pg.lens[i])
}

// tag returns the tag of ref (0: none).
func (p *idPages) tag(ref uint32) uint32 {
	return (*p.dir.Load())[ref>>idPageBits].tags[ref%(1<<idPageBits)].Load()
}

// setTag records tag for ref, unless it is 0 or already the one recorded
// (a load, not a store, for the common case: the line stays shared).
func (p *idPages) setTag(ref, tag uint32) {
	t := &(*p.dir.Load())[ref>>idPageBits].tags[ref%(1<<idPageBits)]
	if tag != 0 && t.Load() != tag {
		t.Store(tag)
	}
}

// set stores id, at most maxIDLen bytes ("" clears the entry).
func (p *idPages) set(ref uint32, id string) {
	pg, i := (*p.dir.Load())[ref>>idPageBits], ref%(1<<idPageBits)
	pg.data[i], pg.lens[i] = unsafe.StringData(id), uint32(len(id))
	pg.tags[i].Store(0) // a reused ref forgets the tag of the ID it held
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
