package httpapi

import (
	"bytes"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/tessera-tsdb/tessera/dbnode/remote"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
)

// seriesCache remembers the series remote write requests carried, keyed by
// the raw bytes of their labels on the wire: a series written again (each
// Prometheus send carries every series anew) skips label validation, ID
// encoding, the shard hash and, writing to this node's storage, the series
// lookup there. Decoding a known series costs a hash of its label bytes,
// one map lookup and one comparison of those bytes with the cached ones.
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
// memequal (ARCHITECTURE.md, "Series cache hit").
//
// A request decodes under one read lock (view), taken once, not per
// series: a lock per series would be two atomic operations each, and on
// x86 each is a fence that stops the CPU from overlapping the cache misses
// of neighbouring series. New series and promotions are applied after the
// write, under the write lock, in one go per request (update).
//
// It is bounded in two generations of maxSeries entries each: when the
// current one is full it becomes the old one and the previous old one is
// dropped; an old entry that is hit moves back to the current one. Series
// that stopped being written age out after two generations. A generation
// holds the whole size, not half of it: remote write sends every active
// series once per scrape, round-robin, and with generations of half the
// size a node with as many active series as the size saw each series come
// back after both generations had turned over (89% of lookups missed at
// 1 M series, each miss rebuilding its entry: most of ingest's garbage and
// half its CPU). So the cache hits for up to maxSeries active series and
// holds up to twice that while series churn.
type seriesCache struct {
	perGen   int
	mu       sync.RWMutex
	cur, old map[uint64]*cachedSeries
	// gen is the generation of cur. It wraps: it only tells entries of cur
	// from those of old, the generation before.
	gen uint8
}

// cachedSeries is one remembered series: its label bytes (the key), its
// ID and shard, which are immutable, and ref, the storage handle the last
// local write returned (storage.Sample.Ref), nil when this node has not
// written the series. A node holds one per active series, so it is laid
// out to fit 32 bytes: buf points to the key and, after it, the ID,
// unless the ID is the storage series' own (ref is then never nil: it is
// only ever replaced by another series of the same ID); when the key is
// the ID (remote write 2.0, OTLP) both are the same bytes. A pointer and
// two lengths instead of a slice (which also keeps a capacity) and
// one-byte fields keep it out of the 48-byte size class: 16 bytes a
// series, and a hit reads the key as before.
//
// A formed entry's key is the form of the ID (see seriesCache): buf then
// holds the ID alone, the storage series' own bytes when it was written
// here (their own allocation, immutable, kept alive by buf), else a copy;
// a hit compares the request's bytes with that ID's form, one load from
// the entry to the bytes as for a kept key, not through ref.
type cachedSeries struct {
	ref    atomic.Pointer[storage.Series]
	buf    *byte  // the key's first byte; the ID's follow unless shared
	keyLen uint32 // key = buf[:keyLen]
	idLen  uint32 // id = buf[keyLen:keyLen+idLen]; 0: ref's; see idIsKey
	shard  uint32
	gen    uint8 // the generation it is in; guarded by the cache's mu
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
// from. It is small enough to be inlined into lookup's loop: a hit pays
// no call besides the comparison's.
func (e *cachedSeries) matches(raw []byte) bool {
	k := unsafe.Slice(e.buf, e.keyLen)
	if e.formed {
		return labelsAreID(raw, k)
	}
	return string(raw) == string(k)
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

func newSeriesCache(maxSeries int) *seriesCache {
	perGen := max(maxSeries, 1)
	return &seriesCache{perGen: perGen, cur: make(map[uint64]*cachedSeries)}
}

// view runs fn with lookups allowed: lookup may be called, from fn's
// goroutine only, until fn returns.
func (c *seriesCache) view(fn func()) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	fn()
}

// lookup finds the series of every key it knows: it sets entries[i] and
// known[i] (for the decoder) for those, and appends to promote the
// ones found in the old generation (the caller passes them to update, to
// keep them). Only inside view.
//
// The map lookups run in a loop of their own: they do not depend on each
// other, so the CPU overlaps their cache misses, and the comparisons with
// the cached label bytes come after.
func (c *seriesCache) lookup(keys []remote.LabelKey, known []bool, entries []*cachedSeries, promote []newSeries) []newSeries {
	for i := range keys {
		h := keys[i].Hash
		e := c.cur[h]
		if e == nil {
			e = c.old[h]
		}
		entries[i] = e
	}
	for i, e := range entries {
		if e == nil {
			continue
		}
		if !e.matches(keys[i].Raw) {
			entries[i] = nil
			continue
		}
		known[i] = true
		if e.gen != c.gen {
			promote = append(promote, newSeries{keys[i].Hash, e})
		}
	}
	return promote
}

// lookupOne is lookup of one key: its entry or nil, and whether the entry
// is in the old generation (the caller passes it to update, to keep it).
// Only inside view.
func (c *seriesCache) lookupOne(key []byte, h uint64) (e *cachedSeries, promote bool) {
	e = c.cur[h]
	if e == nil {
		e = c.old[h]
	}
	if e == nil || !e.matches(key) {
		return nil, false
	}
	return e, e.gen != c.gen
}

// newSeries is a series to remember: the hash of its label bytes, and its
// entry.
type newSeries struct {
	h uint64
	e *cachedSeries
}

// entry builds the cache entry of a series whose label bytes key decoded
// to id in shard and which was written to ref (nil if not written
// locally). The ID is not copied when ref holds it: the series' ID is
// immutable, and with a million series a second copy of every ID was a
// tenth of the node's heap. Nor is key when it is the ID's form (remote
// write 1.0 labels sent sorted): the entry is formed. Otherwise key and id
// are copied, side by side in one allocation; once when key is id (remote
// write 2.0 keys series by ID). Keys and IDs are far below 4 GiB (the
// label limits bound them).
func entry(key, id []byte, shard uint32, ref *storage.Series) *cachedSeries {
	sameBytes := len(key) == len(id) && len(id) > 0 && &key[0] == &id[0]
	e := &cachedSeries{shard: shard}
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
// and old-generation hits being kept).
func (c *seriesCache) update(add []newSeries) {
	if len(add) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, a := range add {
		if len(c.cur) >= c.perGen {
			c.old, c.cur = c.cur, make(map[uint64]*cachedSeries, c.perGen)
			c.gen++
		}
		if c.old[a.h] == a.e {
			delete(c.old, a.h)
		}
		a.e.gen = c.gen
		c.cur[a.h] = a.e
	}
}

// len counts the entries, for tests.
func (c *seriesCache) len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.cur) + len(c.old)
}
