package index

import (
	"sync"

	"github.com/RoaringBitmap/roaring/v2"
)

// block holds the postings of the series that have data in one block of
// time. Refs are global to the index, so results of several blocks combine
// with a plain bitmap union.
//
// Label names and values are substrings of stored IDs or read back from
// them (see labels.go, values.go): a block adds no string bytes of its own.
type block struct {
	start int64

	present presence // lock-free copy of all's membership, for the write path

	mu    sync.RWMutex
	all   *roaring.Bitmap    // every series in the block
	names map[string]*values // name -> value -> refs; empty values are not indexed
	pairs int                // number of (name, value) entries, for cost estimates
	// dropped is set (under mu) when retention cuts the block, before any
	// of its refs is freed; add is a no-op afterwards. A value table
	// reads the IDs of the block's other series when it adds one, and a
	// freed ref's ID is cleared without a lock, so nothing may add to a
	// block whose refs are being freed (an insert that loaded the block
	// set just before the cut would).
	dropped bool
	// hints are the distinct values a label name's table is sized for
	// when the block creates it (Index.ReserveValues), taken once.
	hints map[string]int
}

// newValues returns a new value table for name, sized for its hint. The
// caller holds mu for writing.
func (b *block) newValues(name string) *values {
	vs := newValues(name)
	if n := b.hints[name]; n > 0 {
		vs.reserve(n)
		delete(b.hints, name)
	}
	return vs
}

func newBlock(start int64) *block {
	return &block{start: start, all: roaring.New(), names: make(map[string]*values)}
}

// has reports whether ref is already in the block, without locking.
func (b *block) has(ref uint32) bool { return b.present.has(ref) }

// add records series ref with stored ID id in the block; a no-op if present.
// series is the table the ref comes from: value tables read the values of
// single-series entries back from their IDs.
func (b *block) add(ref uint32, id string, series *seriesTable) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.dropped || !b.all.CheckedAdd(ref) {
		return
	}
	rangeLabels(id, func(name, value string) {
		if value == "" {
			// Prometheus: an empty value is the same as no label, and
			// matchers treat absence as "". Indexing it would only cost memory.
			return
		}
		vals := b.names[name]
		if vals == nil {
			vals = b.newValues(name)
			b.names[name] = vals
		}
		if vals.add(value, ref, series) {
			b.pairs++
		}
	})
	b.present.add(ref)
}
