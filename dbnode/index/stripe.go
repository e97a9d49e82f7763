package index

import (
	"sync"

	"github.com/tessera-tsdb/tessera/internal/slots"
)

// stripe is one lock-protected shard of the ID -> ref table: a
// slots.Table whose 8-byte entries are a tag (the high half of the ID's
// hash: entries move on growth without rehashing IDs, and a probe
// compares ID bytes only on a tag match) and the ref+1.
type stripe struct {
	mu sync.RWMutex
	t  slots.Table[uint32]
	_  [64 - 24 - 32]byte // keep stripes on separate cache lines
}

// insert adds ref under tag; the ID must be absent. Caller holds mu.
func (st *stripe) insert(tag, ref uint32) { st.t.Insert(tag, ref+1) }

// remove deletes ref's entry, which must exist. Caller holds mu.
func (st *stripe) remove(tag, ref uint32) {
	if i, ok := st.t.Find(tag, func(v uint32) bool { return v == ref+1 }); ok {
		st.t.Delete(i)
	}
}
