package index

import (
	"errors"
	"hash/maphash"
	"math"
	"sync"
	"sync/atomic"

	"github.com/RoaringBitmap/roaring/v2"
)

// ErrFull is returned by Insert when the namespace holds 2^32 live series,
// the most a uint32 ref can name.
var ErrFull = errors.New("index full: 2^32 live series")

// numStripes spreads the ID -> ref map over independently locked shards so
// that concurrent writers of different series rarely touch the same lock or
// cache line.
const numStripes = 256

// stripe is one lock-protected shard of the ID -> ref map, padded to a cache
// line of its own so neighbouring stripes do not false-share.
type stripe struct {
	mu   sync.RWMutex
	refs map[string]uint32 // key: the stored ID string (also in seriesTable.ids)
	_    [64 - 24 - 8]byte
}

// seriesTable assigns every distinct series ID a dense uint32 ref, so that
// postings are small roaring bitmaps rather than lists of IDs, and stores each
// ID's bytes exactly once: the map key and ids[ref] are the same string.
//
// Locking: a stripe lock guards its map; mu guards ids and free. A ref's entry
// in ids is written before the ref is added to any block, and is only cleared
// (by release) when the ref is in no block and the stripe lock of its ID is
// held, so an insert can never pick up a ref that is being freed.
type seriesTable struct {
	seed    maphash.Seed
	stripes [numStripes]stripe

	mu   sync.RWMutex
	ids  []string // by ref; entries of freed refs are ""
	free []uint32 // freed refs, reused before growing ids

	live atomic.Int64
}

func newSeriesTable() *seriesTable {
	t := &seriesTable{seed: maphash.MakeSeed()}
	for i := range t.stripes {
		t.stripes[i].refs = make(map[string]uint32)
	}
	return t
}

func (t *seriesTable) stripeOf(id []byte) *stripe {
	return &t.stripes[maphash.Bytes(t.seed, id)%numStripes]
}

// alloc gives id a ref. The caller holds the Lock of id's stripe and records
// the ref in the stripe map.
func (t *seriesTable) alloc(id string) (uint32, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var ref uint32
	if n := len(t.free); n > 0 {
		ref = t.free[n-1]
		t.free = t.free[:n-1]
		t.ids[ref] = id
	} else {
		if uint64(len(t.ids)) > math.MaxUint32 {
			return 0, ErrFull
		}
		ref = uint32(len(t.ids))
		t.ids = append(t.ids, id)
	}
	t.live.Add(1)
	return ref, nil
}

// id returns the stored ID of a live ref.
func (t *seriesTable) id(ref uint32) string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.ids[ref]
}

// release forgets ref if inUse(ref), asked under the lock of the ref's stripe
// (which every insert of that series holds while adding it to a block), says
// it is in no block. It reports whether the ref was freed.
func (t *seriesTable) release(ref uint32, inUse func(uint32) bool) bool {
	id := t.id(ref)
	if id == "" {
		return false
	}
	st := t.stripeOf(bytesOf(id))
	st.mu.Lock()
	defer st.mu.Unlock()
	if cur, ok := st.refs[id]; !ok || cur != ref || inUse(ref) {
		return false
	}
	delete(st.refs, id)
	t.mu.Lock()
	t.ids[ref] = ""
	t.free = append(t.free, ref)
	t.mu.Unlock()
	t.live.Add(-1)
	return true
}

// each calls fn with the stored ID of every ref in set, in ref order, under
// one read lock. The refs must be live.
func (t *seriesTable) each(set *roaring.Bitmap, fn func(ref uint32, id string)) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	it := set.Iterator()
	for it.HasNext() {
		ref := it.Next()
		fn(ref, t.ids[ref])
	}
}
