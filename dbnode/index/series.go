package index

import (
	"errors"
	"hash/maphash"
	"math"
	"sync"
	"sync/atomic"

	"github.com/RoaringBitmap/roaring/v2"
)

// ErrFull is returned by Insert when the namespace already holds 2^31-1 live
// series, the most a value table's entry can name (a ref+1 below its
// multi bit; see values).
var ErrFull = errors.New("index full: 2^31-1 live series")

// numStripes spreads the ID -> ref table over independently locked shards so
// that concurrent writers of different series rarely touch the same lock or
// cache line.
const numStripes = 256

// seriesTable assigns every distinct series ID a dense uint32 ref, so that
// postings are small roaring bitmaps rather than lists of IDs, and stores each
// ID's bytes exactly once, in ids.
//
// The ID -> ref direction is a hash table per stripe whose slots hold only
// a 32-bit hash tag and the ref (no pointers for the GC to scan, 8 bytes a
// slot). One 64-bit hash of the ID picks the stripe (low bits) and the tag
// (high bits); growing a stripe re-places slots by their tags without
// touching any ID.
//
// Synchronisation: a stripe lock guards its slots and every write of an
// ids entry whose ID hashes to that stripe (alloc and release hold it), so
// a probe under the stripe lock reads ids safely. Everyone else reads an
// entry only for a ref found in a block bitmap, which happens after the
// entry was written (the block lock orders them). A ref is freed only when
// it is in no live block, and a query sees only blocks live when it started
// (Index.cutMu), so no query reads an entry while it is freed or reused.
type seriesTable struct {
	seed    maphash.Seed
	stripes [numStripes]stripe
	ids     idPages

	mu   sync.Mutex // guards next and free
	next uint32     // first never-used ref
	free []uint32   // released refs, reused before fresh ones

	live atomic.Int64
}

func newSeriesTable() *seriesTable {
	return &seriesTable{seed: maphash.MakeSeed()}
}

// hash returns the one hash of id used for stripe and slot.
func (t *seriesTable) hash(id []byte) uint64 { return maphash.Bytes(t.seed, id) }

func (t *seriesTable) stripeOf(h uint64) *stripe { return &t.stripes[h%numStripes] }

// find returns id's ref. The caller holds st's lock (read or write).
func (t *seriesTable) find(st *stripe, h uint64, id []byte) (uint32, bool) {
	i, ok := st.t.Find(uint32(h>>32), func(v uint32) bool { return t.ids.get(v-1) == string(id) })
	if !ok {
		return 0, false
	}
	return st.t.At(i) - 1, true
}

// create gives id a ref and stores it: owned if not empty (id as an
// immutable string the caller gives away), else a copy. The caller holds
// st's write lock and has checked that id is absent.
func (t *seriesTable) create(st *stripe, h uint64, id []byte, owned string) (uint32, string, error) {
	t.mu.Lock()
	var ref uint32
	if n := len(t.free); n > 0 {
		ref = t.free[n-1]
		t.free = t.free[:n-1]
	} else {
		if t.next == math.MaxInt32 { // ref+1 must fit below valueMulti
			t.mu.Unlock()
			return 0, "", ErrFull
		}
		ref = t.next
		t.next++
		t.ids.grow(t.next)
	}
	t.mu.Unlock()

	s := owned
	if s == "" {
		s = string(id)
	}
	t.ids.set(ref, s)
	st.insert(uint32(h>>32), ref)
	t.live.Add(1)
	return ref, s, nil
}

// id returns the stored ID of a live ref (see the type's comment for who may
// call it).
func (t *seriesTable) id(ref uint32) string { return t.ids.get(ref) }

// release forgets ref if inUse(ref), asked under the lock of the ref's stripe
// (which every insert of that series holds while adding it to a block), says
// it is in no block. It reports whether the ref was freed.
func (t *seriesTable) release(ref uint32, inUse func(uint32) bool) bool {
	id := t.ids.get(ref)
	if id == "" {
		return false
	}
	h := t.hash(bytesOf(id))
	st := t.stripeOf(h)
	st.mu.Lock()
	defer st.mu.Unlock()
	if cur, ok := t.find(st, h, bytesOf(id)); !ok || cur != ref || inUse(ref) {
		return false
	}
	st.remove(uint32(h>>32), ref)
	t.ids.set(ref, "")
	t.mu.Lock()
	t.free = append(t.free, ref)
	t.mu.Unlock()
	t.live.Add(-1)
	return true
}

// each calls fn with the stored ID of every ref in set, in ref order. The
// refs must come from blocks live for the caller (it holds cutMu.RLock).
func (t *seriesTable) each(set *roaring.Bitmap, fn func(ref uint32, id string)) {
	it := set.Iterator()
	for it.HasNext() {
		ref := it.Next()
		fn(ref, t.ids.get(ref))
	}
}
