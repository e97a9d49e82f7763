package httpapi

import (
	"bytes"
	"sync"
	"sync/atomic"
	"unsafe"

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
// The entries are the slots of one open-addressing table (linear probing,
// at most 13/16 full counting tombstones): a series written to this node's
// storage whose key is its ID or the ID's form, nearly all of them, is a
// 16-byte slot that points at the storage series (which holds the ID) and
// holds the shard; any other is a slot that points at a cachedSeries. Two
// Go maps of entry pointers and a 32-byte entry each cost ~67 bytes a
// series at a million; the table 20-30, 28.6 at a million (docs/performance.md,
// "Memory per active series"). A request keeps copies of
// the slots it hit across its write, never their addresses: the table may
// be rebuilt meanwhile, and what a copy points at (a storage series, an
// entry) is immutable but for the entry's ref, and kept alive by the copy.
//
// A request decodes under one read lock (view), taken once, not per
// series: a lock per series would be two atomic operations each, and on
// x86 each is a fence that stops the CPU from overlapping the cache misses
// of neighbouring series. New series, promotions and changed storage refs
// of slots that hold them are applied after the write, under the write
// lock, in one go per request (update).
//
// It is bounded in two generations of maxSeries entries each: when the
// current one is full it becomes the old one and the previous old one is
// dropped (its slots become tombstones, in one sweep); an old entry that
// is hit moves back to the current one. Series that stopped being written
// age out after two generations. A generation holds the whole size, not
// half of it: remote write sends every active series once per scrape,
// round-robin, and with generations of half the size a node with as many
// active series as the size saw each series come back after both
// generations had turned over (89% of lookups missed at 1 M series, each
// miss rebuilding its entry: most of ingest's garbage and half its CPU).
// So the cache hits for up to maxSeries active series and holds up to
// twice that while series churn.
type seriesCache struct {
	perGen int
	mu     sync.RWMutex
	slots  []slot // any number of them: see home
	// cur and old count the slots of the current generation and of the
	// one before; used counts the slots that are not empty (tombstones
	// too: they lengthen probes until the table is rebuilt).
	cur, old, used int
	// gen is the generation of cur. It wraps: it only tells entries of cur
	// from those of old, the generation before; older ones are tombstones.
	gen uint8
}

// Slot kinds. A slot of kindForm or kindID holds the storage series
// itself: its ID is the entry's ID, and the key is that ID's form
// (kindForm) or the ID (kindID).
const (
	kindEmpty uint8 = iota
	kindTomb        // a dropped entry: probes go on past it
	kindEntry       // p is a *cachedSeries
	kindForm        // p is a *storage.Series; the key is its ID's form
	kindID          // p is a *storage.Series; the key is its ID
)

// slot is one cache entry, 16 bytes. It is also what a request holds of a
// hit (a copy): p is immutable but for the table's own updates, under the
// write lock, which a request's copy does not see.
type slot struct {
	p     unsafe.Pointer // *storage.Series or *cachedSeries, by kind
	h     uint32         // the key hash's low 32 bits: where it probes from
	shard uint16         // numShards is at most 1<<16
	gen   uint8          // the generation it is in
	kind  uint8
}

// found reports whether the slot is a hit (lookupOne's zero slot is not).
func (s *slot) found() bool { return s.kind >= kindEntry }

// matches reports whether raw are the label bytes the entry was decoded
// from (lookup's loop has it written out, the common case without a call
// besides the comparison's).
func (s *slot) matches(raw []byte) bool {
	if s.kind == kindForm {
		return labelsAreID(raw, (*storage.Series)(s.p).ID())
	}
	return s.matchesOther(raw)
}

// matchesOther is matches of the kinds other than kindForm.
func (s *slot) matchesOther(raw []byte) bool {
	if s.kind == kindID {
		return string(raw) == string((*storage.Series)(s.p).ID())
	}
	return (*cachedSeries)(s.p).matches(raw)
}

// load returns the series' storage ref (nil if this node has not written
// it) and ID.
func (s *slot) load() (ref *storage.Series, id []byte) {
	if s.kind == kindEntry {
		return (*cachedSeries)(s.p).load()
	}
	ref = (*storage.Series)(s.p)
	return ref, ref.ID()
}

// keyOf returns the bytes an entry's key is compared by and whether they
// are an ID whose form the key is: two entries have the same key when both
// are equal.
func (s *slot) keyOf() ([]byte, bool) {
	switch s.kind {
	case kindForm:
		return (*storage.Series)(s.p).ID(), true
	case kindID:
		return (*storage.Series)(s.p).ID(), false
	}
	e := (*cachedSeries)(s.p)
	return e.key(), e.formed
}

// refreshed is what remember does with ref, the storage ref a write of
// the hit s handed back: an entry takes it in place; a slot that holds
// the storage series itself is replaced under the write lock, so it
// returns that update (ok) when ref is another series (of the same ID:
// the storage series was dropped and made anew).
func (s *slot) refreshed(h uint64, ref *storage.Series) (u newSeries, ok bool) {
	if ref == nil {
		return newSeries{}, false
	}
	if s.kind == kindEntry {
		if e := (*cachedSeries)(s.p); e.ref.Load() != ref {
			e.ref.Store(ref)
		}
		return newSeries{}, false
	}
	if (*storage.Series)(s.p) == ref {
		return newSeries{}, false
	}
	v := *s
	v.p = unsafe.Pointer(ref)
	return newSeries{h: h, v: v, old: s.p}, true
}

// cachedSeries is a remembered series that is not a slot of its own: its
// label bytes (the key), its ID and ref, the storage handle the last
// local write returned (storage.Sample.Ref), nil when this node has not
// written the series. Nearly every series written here is a slot of its
// own (kindForm); this is for the rest: series written to other nodes,
// label bytes other than the ID's form. buf points to the key and, after
// it, the ID, unless the ID is the storage series' own (ref is then never
// nil: it is only ever replaced by another series of the same ID); when
// the key is the ID (remote write 2.0, OTLP) both are the same bytes. A
// pointer and two lengths instead of a slice (which also keeps a capacity)
// and one-byte fields keep it in the 32-byte size class.
//
// A formed entry's key is the form of the ID (see seriesCache): buf then
// holds the ID alone, a copy; a hit compares the request's bytes with that
// ID's form.
type cachedSeries struct {
	ref    atomic.Pointer[storage.Series]
	buf    *byte  // the key's first byte; the ID's follow unless shared
	keyLen uint32 // key = buf[:keyLen]
	idLen  uint32 // id = buf[keyLen:keyLen+idLen]; 0: ref's; see idIsKey
	// idIsKey: the key is the ID, copied (ref's when idLen is 0)
	idIsKey bool
	// formed: buf[:keyLen] is the ID (idIsKey is set too), and the label
	// bytes the entry was decoded from are its form, not kept
	formed bool
}

// key returns the bytes a hit is checked against: the label bytes the
// entry was decoded from, or, formed, the ID they are the form of.
func (e *cachedSeries) key() []byte { return unsafe.Slice(e.buf, e.keyLen) }

// matches reports whether raw are the label bytes the entry was decoded
// from.
func (e *cachedSeries) matches(raw []byte) bool {
	k := unsafe.Slice(e.buf, e.keyLen)
	if e.formed {
		return labelsAreID(raw, k)
	}
	return string(raw) == string(k)
}

// load returns the entry's storage ref and the series' ID.
func (e *cachedSeries) load() (*storage.Series, []byte) {
	ref := e.ref.Load()
	return ref, e.idOf(ref)
}

// idOf returns the series' ID, given ref = e.ref.Load() (the caller loads
// it once for both).
func (e *cachedSeries) idOf(ref *storage.Series) []byte {
	switch {
	case e.idIsKey:
		return e.key()
	case e.idLen == 0 && ref != nil:
		return ref.ID()
	}
	return unsafe.Slice(e.buf, e.keyLen+e.idLen)[e.keyLen:]
}

// minSlots is the size of an empty cache's table.
const minSlots = 16

// The table is rebuilt when more than maxLoadNum/maxLoadDen of its slots
// are used (tombstones too), to growNum/growDen slots a live entry: a
// table of any size, from 54% to 81% full, where powers of two were
// 37-75% (a slot is 16 bytes: 20-30 bytes a series; at a million 1.79 M
// slots, 28.6 bytes a series, where the power of two was 2 M, 33.5).
// Linear probing at 81% takes ~3 slots for a hit, ~15 for a miss, in
// one to four cache lines.
const (
	maxLoadNum, maxLoadDen = 13, 16
	growNum, growDen       = 24, 13
)

func newSeriesCache(maxSeries int) *seriesCache {
	perGen := max(maxSeries, 1)
	return &seriesCache{perGen: perGen, slots: make([]slot, minSlots)}
}

// view runs fn with lookups allowed: lookup may be called, from fn's
// goroutine only, until fn returns.
func (c *seriesCache) view(fn func()) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	fn()
}

