package httpapi

import (
	"bytes"
	"slices"
	"sync"

	"github.com/tessera-tsdb/tessera/dbnode/remote"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
	"github.com/tessera-tsdb/tessera/internal/slots"
)

// seriesCache remembers the series remote write requests carried, keyed by
// the raw bytes of their labels on the wire: a series written again (each
// Prometheus send carries every series anew) skips label validation, ID
// encoding, the shard hash and, writing to this node's storage, the series
// lookup there. Decoding a known series costs a hash of its label bytes,
// one table probe and one comparison of those bytes with the cached ones.
//
// An entry keeps the exact label bytes it was decoded from, and is only
// used when a request's bytes are equal: decoding is a function of those
// bytes, so equal bytes are the same series, whatever order or form the
// labels were sent in, and a hash collision costs a miss, never a wrong
// series. It keeps no copy of those bytes when they are the form of the
// series' ID (formed): what Prometheus' marshaller writes for the ID's
// labels in the ID's order, sorted, which is what nearly every sender
// writes (labelsAreID). Exactly one byte string is an ID's form, so
// comparing a request's bytes with the form of the entry's ID compares
// them with the bytes the entry was decoded from, and with the ID shared
// with storage such an entry holds no bytes of its own: at a million
// series about 117 live bytes a series less. A hit then checks the form
// word by word, a few 8-byte loads per label, where a copy took one
// memequal (docs/performance.md, "Series cache hit").
//
// The entries are the cells of one slots.Table (linear probing,
// backward-shift deletion, at most 13/16 full): a series written to this
// node's storage whose key is its ID or the ID's form, nearly all of them,
// is a 16-byte cell that holds the series' storage ref (storage.SeriesRef,
// an integer: storage resolves it and tells a stale one) and its shard;
// any other is a cell that holds the index of a cachedSeries in entries.
// Two Go maps of entry pointers and a 32-byte entry each cost ~67 bytes a
// series at a million; the table 20-30 (docs/performance.md, "Memory per
// active series"). A request keeps copies of the slots it hit across its
// write (slot: the ref or the entry, and the ID, taken under the read
// lock), never positions in the table: the table may be rebuilt
// meanwhile, a ref go stale (the ID bytes it resolved to stay) and an
// index be reused; entries are immutable, replaced rather than changed.
//
// A request decodes under one read lock (view), taken once, not per
// series: a lock per series would be two atomic operations each, and on
// x86 each is a fence that stops the CPU from overlapping the cache misses
// of neighbouring series. New series, promotions and changed storage refs
// are applied after the write, under the write lock, in one go per
// request (update).
//
// It is bounded in two generations of maxSeries entries each: when the
// current one is full it becomes the old one and the previous old one is
// dropped (in one sweep that rebuilds the table); an old entry that is hit
// moves back to the current one. Series that stopped being written age
// out after two generations. A generation holds the whole size, not half
// of it: remote write sends every active series once per scrape,
// round-robin, and with generations of half the size a node with as many
// active series as the size saw each series come back after both
// generations had turned over (89% of lookups missed at 1 M series, each
// miss rebuilding its entry: most of ingest's garbage and half its CPU).
// So the cache hits for up to maxSeries active series and holds up to
// twice that while series churn.
type seriesCache struct {
	perGen int
	mu     sync.RWMutex
	t      slots.Table[cell]
	// entries holds the out-of-line entries by index (cell kindEntry);
	// free lists the unused indexes.
	entries []*cachedSeries
	free    []uint32
	// cur and old count the entries of the current generation and of the
	// one before.
	cur, old int
	// gen is the generation of cur. It wraps: it only tells entries of cur
	// from those of old, the generation before; older ones are dropped.
	gen uint8
}

// Entry kinds. A cell of kindForm or kindID holds the ref of the storage
// series whose ID is the entry's ID, and the key is that ID's form
// (kindForm) or the ID (kindID).
const (
	kindEmpty uint8 = iota // never in the table: the zero cell is an empty slot
	kindEntry              // an index into entries
	kindForm               // a storage ref; the key is its ID's form
	kindID                 // a storage ref; the key is its ID
)

