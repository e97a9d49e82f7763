package index

import (
	"sync"

	"github.com/RoaringBitmap/roaring/v2"
)

// block holds the postings of the series that have data in one block of
// time. Refs are global to the index, so results of several blocks combine
// with a plain bitmap union.
//
// Label names and values used as map keys are substrings of stored IDs
// (see labels.go): a block adds no string bytes of its own.
type block struct {
	start int64

	present presence // lock-free copy of all's membership, for the write path

	mu    sync.RWMutex
	all   *roaring.Bitmap                // every series in the block
	names map[string]map[string]postings // name -> value -> refs; empty values are not indexed
	pairs int                            // number of (name, value) entries, for cost estimates
}

func newBlock(start int64) *block {
	return &block{start: start, all: roaring.New(), names: make(map[string]map[string]postings)}
}

// has reports whether ref is already in the block, without locking.
func (b *block) has(ref uint32) bool { return b.present.has(ref) }

// add records series ref with stored ID id in the block; a no-op if present.
func (b *block) add(ref uint32, id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.all.CheckedAdd(ref) {
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
			vals = make(map[string]postings)
			b.names[name] = vals
		}
		if p, ok := vals[value]; ok {
			vals[value] = p.with(ref)
			return
		}
		vals[value] = postings{one: ref}
		b.pairs++
	})
	b.present.add(ref)
}
