package index

import (
	"github.com/RoaringBitmap/roaring/v2"
	"github.com/tessera-tsdb/tessera/internal/xtime"
)

// DropBlocksBefore forgets every block with blockStart+blockSize <= t, and
// frees the refs (and ID bytes) of series left in no block so that a
// namespace with series churn does not grow without bound. Later inserts
// into the dropped range are ignored. Runs alongside inserts; removing the
// blocks waits for in-flight queries, freeing their series does not.
func (ix *Index) DropBlocksBefore(t int64) {
	ix.dropping.Lock()
	defer ix.dropping.Unlock()

	ix.cutMu.Lock()
	dropped := ix.cutBlocks(t)
	ix.cutMu.Unlock()
	if len(dropped) == 0 {
		return
	}

	gone := unionAll(dropped)
	gone.AndNot(unionAll(ix.blocks.Load().sorted))
	// An insert may add one of these refs to a live block at any moment;
	// release re-checks under the series' stripe lock, which such an insert
	// holds.
	inUse := func(ref uint32) bool {
		for _, b := range ix.blocks.Load().sorted {
			if b.has(ref) {
				return true
			}
		}
		return false
	}
	it := gone.Iterator()
	for it.HasNext() {
		ix.series.release(it.Next(), inUse)
	}
}

// cutBlocks publishes a block set without the blocks ending at or before t
// and returns the blocks it removed.
func (ix *Index) cutBlocks(t int64) []*block {
	ix.blocksMu.Lock()
	defer ix.blocksMu.Unlock()
	cur := ix.blocks.Load()
	next := &blockSet{byStart: make(map[int64]*block, len(cur.byStart)), floor: cur.floor, hasFloor: cur.hasFloor}
	if !next.hasFloor || t > next.floor {
		next.floor, next.hasFloor = t, true
	}
	var dropped []*block
	for _, b := range cur.sorted {
		if xtime.Add(b.start, ix.blockSize) <= t {
			dropped = append(dropped, b)
			continue
		}
		next.byStart[b.start] = b
		next.sorted = append(next.sorted, b)
	}
	ix.blocks.Store(next)
	for _, b := range dropped {
		// Waits for an add already in b (by an insert that loaded the old
		// set) and turns later ones into no-ops, before any ref is freed.
		b.mu.Lock()
		b.dropped = true
		b.mu.Unlock()
	}
	return dropped
}

// unionAll returns a fresh bitmap of every series in blocks.
func unionAll(blocks []*block) *roaring.Bitmap {
	out := roaring.New()
	for _, b := range blocks {
		b.mu.RLock()
		out.Or(b.all)
		b.mu.RUnlock()
	}
	return out
}