// cell is a table value: 12 bytes of 4-byte alignment, so that with its
// hash (slots.Entry) it is 16. lo and hi are the storage ref's halves
// (kindForm, kindID) or lo the index into entries (kindEntry).
type cell struct {
	lo, hi uint32
	shard  uint16 // numShards is at most 1<<16
	gen    uint8  // the generation it is in
	kind   uint8
}

func (c cell) ref() storage.SeriesRef { return storage.SeriesRef(uint64(c.hi)<<32 | uint64(c.lo)) }

// slot is what a request holds of a hit (a copy, taken under the read
// lock) or of a series to remember: the storage ref (0: none, or not
// written locally), the entry of kindEntry, and the ID.
type slot struct {
	ref   storage.SeriesRef
	e     *cachedSeries
	id    []byte // the series' ID: storage's bytes or the entry's
	shard uint16
	gen   uint8
	kind  uint8
}

// found reports whether the slot is a hit (lookupOne's zero slot is not).
func (s *slot) found() bool { return s.kind >= kindEntry }

// load returns the series' storage ref (0 if this node has not written
// it) and ID.
func (s *slot) load() (storage.SeriesRef, []byte) { return s.ref, s.id }

// keyOf returns the bytes an entry's key is compared by and whether they
// are an ID whose form the key is: two entries have the same key when both
// are equal.
func (s *slot) keyOf() ([]byte, bool) {
	switch s.kind {
	case kindForm:
		return s.id, true
	case kindID:
		return s.id, false
	}
	return s.e.key(), s.e.formed
}

// refreshed is what remember does with ref, the storage ref a write of
// the hit s handed back: when ref is another one (the storage series was
// dropped and made anew, or the entry had none), it returns the update
// (ok) that replaces the entry under the write lock.
func (s *slot) refreshed(h uint64, ref storage.SeriesRef) (u newSeries, ok bool) {
	if ref == 0 || ref == s.ref {
		return newSeries{}, false
	}
	v := *s
	v.ref = ref
	if s.kind == kindEntry {
		e := *s.e
		e.ref = ref
		v.e = &e
	}
	return newSeries{h: h, v: v}, true
}

// cachedSeries is a remembered series that is not a cell of its own: its
// label bytes (the key), its ID and the storage ref the last local write
// returned (storage.Sample.Ref), 0 when this node has not written the
// series. Nearly every series written here is a cell of its own
// (kindForm); this is for the rest: series written to other nodes, label
// bytes other than the ID's form. buf holds the key and, after it, the ID,
// unless the key is the ID (idIsKey: remote write 2.0, OTLP) or its form
// (formed: buf is then the ID alone, and a hit compares the request's
// bytes with that ID's form). When the ID is storage's own (a local
// series), buf is storage's immutable bytes, not a copy. Immutable once
// in the table: a new ref replaces the entry.
type cachedSeries struct {
	ref    storage.SeriesRef
	buf    []byte // the key, then the ID unless idIsKey
	keyLen uint32
	// idIsKey: the key is the ID
	idIsKey bool
	// formed: buf[:keyLen] is the ID (idIsKey is set too), and the label
	// bytes the entry was decoded from are its form, not kept
	formed bool
}

// key returns the bytes a hit is checked against: the label bytes the
// entry was decoded from, or, formed, the ID they are the form of.
func (e *cachedSeries) key() []byte { return e.buf[:e.keyLen:e.keyLen] }

// matches reports whether raw are the label bytes the entry was decoded
// from.
func (e *cachedSeries) matches(raw []byte) bool {
	if e.formed {
		return labelsAreID(raw, e.key())
	}
	return string(raw) == string(e.key())
}

// id returns the series' ID.
func (e *cachedSeries) id() []byte {
	if e.idIsKey {
		return e.key()
	}
	return e.buf[e.keyLen:]
}

// The table is at most maxLoad sixteenths full: from 54% (after a 1.5
// step) to 81%, ~3 slots for a hit at the top, ~15 for a miss, in one to
// four cache lines; 16 bytes a slot, 20-30 bytes a series.
const maxLoad = 13