// probe returns the first live slot of hash h's probe sequence with the
// same 32 hash bits (the zero slot if there is none): the candidate, whose
// key the caller compares.
func (c *seriesCache) probe(h uint64) slot {
	h32 := uint32(h)
	for i := slots.Home(h32, len(c.slots)); ; i = slots.Next(i, len(c.slots)) {
		s := &c.slots[i]
		if s.kind == kindEmpty {
			return slot{}
		}
		if s.h == h32 && s.kind >= kindEntry {
			return *s
		}
	}
}

// find is probe and the comparison of the key, past live slots with the
// same 32 hash bits but another key: two keys whose hashes share them (at
// a million series about a hundred pairs) are both found, in the second
// lookup's slow path.
func (c *seriesCache) find(key []byte, h uint64) slot {
	h32 := uint32(h)
	for i := slots.Home(h32, len(c.slots)); ; i = slots.Next(i, len(c.slots)) {
		s := &c.slots[i]
		if s.kind == kindEmpty {
			return slot{}
		}
		if s.h == h32 && s.kind >= kindEntry && s.matches(key) {
			return *s
		}
	}
}

// lookup finds the series of every key it knows: it sets hits[i] and
// known[i] (for the decoder) for those, and appends to promote the
// ones found in the old generation (the caller passes them to update, to
// keep them). Only inside view.
//
// The probes run in a loop of their own: they do not depend on each
// other, so the CPU overlaps their cache misses, and the comparisons with
// the cached label bytes come after. A probe stops at the first live slot
// with the same 32 hash bits; when its key is not the request's, find
// goes on past it.
func (c *seriesCache) lookup(keys []remote.LabelKey, known []bool, hits []slot, promote []newSeries) []newSeries {
	for i := range keys {
		hits[i] = c.probe(keys[i].Hash)
	}
	for i := range hits {
		s := &hits[i]
		var ok bool
		switch s.kind { // matches, with its common case inline
		case kindEmpty:
			continue
		case kindForm:
			ok = labelsAreID(keys[i].Raw, (*storage.Series)(s.p).ID())
		case kindID:
			ok = string(keys[i].Raw) == string((*storage.Series)(s.p).ID())
		default:
			ok = s.matchesOther(keys[i].Raw)
		}
		if !ok {
			if *s = c.find(keys[i].Raw, keys[i].Hash); !s.found() {
				continue
			}
		}
		known[i] = true
		if s.gen != c.gen {
			promote = append(promote, newSeries{h: keys[i].Hash, v: *s, old: s.p})
		}
	}
	return promote
}

