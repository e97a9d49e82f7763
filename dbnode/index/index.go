package index

import (
	"fmt"
	"github.com/tessera-tsdb/tessera/internal/xtime"
	"sort"
	"sync"
	"sync/atomic"
)

// Index is the tag index of one namespace. All methods are safe for
// concurrent use.
type Index struct {
	blockSize int64
	series    *seriesTable

	// blocks is an immutable snapshot, replaced (under blocksMu) when a
	// block is created or dropped, so the write path finds its block with
	// one atomic load and no lock.
	blocks   atomic.Pointer[blockSet]
	blocksMu sync.Mutex
	// hints are the value table sizes a block created later reserves
	// (ReserveValues), by block start; under blocksMu.
	hints map[int64]map[string]int

	// cutMu keeps the removal of blocks from the live set (writer) apart
	// from queries (readers). A query turns refs into IDs after matching;
	// a ref it matched in a block must not be freed and handed to another
	// series in between. Refs are freed only when in no live block, so once
	// the cut is done queries and freeing can overlap: a query that starts
	// later never sees the cut blocks. Inserts do not take it.
	cutMu sync.RWMutex
	// dropping serialises DropBlocksBefore calls: one at a time frees refs.
	dropping sync.Mutex
}

// blockSet is one immutable view of the live blocks.
type blockSet struct {
	byStart map[int64]*block
	sorted  []*block // by start
	// floor is the retention watermark: blocks ending at or before it were
	// dropped and are not re-created by late inserts.
	floor    int64
	hasFloor bool
}

// New returns an empty index for blocks of blockSize milliseconds.
// It panics if blockSize is not positive: that is a configuration bug.
func New(blockSize int64) *Index {
	if blockSize <= 0 {
		panic(fmt.Sprintf("index.New: block size %d ms must be positive", blockSize))
	}
	ix := &Index{blockSize: blockSize, series: newSeriesTable()}
	ix.blocks.Store(&blockSet{byStart: map[int64]*block{}})
	return ix
}

// NumSeries returns the number of distinct series in the index (in any
// block).
func (ix *Index) NumSeries() int { return int(ix.series.live.Load()) }

// blockStartOf rounds t down to the start of its block.
func (ix *Index) blockStartOf(t int64) int64 { return xtime.BlockStart(t, ix.blockSize) }

// Insert records that series id has data in the block starting at
// blockStart (a time inside the block is rounded down to its start).
//
// Idempotent; when the series is already in the block it only looks the ID up
// and tests one bit, without allocating. Inserts into blocks already dropped
// by DropBlocksBefore are ignored. The error is non-nil only if id is not a
// canonical ident encoding (wrapping ident.ErrMalformedID), or ErrFull.
// Insert does not retain id.
func (ix *Index) Insert(id []byte, blockStart int64) error {
	return ix.insert(id, "", blockStart, 0)
}

// InsertString is Insert of an ID the caller holds as a string: a series
// new to the index keeps that string instead of a copy. Strings are
// immutable, so the caller (the storage engine, which keeps every
// in-memory series' ID) and the index then share the bytes, and each
// lives as long as either holds it: one copy of every active series' ID
// less on a node.
func (ix *Index) InsertString(id string, blockStart int64) error {
	return ix.insert(bytesOf(id), id, blockStart, 0)
}

// InsertTagged is InsertString recording tag beside the ID (0: keep the
// one recorded), for QueryTagged to return: the latest non-zero tag of an
// insert of the ID wins. The index gives tags no meaning. The storage
// engine records where its series of the ID is (a registry slot), so
// that reading a query's series skips hashing each ID and probing the
// shard's map; a tag may be stale (the series left memory), which the
// engine checks.
func (ix *Index) InsertTagged(id string, blockStart int64, tag uint32) error {
	return ix.insert(bytesOf(id), id, blockStart, tag)
}