func newSeriesCache(maxSeries int) *seriesCache {
	perGen := max(maxSeries, 1)
	c := &seriesCache{perGen: perGen}
	c.t.SetMaxLoad(maxLoad)
	return c
}

// view runs fn with lookups allowed: lookup may be called, from fn's
// goroutine only, until fn returns.
func (c *seriesCache) view(fn func()) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	fn()
}

// slotOf is the request's copy of cell v, its ID taken
// from storage (kindForm, kindID; ok false when the ref is stale: the
// cell is a miss) or the entry.
func (c *seriesCache) slotOf(v cell) (slot, bool) {
	s := slot{shard: v.shard, gen: v.gen, kind: v.kind}
	if v.kind == kindEntry {
		s.e = c.entries[v.lo]
		s.ref, s.id = s.e.ref, s.e.id()
		return s, true
	}
	s.ref = v.ref()
	s.id = storage.SeriesID(s.ref)
	return s, s.id != nil
}

// matches reports whether raw are the label bytes the entry of s was
// decoded from.
func (s *slot) matches(raw []byte) bool {
	switch s.kind {
	case kindForm:
		return labelsAreID(raw, s.id)
	case kindID:
		return string(raw) == string(s.id)
	}
	return s.e.matches(raw)
}

// find returns the live entry of key (hash h), the zero slot if there is
// none: past entries with the same 32 hash bits but another key (at a
// million series about a hundred pairs) and stale refs.
func (c *seriesCache) find(key []byte, h uint64) slot {
	h32 := uint32(h)
	var hit slot
	c.t.Find(h32, func(v cell) bool {
		s, ok := c.slotOf(v)
		if ok && s.matches(key) {
			hit = s
			return true
		}
		return false
	})
	return hit
}

// hits is what a request keeps of the series lookup found, by series
// index, from the lookup to the write and remember, in two parallel
// slices: c, the cells as probed, whose lo and hi hold the storage ref for
// every kind once lookup is done (an entry's index is not kept: the entry
// may be replaced before remember), and id, the series' IDs (storage's
// bytes or the entry's). Apart, the probe loop and remember read and
// write 12 bytes a series with no pointer, not 40 with the ID's: a
// 5,000-series request's cells are 60 KB (docs/performance.md, "cpu29").
type hits struct {
	c  []cell
	id [][]byte
}

// reset sizes h for n series; the cells are lookup's to set.
func (h *hits) reset(n int) {
	h.c = slices.Grow(h.c[:0], n)[:n]
	h.id = slices.Grow(h.id[:0], n)[:n]
}

// clear drops the IDs until the next request (the cells hold none).
func (h *hits) clear() { clear(h.id) }

// ref is series i's storage ref, 0 if this node has not written it.
func (h *hits) ref(i int) storage.SeriesRef { return h.c[i].ref() }

// refreshed is what remember does with ref, the storage ref a write of
// hit i handed back: when it is another one (the storage series was
// dropped and made anew, or the entry had none), it returns the update
// (ok) that replaces the entry under the write lock, built anew from the
// request's label bytes key, as for a new series (newSlot: rare, and it
// checks the new ref's ID).
func (h *hits) refreshed(i int, hash uint64, key []byte, ref storage.SeriesRef) (u newSeries, ok bool) {
	if ref == 0 || ref == h.ref(i) {
		return newSeries{}, false
	}
	return newSeries{h: hash, v: newSlot(hash, key, h.id[i], uint32(h.c[i].shard), ref)}, true
}

