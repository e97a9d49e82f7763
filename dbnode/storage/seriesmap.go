package storage

import (
	"github.com/cespare/xxhash/v2"

	"github.com/tessera-tsdb/tessera/internal/slots"
)

// seriesMap indexes one shard's in-memory series by a 32-bit hash of their
// ID: a slots.Table whose 8-byte entries are the hash and the series'
// registry slot (+1; 0 is an empty slot), so a lookup compares candidate
// hashes and reads only the matching series (two loads in the registry)
// and its ID bytes.
//
// It replaced a Go map[uint64]*Series for memory: with a million series
// over 4096 shards (about 244 a shard) a Go map holds 512 slots of 17
// bytes (key, value, control byte) per shard, 38 bytes a series, where
// this table holds 384 slots of 8 (slots.Grow), about 13. Integer hashes rather than
// string keys matter on the write path, as they did for the map: a Go map
// keyed by string compares candidate keys' bytes, one cache miss per
// candidate. IDs that share a hash take neighbouring slots like any
// collision.
//
// A series is in the registry exactly while it is in a map: insert gives
// it its slot, remove and clear free it, so its SeriesRef resolves while
// a lookup by ID would find it. Guarded by the shard's mu.
type seriesMap struct {
	t slots.Table[uint32]
}

func newSeriesMap() seriesMap { return seriesMap{} }

// hashID is the seriesMap key of an ID: 32 bits (a shard's table never
// has 2^32 slots, and past the slot bits the rest only spares comparing
// IDs).
func hashID(id []byte) uint32 { return uint32(xxhash.Sum64(id)) }

func (m *seriesMap) get(h uint32, id []byte) *Series {
	var found *Series
	m.t.Find(h, func(v uint32) bool {
		s := registry.get(v - 1)
		if s != nil && s.id == string(id) {
			found = s
			return true
		}
		return false
	})
	return found
}

// insert adds s, whose ID (hashing to h) must not be in the map yet, and
// gives it its registry slot.
func (m *seriesMap) insert(h uint32, s *Series) {
	s.slot = registry.add(s)
	m.t.Insert(h, s.slot+1)
}

// remove drops s (its ID hashing to h) if it is the map's series for its
// ID, freeing its registry slot; it reports whether it was.
func (m *seriesMap) remove(h uint32, s *Series) bool {
	i, ok := m.t.Find(h, func(v uint32) bool {
		return v == s.slot+1 && registry.get(s.slot) == s
	})
	if !ok {
		return false
	}
	m.t.Delete(i)
	registry.release(s)
	return true
}

func (m *seriesMap) len() int { return m.t.Len() }

// each calls fn for every series; fn must not change the map.
func (m *seriesMap) each(fn func(*Series)) {
	for _, v := range m.t.All() {
		fn(registry.get(v - 1))
	}
}

// clear empties the map, calling fn for every series it held and freeing
// their registry slots, and frees its table.
func (m *seriesMap) clear(fn func(*Series)) {
	m.each(func(s *Series) {
		fn(s)
		registry.release(s)
	})
	m.t.Reset()
}