// lookupOne is lookup of one key: its slot (found) or the zero slot, and
// whether the entry is in the old generation (the caller passes
// newSeries{h, s, s.p} to update, to keep it). Only inside view.
func (c *seriesCache) lookupOne(key []byte, h uint64) (s slot, promote bool) {
	s = c.probe(h)
	if !s.found() {
		return slot{}, false
	}
	if !s.matches(key) {
		if s = c.find(key, h); !s.found() {
			return slot{}, false
		}
	}
	return s, s.gen != c.gen
}

// newSeries is an entry to put into the current generation: v, under
// hash h, replacing the live entry of the same key or the one that points
// at old (the entry v updates: a promotion, a new storage ref).
type newSeries struct {
	h   uint64
	v   slot
	old unsafe.Pointer
}

// newSlot builds the cache entry of a series whose label bytes key decoded
// to id in shard and which was written to ref (nil if not written
// locally): the storage series itself when it holds id and key is id's
// form or id (nothing is copied: the series' ID is immutable), else an
// entry (see entry).
func newSlot(h uint64, key, id []byte, shard uint32, ref *storage.Series) slot {
	s := slot{h: uint32(h), shard: uint16(shard)}
	sameBytes := len(key) == len(id) && len(id) > 0 && &key[0] == &id[0]
	switch {
	case ref == nil || !bytes.Equal(ref.ID(), id):
	case sameBytes:
		s.p, s.kind = unsafe.Pointer(ref), kindID
		return s
	case len(id) > 0 && labelsAreID(key, id):
		s.p, s.kind = unsafe.Pointer(ref), kindForm
		return s
	}
	s.p, s.kind = unsafe.Pointer(entry(key, id, ref)), kindEntry
	return s
}