// lookup finds the series of every key it knows: it sets hs's cell and ID
// and known[i] (for the decoder) for those, and appends to promote the
// ones found in the old generation (the caller passes them to update, to
// keep them). hs is sized for keys (reset). Only inside view.
//
// The probes run in a loop of their own: the iterations do not depend on
// each other, so the CPU overlaps their cache misses, and each stores
// only the hit's 12-byte cell (no pointer, so no write barrier). The refs
// are resolved to their IDs in the second loop, beside the comparison
// with the label bytes: resolving them in the first loop and storing the
// whole 40-byte hit there cost CPU time (docs/performance.md, "Opaque
// refs": 40 quiet rounds, 0.98x the CPU time of that way). A probe stops
// at the first entry with the same 32 hash bits; when its key is not the
// request's, find goes on past it.
func (c *seriesCache) lookup(keys []remote.LabelKey, known []bool, hs *hits, promote []newSeries) []newSeries {
	cells, ids := hs.c[:len(keys)], hs.id[:len(keys)]
	c.probe(keys, cells)
	for i := range cells {
		// The common hit inline: a cell of its own whose ref is live,
		// whose ID's form the request's bytes are, in the current
		// generation. The rest out of line (lookupRest), so that this
		// loop keeps its few values in registers.
		v := &cells[i]
		if v.kind == kindForm && v.gen == c.gen {
			if id := storage.SeriesID(v.ref()); id != nil && labelsAreID(keys[i].Raw, id) {
				ids[i], known[i] = id, true
				continue
			}
		}
		if v.kind != kindEmpty {
			promote = c.lookupRest(&keys[i], &known[i], v, &ids[i], promote)
		} else if ids[i] != nil {
			ids[i] = nil // a former request's: not kept alive
		}
	}
	return promote
}

// lookupRest is lookup of one key whose probe found cell v, but not the
// common hit: it sets v, id and known as lookup does and returns promote,
// with the key appended when it is found in the old generation.
func (c *seriesCache) lookupRest(key *remote.LabelKey, known *bool, v *cell, id *[]byte, promote []newSeries) []newSeries {
	var e *cachedSeries
	var ok bool
	switch v.kind {
	case kindForm:
		*id = storage.SeriesID(v.ref())
		ok = *id != nil && labelsAreID(key.Raw, *id)
	case kindID:
		*id = storage.SeriesID(v.ref())
		ok = *id != nil && string(key.Raw) == string(*id)
	default:
		e = c.entries[v.lo]
		*id, v.lo, v.hi = e.id(), uint32(e.ref), uint32(e.ref>>32)
		ok = e.matches(key.Raw)
	}
	if !ok {
		s := c.find(key.Raw, key.Hash)
		if !s.found() {
			*v, *id = cell{}, nil
			return promote
		}
		e, *id = s.e, s.id
		*v = cell{lo: uint32(s.ref), hi: uint32(s.ref >> 32), shard: s.shard, gen: s.gen, kind: s.kind}
	}
	*known = true
	if v.gen != c.gen {
		promote = append(promote, newSeries{h: key.Hash, v: slot{ref: v.ref(), e: e, id: *id, shard: v.shard, gen: v.gen, kind: v.kind}})
	}
	return promote
}

// lookupV2 is lookup for a remote write 2.0 request decoded with
// DeferIDs: d.Keys hold hashes of the series' labels but no bytes, and a
// cell is compared with series i by d.MatchesID, label by label against
// the cell's ID, so that no ID is built for a series the cache knows. A
// hit sets the series' ID (d.Series[i].ID and d.Keys[i].Raw) to the
// cached one. Entries of 2.0 are keyed by their ID (kindID, or an entry
// whose key is its ID); a probe that finds another entry under the same
// 32 hash bits goes on past it, as find does. OTLP's entries in the same
// cache are hashed by KeyHash of the ID, 2.0's by the labels' hash: a
// series sent both ways is two entries, each found only its own way.
func (c *seriesCache) lookupV2(d *remote.WriteDecoderV2, known []bool, hs *hits, promote []newSeries) []newSeries {
	keys := d.Keys
	cells, ids := hs.c[:len(keys)], hs.id[:len(keys)]
	c.probe(keys, cells)
	for i := range cells {
		v := &cells[i]
		var e *cachedSeries
		var id []byte
		ok := false
		switch v.kind {
		case kindEmpty:
			ids[i] = nil // a former request's: not kept alive
			continue
		case kindID:
			id = storage.SeriesID(v.ref())
			ok = id != nil && d.MatchesID(i, id)
		case kindEntry:
			// A series written to other nodes (no storage ref here).
			e = c.entries[v.lo]
			id, v.lo, v.hi = e.id(), uint32(e.ref), uint32(e.ref>>32)
			ok = e.idIsKey && !e.formed && d.MatchesID(i, id)
		}
		if !ok {
			s := c.findV2(d, i)
			if !s.found() {
				*v, ids[i] = cell{}, nil
				continue
			}
			e, id = s.e, s.id
			*v = cell{lo: uint32(s.ref), hi: uint32(s.ref >> 32), shard: s.shard, gen: s.gen, kind: s.kind}
		}
		ids[i], known[i] = id, true
		d.Series[i].ID, keys[i].Raw = id, id
		if v.gen != c.gen {
			promote = append(promote, newSeries{h: keys[i].Hash, v: slot{ref: v.ref(), e: e, id: id, shard: v.shard, gen: v.gen, kind: v.kind}})
		}
	}
	return promote
}

