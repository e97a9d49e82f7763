package storage

import "github.com/cespare/xxhash/v2"

// seriesMap indexes one shard's in-memory series by a 64-bit hash of their
// ID. Integer keys matter on the write path: a Go map keyed by string
// compares candidate keys' bytes, and with a few series per shard (the
// small-map case) it walks each candidate, one cache miss per key. Here a
// lookup compares one ID. IDs that share a hash, which is rare, are chained
// through series.next. Guarded by the shard's mu.
type seriesMap struct {
	m map[uint64]*Series
	n int
}

func newSeriesMap() seriesMap { return seriesMap{m: map[uint64]*Series{}} }

// hashID is the seriesMap key of an ID.
func hashID(id []byte) uint64 { return xxhash.Sum64(id) }

func (m *seriesMap) get(h uint64, id []byte) *Series {
	for s := m.m[h]; s != nil; s = s.next {
		if s.id == string(id) {
			return s
		}
	}
	return nil
}

// insert adds s, whose ID must not be in the map yet.
func (m *seriesMap) insert(s *Series) {
	s.next = m.m[s.hash]
	m.m[s.hash] = s
	m.n++
}

// remove drops s if it is the map's series for its ID; it reports whether
// it was.
func (m *seriesMap) remove(s *Series) bool {
	head := m.m[s.hash]
	var prev *Series
	for c := head; c != nil; prev, c = c, c.next {
		if c != s {
			continue
		}
		switch {
		case prev != nil:
			prev.next = c.next
		case c.next != nil:
			m.m[s.hash] = c.next
		default:
			delete(m.m, s.hash)
		}
		c.next = nil
		m.n--
		return true
	}
	return false
}

func (m *seriesMap) len() int { return m.n }

// each calls fn for every series; fn must not change the map.
func (m *seriesMap) each(fn func(*Series)) {
	for _, s := range m.m {
		for ; s != nil; s = s.next {
			fn(s)
		}
	}
}

// clear empties the map, calling fn for every series it held.
func (m *seriesMap) clear(fn func(*Series)) {
	m.each(fn)
	m.m = map[uint64]*Series{}
	m.n = 0
}
