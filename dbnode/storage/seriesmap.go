package storage

import (
	"github.com/cespare/xxhash/v2"

	"github.com/tessera-tsdb/tessera/internal/slots"
)

// seriesMap indexes one shard's in-memory series by a 32-bit hash of their
// ID: an open-addressing table of series pointers with linear probing,
// probed by the hash each series keeps (Series.hash), so a lookup compares
// candidate hashes and only the matching series' ID bytes.
//
// It replaced a Go map[uint64]*Series for memory: with a million series
// over 4096 shards (about 244 a shard) a Go map holds 512 slots of 17
// bytes (key, value, control byte) per shard, 38 bytes a series, where
// this table holds 384 slots of 8 (slots.Grow), about 13. Integer hashes rather than
// string keys matter on the write path, as they did for the map: a Go map
// keyed by string compares candidate keys' bytes, one cache miss per
// candidate. IDs that share a hash take neighbouring slots like any
// collision. Guarded by the shard's mu.
//
// tags holds one byte of each occupied slot's hash (never 0; 0 marks a
// free slot), so a probe reads the small tag array and follows a slot's
// pointer only on a tag match: a lookup of an absent ID, every new
// series' first step, used to follow ~2-4 pointers to other series (a
// cache miss each, 15% of a replay's CPU at a million series, issue 30)
// and now follows one in 128 on average. One byte a slot, ~1.7 a series.
type seriesMap struct {
	slots []*Series // sized by slots.Grow; nil slots are free
	tags  []uint8   // len(slots); tagOf(hash) of the slot's series, 0 if free
	n     int
}

// tagOf is the tag byte of a hash: its low bits (Home uses the high
// ones), never 0.
func tagOf(h uint32) uint8 { return uint8(h) | 1 }

// minMapSlots is the size of a shard's first table.
const minMapSlots = 8

func newSeriesMap() seriesMap { return seriesMap{} }

// hashID is the seriesMap key of an ID: 32 bits (a shard's table never
// has 2^32 slots, and past the slot bits the rest only spares comparing
// IDs), so that Series keeps it in 4 bytes.
func hashID(id []byte) uint32 { return uint32(xxhash.Sum64(id)) }

func (m *seriesMap) get(h uint32, id []byte) *Series {
	if len(m.slots) == 0 {
		return nil
	}
	n := len(m.slots)
	tag := tagOf(h)
	for i := slots.Home(h, n); ; i = slots.Next(i, n) {
		switch m.tags[i] {
		case 0:
			return nil
		case tag:
			if s := m.slots[i]; s.hash == h && s.id == string(id) {
				return s
			}
		}
	}
}

// insert adds s, whose ID must not be in the map yet.
func (m *seriesMap) insert(s *Series) {
	if (m.n+1)*4 > len(m.slots)*3 { // keep the load at most 3/4
		m.grow()
	}
	m.place(s)
	m.n++
}

func (m *seriesMap) place(s *Series) {
	n := len(m.slots)
	i := slots.Home(s.hash, n)
	for m.tags[i] != 0 {
		i = slots.Next(i, n)
	}
	m.slots[i] = s
	m.tags[i] = tagOf(s.hash)
}

func (m *seriesMap) grow() {
	old := m.slots
	m.slots = make([]*Series, slots.Grow(len(old), minMapSlots))
	m.tags = make([]uint8, len(m.slots))
	for _, s := range old {
		if s != nil {
			m.place(s)
		}
	}
}

// remove drops s if it is the map's series for its ID; it reports whether
// it was. The slots after it in its probe run move back into the hole
// (no tombstones, so lookups never probe past a dead slot).
func (m *seriesMap) remove(s *Series) bool {
	if len(m.slots) == 0 {
		return false
	}
	n := len(m.slots)
	i := slots.Home(s.hash, n)
	for m.slots[i] != s {
		if m.slots[i] == nil {
			return false
		}
		i = slots.Next(i, n)
	}
	// Backward shift: move each later slot of the run into the hole
	// unless its home lies cyclically in (hole, its position].
	for j := slots.Next(i, n); m.slots[j] != nil; j = slots.Next(j, n) {
		if !slots.Between(i, j, slots.Home(m.slots[j].hash, n)) {
			m.slots[i] = m.slots[j]
			m.tags[i] = m.tags[j]
			i = j
		}
	}
	m.slots[i] = nil
	m.tags[i] = 0
	m.n--
	return true
}

func (m *seriesMap) len() int { return m.n }

// each calls fn for every series; fn must not change the map.
func (m *seriesMap) each(fn func(*Series)) {
	for _, s := range m.slots {
		if s != nil {
			fn(s)
		}
	}
}

// clear empties the map, calling fn for every series it held, and frees
// its table.
func (m *seriesMap) clear(fn func(*Series)) {
	m.each(fn)
	*m = seriesMap{}
}