// findV2 is find for series i of d (lookupV2): the live entry keyed by
// an ID that MatchesID, past others of the same 32 hash bits.
func (c *seriesCache) findV2(d *remote.WriteDecoderV2, i int) slot {
	var hit slot
	c.t.Find(uint32(d.Keys[i].Hash), func(v cell) bool {
		s, ok := c.slotOf(v)
		switch {
		case !ok:
			return false
		case s.kind == kindEntry && (!s.e.idIsKey || s.e.formed), s.kind == kindForm:
			return false // keyed by label bytes, not an ID: never 2.0's
		}
		if d.MatchesID(i, s.id) {
			hit = s
			return true
		}
		return false
	})
	return hit
}

// lookupOne is lookup of one key: its slot (found) or the zero slot, and
// whether the entry is in the old generation (the caller passes
// newSeries{h, s} to update, to keep it). Only inside view.
func (c *seriesCache) lookupOne(key []byte, h uint64) (s slot, promote bool) {
	s = c.find(key, h)
	if !s.found() {
		return slot{}, false
	}
	return s, s.gen != c.gen
}

// newSeries is an entry to put into the current generation: v, under
// hash h, replacing the entry of the same key (a promotion, a new storage
// ref) if there is one.
type newSeries struct {
	h uint64
	v slot
}

// newSlot builds the cache entry of a series whose label bytes key decoded
// to id in shard and which was written to ref (0 if not written locally):
// a cell of the storage ref when the series holds id and key is id's form
// or id (nothing is copied: the series' ID is immutable), else an entry
// (see entry).
func newSlot(h uint64, key, id []byte, shard uint32, ref storage.SeriesRef) slot {
	s := slot{shard: uint16(shard), ref: ref}
	sameBytes := len(id) > 0 && string(key) == string(id)
	sid := storage.SeriesID(ref)
	local := sid != nil && bytes.Equal(sid, id)
	switch {
	case !local:
	case sameBytes:
		s.id, s.kind = sid, kindID
		return s
	case len(id) > 0 && labelsAreID(key, id):
		s.id, s.kind = sid, kindForm
		return s
	}
	if !local {
		sid = nil
	}
	s.e = entry(key, id, ref, sid)
	s.id, s.kind = s.e.id(), kindEntry
	return s
}

// entry builds the out-of-line entry of a series whose label bytes key
// decoded to id and which was written to ref (0 if not written locally);
// sid is storage's immutable bytes of id when ref is a local series of
// that ID, else nil. The ID is not copied when sid holds it: with a
// million series a second copy of every ID was a tenth of the node's
// heap. Nor is key when it is the ID's form (remote write 1.0 labels sent
// sorted): the entry is formed. Otherwise key and id are copied, side by
// side in one allocation (the ID too when storage holds it: labels sent
// unsorted are rare, and one slice keeps the entry at 40 bytes); once
// when key is id (remote write 2.0 keys series by ID). Keys and IDs are far below 4 GiB (the label limits bound
// them).
func entry(key, id []byte, ref storage.SeriesRef, sid []byte) *cachedSeries {
	sameBytes := len(id) > 0 && string(key) == string(id)
	e := &cachedSeries{ref: ref}
	keepID := func() []byte {
		if sid != nil {
			return sid
		}
		return append([]byte(nil), id...)
	}
	switch {
	case !sameBytes && len(id) > 0 && labelsAreID(key, id):
		e.buf = keepID()
		e.keyLen, e.idIsKey, e.formed = uint32(len(id)), true, true
	case sameBytes:
		e.buf = keepID()
		e.keyLen, e.idIsKey = uint32(len(id)), true
	default:
		buf := make([]byte, 0, len(key)+len(id))
		e.buf = append(append(buf, key...), id...)
		e.keyLen = uint32(len(key))
	}
	return e
}

