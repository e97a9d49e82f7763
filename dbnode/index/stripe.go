package index

import (
	"sync"

	"github.com/tessera-tsdb/tessera/internal/slots"
)

// stripe is one lock-protected shard of the ID -> ref table: an open
// addressing hash table with linear probing. A slot is tag<<32 | ref+1, zero
// when empty; the tag is the high half of the ID's hash, so slots move on
// growth without rehashing IDs, and a probe compares ID bytes only on a tag
// match. Deletion shifts later slots back (no tombstones).
type stripe struct {
	mu    sync.RWMutex
	slots []uint64               // len is 0 or a slots.Grow size
	n     int                    // occupied slots
	_     [64 - 24 - 24 - 8]byte // keep stripes on separate cache lines
}

const minSlots = 16

func slot(tag, ref uint32) uint64 { return uint64(tag)<<32 | uint64(ref+1) }

// insert adds a slot for ref; the ID must be absent. Caller holds mu.
func (st *stripe) insert(tag, ref uint32) {
	if (st.n+1)*4 > len(st.slots)*3 { // keep load <= 3/4
		st.grow()
	}
	st.place(slot(tag, ref))
	st.n++
}

func (st *stripe) place(s uint64) {
	n := len(st.slots)
	i := slots.Home(uint32(s>>32), n)
	for st.slots[i] != 0 {
		i = slots.Next(i, n)
	}
	st.slots[i] = s
}

func (st *stripe) grow() {
	old := st.slots
	st.slots = make([]uint64, slots.Grow(len(old), minSlots))
	for _, s := range old {
		if s != 0 {
			st.place(s)
		}
	}
}

// remove deletes ref's slot, which must exist. Caller holds mu.
func (st *stripe) remove(tag, ref uint32) {
	n := len(st.slots)
	want := slot(tag, ref)
	i := slots.Home(tag, n)
	for st.slots[i] != want {
		i = slots.Next(i, n)
	}
	// Backward-shift: move each later slot of the probe run into the hole
	// unless its home lies cyclically in (hole, its position].
	for j := slots.Next(i, n); st.slots[j] != 0; j = slots.Next(j, n) {
		if !slots.Between(i, j, slots.Home(uint32(st.slots[j]>>32), n)) {
			st.slots[i] = st.slots[j]
			i = j
		}
	}
	st.slots[i] = 0
	st.n--
}