// InsertNewString is InsertString for a series that is most likely new
// to the index: the commit log replay's, which hands over a series when
// it opens its bucket of a block. It looks the ID up once, under the
// stripe's write lock; Insert looks under the read lock first (the
// common case of a live write: the series is there) and again under the
// write lock, two cold probes of the stripe for every new series (5% of
// the CPU of inserting a million new series, BenchmarkRestartIndex). The
// result is the same (TestInsertNewStringMatchesInsert).
func (ix *Index) InsertNewString(id string, blockStart int64) error {
	return ix.InsertNewTagged(id, blockStart, 0)
}

// InsertNewTagged is InsertNewString recording tag, as InsertTagged.
func (ix *Index) InsertNewTagged(id string, blockStart int64, tag uint32) error {
	b := bytesOf(id)
	h := ix.series.hash(b)
	return ix.insertNew(ix.series.stripeOf(h), h, b, id, ix.blockStartOf(blockStart), tag)
}

// insert is Insert; owned, when not empty, is id as a string the index
// may keep; tag, when not 0, is recorded beside it (InsertTagged).
func (ix *Index) insert(id []byte, owned string, blockStart int64, tag uint32) error {
	start := ix.blockStartOf(blockStart)
	h := ix.series.hash(id)
	st := ix.series.stripeOf(h)

	st.mu.RLock()
	ref, ok := ix.series.find(st, h, id)
	if ok {
		// The stripe read lock stays held while adding so that retention
		// cannot free the ref under us (see seriesTable.release).
		if b := ix.block(start); b != nil && !b.has(ref) {
			b.add(ref, ix.series.id(ref), ix.series)
		}
		ix.series.ids.setTag(ref, tag)
		st.mu.RUnlock()
		return nil
	}
	st.mu.RUnlock()
	return ix.insertNew(st, h, id, owned, start, tag)
}

// insertNew is Insert's path for an ID not in the series table.
func (ix *Index) insertNew(st *stripe, h uint64, id []byte, owned string, start int64, tag uint32) error {
	if err := validateID(id); err != nil {
		return fmt.Errorf("index insert %q: %w", id, err)
	}
	b := ix.block(start)
	if b == nil {
		return nil // block already expired
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	ref, ok := ix.series.find(st, h, id)
	var s string
	if ok {
		s = ix.series.id(ref) // another writer won the race
	} else {
		var err error
		if ref, s, err = ix.series.create(st, h, id, owned); err != nil {
			return fmt.Errorf("index insert %q: %w", id, err)
		}
	}
	ix.series.ids.setTag(ref, tag)
	b.add(ref, s, ix.series)
	return nil
}

// block returns the block starting at start, creating it if needed, or nil
// if retention already dropped it.
func (ix *Index) block(start int64) *block {
	set := ix.blocks.Load()
	if n := len(set.sorted); n > 0 && set.sorted[n-1].start == start {
		return set.sorted[n-1] // the head block: nearly every write
	}
	if b := set.byStart[start]; b != nil {
		return b
	}
	ix.blocksMu.Lock()
	defer ix.blocksMu.Unlock()
	cur := ix.blocks.Load()
	if b := cur.byStart[start]; b != nil {
		return b
	}
	if cur.hasFloor && xtime.Add(start, ix.blockSize) <= cur.floor {
		return nil
	}
	b := newBlock(start)
	b.hints = ix.hints[start]
	delete(ix.hints, start)
	next := &blockSet{byStart: make(map[int64]*block, len(cur.byStart)+1), floor: cur.floor, hasFloor: cur.hasFloor}
	for s, ob := range cur.byStart {
		next.byStart[s] = ob
	}
	next.byStart[start] = b
	next.sorted = append(append(make([]*block, 0, len(cur.sorted)+1), cur.sorted...), b)
	sort.Slice(next.sorted, func(i, j int) bool { return next.sorted[i].start < next.sorted[j].start })
	ix.blocks.Store(next)
	return b
}

// overlapping returns the blocks with data in [start, end] (inclusive).
func (ix *Index) overlapping(start, end int64) []*block {
	if start > end {
		return nil
	}
	var out []*block
	for _, b := range ix.blocks.Load().sorted {
		if b.start <= end && xtime.Add(b.start, ix.blockSize-1) >= start {
			out = append(out, b)
		}
	}
	return out
}
