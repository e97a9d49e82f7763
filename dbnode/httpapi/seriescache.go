package httpapi

import (
	"bytes"
	"sync"
	"sync/atomic"

	"github.com/tessera-tsdb/tessera/dbnode/remote"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
)

// seriesCache remembers the series remote write requests carried, keyed by
// the raw bytes of their labels on the wire: a series written again (each
// Prometheus send carries every series anew) skips label validation, ID
// encoding, the shard hash and, writing to this node's storage, the series
// lookup there. Decoding a known series costs a hash of its label bytes,
// one map lookup and a comparison of those bytes with the entry's.
//
// An entry is only used when a request's label bytes are the ones it was
// decoded from: decoding is a function of those bytes, so equal bytes are
// the same series, whatever order or form the labels were sent in, and a
// hash collision costs a miss, never a wrong series. It does not keep a
// copy of them when they are the cache's form of the ID (form): the
// bytes Prometheus' marshaller writes for the ID's labels (remote write
// 1.0, remote.LabelsAreID), or the ID itself (2.0 and OTLP, keyed by ID).
// Exactly one byte string has that form for an ID, so comparing a
// request's bytes with the ID's form is comparing them with the bytes the
// entry was decoded from. Nearly every sender writes labels sorted, so
// with a million series this spares about 110 bytes a series (a copy of
// the label bytes, and the entry's slice), at the price of two short
// comparisons per label instead of one long one on a hit.
//
// A request decodes under one read lock (view), taken once, not per
// series: a lock per series would be two atomic operations each, and on
// x86 each is a fence that stops the CPU from overlapping the cache misses
// of neighbouring series. New series and promotions are applied after the
// write, under the write lock, in one go per request (update).
//
// It is bounded in two generations: when the current one is full it
// becomes the old one and the previous old one is dropped; an old entry
// that is hit moves back to the current one. Series that stopped being
// written age out after two generations.
type seriesCache struct {
	perGen   int
	form     keyForm
	mu       sync.RWMutex
	cur, old map[uint64]*cachedSeries
	gen      uint32 // generation of cur (wrapping: it only decides promotions)
}

// keyForm is how a cache's keys relate to series IDs.
type keyForm uint8

const (
	// keyLabels: keys are remote write 1.0 label fields; an ID's form is
	// what remote.LabelsAreID accepts.
	keyLabels keyForm = iota
	// keyID: keys are series IDs (remote write 2.0, OTLP).
	keyID
)

// isFormOf reports whether key is the form of id.
func (f keyForm) isFormOf(key, id []byte) bool {
	if f == keyID {
		return string(key) == string(id)
	}
	return remote.LabelsAreID(key, id)
}

// cachedSeries is one remembered series: its ID and shard, which are
// immutable, and ref, the storage handle the last local write returned
// (storage.Sample.Ref), nil when this node has not written the series;
// ref is only ever replaced by another series of the same ID, never by
// nil. A node holds one per active series, so it fits 24 bytes: when the
// storage series holds the ID and the key is the ID's form, which is
// every series a Prometheus writes to this node, the entry holds no bytes
// of its own (own is nil); otherwise own holds what the entry needs.
type cachedSeries struct {
	ref   atomic.Pointer[storage.Series]
	own   *entryBytes // nil: the ID is ref's, the key its form
	shard uint32
	gen   uint32 // the generation it is in; guarded by the cache's mu
}

// entryBytes are the bytes an entry keeps when it cannot borrow them.
type entryBytes struct {
	buf    []byte // the key unless formed, then the ID unless ref's
	keyLen uint32 // key = buf[:keyLen] unless formed
	idOff  uint32 // id = buf[idOff:]; idOff == len(buf): the ID is ref's
	formed bool   // the key is the form of the ID: not stored
}

// idOf returns the series' ID, given ref = e.ref.Load() (the caller loads
// it once for both).
func (e *cachedSeries) idOf(ref *storage.Series) []byte {
	o := e.own
	if o == nil || (int(o.idOff) == len(o.buf) && ref != nil) {
		return ref.ID()
	}
	return o.buf[o.idOff:]
}

// keyIs reports whether key is the label bytes e was decoded from.
func (e *cachedSeries) keyIs(f keyForm, key []byte) bool {
	if o := e.own; o != nil && !o.formed {
		return string(key) == string(o.buf[:o.keyLen])
	}
	return f.isFormOf(key, e.idOf(e.ref.Load()))
}

func newSeriesCache(maxSeries int, form keyForm) *seriesCache {
	perGen := max(maxSeries/2, 1)
	return &seriesCache{perGen: perGen, form: form, cur: make(map[uint64]*cachedSeries)}
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
		if !e.keyIs(c.form, keys[i].Raw) {
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
	if e == nil || !e.keyIs(c.form, key) {
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
// tenth of the node's heap. Nor is the key when it is the ID's form (see
// seriesCache). What must be copied is, side by side in one allocation.
// Keys and IDs are far below 4 GiB (the label limits bound them).
func (c *seriesCache) entry(key, id []byte, shard uint32, ref *storage.Series) *cachedSeries {
	e := &cachedSeries{shard: shard}
	e.ref.Store(ref)
	shared := ref != nil && bytes.Equal(ref.ID(), id)
	formed := c.form.isFormOf(key, id)
	switch {
	case shared && formed:
		// nothing of its own: the common case
	case shared:
		e.own = &entryBytes{buf: append([]byte(nil), key...), keyLen: uint32(len(key)), idOff: uint32(len(key))}
	case formed:
		e.own = &entryBytes{buf: append([]byte(nil), id...), formed: true}
	default:
		buf := make([]byte, 0, len(key)+len(id))
		buf = append(append(buf, key...), id...)
		e.own = &entryBytes{buf: buf, keyLen: uint32(len(key)), idOff: uint32(len(key))}
	}
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
