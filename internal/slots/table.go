package slots

import "iter"

// Entry is one slot of a Table: the 32-bit hash the entry is placed by
// and its value. A slot whose value is V's zero value is empty, so a table
// never holds a zero value (callers store ref+1, a kind byte, a flag).
// The hash lives beside the value, so that growing and deleting re-place
// entries without asking the caller, and a probe compares values only on
// a hash match.
type Entry[V comparable] struct {
	H uint32
	V V
}

// Table is the one open-addressing hash table of the per-series tables
// (the storage shard maps, the tag index's ID -> ref stripes and value
// tables, the HTTP series cache): linear probing from Home, sizes from
// Grow, at most MaxLoad sixteenths full, and backward-shift deletion (no
// tombstones: a lookup never probes past a dead slot, and a table that
// loses entries needs no rebuild to get its probes short again).
//
// It knows nothing of keys: the caller hashes its key to 32 bits and
// compares candidates itself (Find's eq, or Probe and its own test), so
// that a table of 8-byte slots can hold keys stored elsewhere (an ID kept
// once, read back by its ref). Entries are values, not pointers into the
// table: growing and deleting move them.
//
// The zero Table is empty and ready, with the default load (3/4). It is
// not safe for concurrent use; its owner's lock guards it. It is 32 bytes,
// so a table and a lock share a cache line.
type Table[V comparable] struct {
	s []Entry[V]
	n uint32
	// load is the most sixteenths of the slots in use; 0 means 12.
	load uint8
}

// minTableSlots is the size of a table's first slice.
const minTableSlots = 8

// SetMaxLoad sets the most sixteenths (4 to 15) of the slots the table
// fills before it grows: higher is fewer bytes an entry and longer probes.
func (t *Table[V]) SetMaxLoad(sixteenths int) {
	t.load = uint8(min(max(sixteenths, 4), 15))
}

func (t *Table[V]) maxLoad() int {
	if t.load == 0 {
		return 12
	}
	return int(t.load)
}

// Len is the number of entries.
func (t *Table[V]) Len() int { return int(t.n) }

// Slots is the number of slots (for memory accounting).
func (t *Table[V]) Slots() int { return len(t.s) }

// Probe returns the value of the first entry with hash h in h's probe
// run: the candidate a caller with few collisions tests first (Find goes
// on past a candidate that is not the key).
func (t *Table[V]) Probe(h uint32) (V, bool) {
	var zero V
	n := len(t.s)
	if n == 0 {
		return zero, false
	}
	for i := Home(h, n); ; i = Next(i, n) {
		e := &t.s[i]
		if e.V == zero {
			return zero, false
		}
		if e.H == h {
			return e.V, true
		}
	}
}

// Find returns the position of the entry with hash h whose value eq
// accepts (eq is asked only on hash matches), and whether there is one.
// The position is valid until the table changes (Set keeps it valid).
func (t *Table[V]) Find(h uint32, eq func(V) bool) (int, bool) {
	var zero V
	n := len(t.s)
	if n == 0 {
		return -1, false
	}
	for i := Home(h, n); ; i = Next(i, n) {
		e := &t.s[i]
		if e.V == zero {
			return -1, false
		}
		if e.H == h && eq(e.V) {
			return i, true
		}
	}
}

// At is the value at position i (from Find).
func (t *Table[V]) At(i int) V { return t.s[i].V }

// Set replaces the value at position i (from Find), keeping its hash; v
// must not be zero.
func (t *Table[V]) Set(i int, v V) { t.s[i].V = v }

// Reserve grows the table once so that it holds n entries without
// growing again: a loader that knows how many entries are coming (a
// restart snapshot's section) pays one re-placement instead of one per
// growth step.
func (t *Table[V]) Reserve(n int) {
	size := len(t.s)
	for n*16 > size*t.maxLoad() {
		size = Grow(size, minTableSlots)
	}
	if size != len(t.s) {
		t.resize(size)
	}
}

// Insert adds v (not zero) under hash h. The caller has checked that its
// key is absent: the table does not.
func (t *Table[V]) Insert(h uint32, v V) {
	if (int(t.n)+1)*16 > len(t.s)*t.maxLoad() {
		t.resize(Grow(len(t.s), minTableSlots))
	}
	t.place(Entry[V]{H: h, V: v})
	t.n++
}

func (t *Table[V]) place(e Entry[V]) {
	var zero V
	n := len(t.s)
	i := Home(e.H, n)
	for t.s[i].V != zero {
		i = Next(i, n)
	}
	t.s[i] = e
}

// resize re-places every entry into a table of n slots.
func (t *Table[V]) resize(n int) {
	var zero V
	old := t.s
	t.s = make([]Entry[V], n)
	for _, e := range old {
		if e.V != zero {
			t.place(e)
		}
	}
}

// Delete removes the entry at position i (from Find). The later entries
// of its probe run move back into the hole unless their home lies
// cyclically in (hole, their position]: the one deletion scheme.
func (t *Table[V]) Delete(i int) {
	var zero V
	n := len(t.s)
	for j := Next(i, n); t.s[j].V != zero; j = Next(j, n) {
		if !Between(i, j, Home(t.s[j].H, n)) {
			t.s[i] = t.s[j]
			i = j
		}
	}
	t.s[i] = Entry[V]{}
	t.n--
}

// DeleteFunc removes every entry del accepts, in one pass: the kept ones
// go into a new slice sized for them (a sweep that drops many entries at
// once, like a cache's generation, costs one allocation instead of a
// backward shift each). It returns how many it removed.
func (t *Table[V]) DeleteFunc(del func(h uint32, v V) bool) int {
	var zero V
	old := t.s
	kept := 0
	for i := range old {
		if e := &old[i]; e.V != zero {
			if del(e.H, e.V) {
				e.V = zero
			} else {
				kept++
			}
		}
	}
	removed := int(t.n) - kept
	if removed == 0 {
		return 0
	}
	n := 0
	for kept*16 > n*t.maxLoad() {
		n = Grow(n, minTableSlots)
	}
	t.n = uint32(kept)
	if n == 0 {
		t.s = nil
		return removed
	}
	t.s = make([]Entry[V], n)
	for _, e := range old {
		if e.V != zero {
			t.place(e)
		}
	}
	return removed
}

// All yields every entry's hash and value, in slot order. The table must
// not change during the loop.
func (t *Table[V]) All() iter.Seq2[uint32, V] {
	return func(yield func(uint32, V) bool) {
		var zero V
		for _, e := range t.s {
			if e.V != zero && !yield(e.H, e.V) {
				return
			}
		}
	}
}

// Reset empties the table and frees its slots.
func (t *Table[V]) Reset() { *t = Table[V]{load: t.load} }