// update puts every entry of add into the current generation (new series,
// old-generation hits being kept, new storage refs).
func (c *seriesCache) update(add []newSeries) {
	if len(add) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range add {
		if c.cur >= c.perGen {
			c.turnOver()
		}
		c.put(&add[i])
	}
}

// put stores a.v in the current generation: over the entry of the same
// key or a stale one of the same hash (its storage series is gone: it
// would only lengthen probes until it aged out), else as a new entry.
func (c *seriesCache) put(a *newSeries) {
	v := a.v
	h32 := uint32(a.h)
	i, ok := c.t.Find(h32, func(old cell) bool {
		s, live := c.slotOf(old)
		return !live || sameKey(&s, &v)
	})
	nc := cell{shard: v.shard, gen: c.gen, kind: v.kind}
	if v.kind == kindEntry {
		idx := -1
		if ok {
			if old := c.t.At(i); old.kind == kindEntry {
				idx = int(old.lo) // the replaced entry's index
			}
		}
		nc.lo = c.entryIndex(idx, v.e)
	} else {
		nc.lo, nc.hi = uint32(v.ref), uint32(v.ref>>32)
	}
	if !ok {
		c.t.Insert(h32, nc)
		c.cur++
		return
	}
	old := c.t.At(i)
	if old.kind == kindEntry && v.kind != kindEntry {
		c.freeEntry(old.lo)
	}
	if old.gen != c.gen {
		c.old--
		c.cur++
	}
	c.t.Set(i, nc)
}

// entryIndex stores e at index idx (>= 0: the entry it replaces), else at
// a free or new index, and returns the index.
func (c *seriesCache) entryIndex(idx int, e *cachedSeries) uint32 {
	switch {
	case idx >= 0:
	case len(c.free) > 0:
		idx = int(c.free[len(c.free)-1])
		c.free = c.free[:len(c.free)-1]
	default:
		idx = len(c.entries)
		c.entries = append(c.entries, nil)
	}
	c.entries[idx] = e
	return uint32(idx)
}

func (c *seriesCache) freeEntry(idx uint32) {
	c.entries[idx] = nil
	c.free = append(c.free, idx)
}

// sameKey reports whether two entries were decoded from the same label
// bytes: equal bytes decode to the same ID, so to the same formedness.
func sameKey(a, b *slot) bool {
	ka, fa := a.keyOf()
	kb, fb := b.keyOf()
	return fa == fb && string(ka) == string(kb)
}

// turnOver makes the current generation the old one and drops the old
// one's entries (one sweep of the table, which rebuilds it: once every
// perGen entries put, so a few slots a put).
func (c *seriesCache) turnOver() {
	if c.old > 0 {
		c.t.DeleteFunc(func(_ uint32, v cell) bool {
			if v.gen == c.gen {
				return false
			}
			if v.kind == kindEntry {
				c.freeEntry(v.lo)
			}
			return true
		})
	}
	c.old, c.cur = c.cur, 0
	c.gen++
}

// len counts the entries, for tests.
func (c *seriesCache) len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.t.Len()
}

// probe stores the cell each key's hash finds (or none) in cells: the
// first loop of lookup and lookupV2, which do not depend on one another,
// so the CPU overlaps their cache misses.
func (c *seriesCache) probe(keys []remote.LabelKey, cells []cell) {
	for i := range keys {
		v, ok := c.t.Probe(uint32(keys[i].Hash))
		if !ok {
			v = cell{}
		}
		cells[i] = v
	}
}