// entry builds the out-of-line entry of a series whose label bytes key
// decoded to id and which was written to ref (nil if not written locally).
// The ID is not copied when ref holds it: the series' ID is immutable, and
// with a million series a second copy of every ID was a tenth of the
// node's heap. Nor is key when it is the ID's form (remote write 1.0
// labels sent sorted): the entry is formed. Otherwise key and id are
// copied, side by side in one allocation; once when key is id (remote
// write 2.0 keys series by ID). Keys and IDs are far below 4 GiB (the
// label limits bound them).
func entry(key, id []byte, ref *storage.Series) *cachedSeries {
	sameBytes := len(key) == len(id) && len(id) > 0 && &key[0] == &id[0]
	e := &cachedSeries{}
	e.ref.Store(ref)
	var buf []byte
	switch {
	case !sameBytes && len(id) > 0 && labelsAreID(key, id):
		if ref != nil && bytes.Equal(ref.ID(), id) {
			buf = ref.ID()
		} else {
			buf = append([]byte(nil), id...)
		}
		e.keyLen, e.idIsKey, e.formed = uint32(len(id)), true, true
	case ref != nil && bytes.Equal(ref.ID(), id) && sameBytes:
		buf = ref.ID() // key, and ID at offset 0
		e.keyLen = uint32(len(id))
	case ref != nil && bytes.Equal(ref.ID(), id):
		buf = append([]byte(nil), key...)
		e.keyLen = uint32(len(key)) // ID: ref's
	case sameBytes:
		buf = append([]byte(nil), id...)
		e.keyLen, e.idIsKey = uint32(len(id)), true
	default:
		buf = make([]byte, 0, len(key)+len(id))
		buf = append(append(buf, key...), id...)
		e.keyLen, e.idLen = uint32(len(key)), uint32(len(id))
	}
	e.buf = unsafe.SliceData(buf)
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

// put stores a.v in the current generation: over the live slot that
// points at a.old or a.v.p or has the same key, else in the first
// tombstone or empty slot of its probe sequence.
func (c *seriesCache) put(a *newSeries) {
	v := a.v
	v.h, v.gen = uint32(a.h), c.gen
	free := -1
	for i := slots.Home(v.h, len(c.slots)); ; i = slots.Next(i, len(c.slots)) {
		s := &c.slots[i]
		switch {
		case s.kind == kindEmpty:
			if free < 0 {
				free = int(i)
				c.used++
			}
			c.slots[free] = v
			c.cur++
			if c.used*maxLoadDen > len(c.slots)*maxLoadNum {
				c.rebuild()
			}
			return
		case s.kind == kindTomb:
			if free < 0 {
				free = int(i)
			}
		case s.h == v.h && (s.p == a.old || s.p == v.p || sameKey(s, &v)):
			if s.gen != c.gen {
				c.old--
				c.cur++
			}
			*s = v
			return
		}
	}
}

// sameKey reports whether two entries were decoded from the same label
// bytes: equal bytes decode to the same ID, so to the same formedness.
func sameKey(a, b *slot) bool {
	ka, fa := a.keyOf()
	kb, fb := b.keyOf()
	return fa == fb && string(ka) == string(kb)
}

// turnOver makes the current generation the old one and drops the old
// one's entries (tombstones, in one sweep of the table: once every perGen
// entries put, so a few slots a put).
func (c *seriesCache) turnOver() {
	if c.old > 0 {
		for i := range c.slots {
			if s := &c.slots[i]; s.kind >= kindEntry && s.gen != c.gen {
				*s = slot{kind: kindTomb}
			}
		}
	}
	c.old, c.cur = c.cur, 0
	c.gen++
}

// rebuild moves the live entries into a new table at most half full,
// dropping the tombstones, sized by growNum/growDen: the old table is
// garbage at once (no request holds a slot's address).
func (c *seriesCache) rebuild() {
	live := c.cur + c.old
	n := max(minSlots, (live+1)*growNum/growDen)
	old := c.slots
	c.slots = make([]slot, n)
	for i := range old {
		s := &old[i]
		if s.kind < kindEntry {
			continue
		}
		j := slots.Home(s.h, n)
		for c.slots[j].kind != kindEmpty {
			j = slots.Next(j, n)
		}
		c.slots[j] = *s
	}
	c.used = live
}

// len counts the entries, for tests.
func (c *seriesCache) len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.cur + c.old
}
