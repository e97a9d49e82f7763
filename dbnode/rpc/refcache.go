package rpc

import (
	"sync/atomic"

	"github.com/cespare/xxhash/v2"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
)

// refCacheSlots is the size of a server's series ref cache: 2 MiB of
// slots, room for the active series of a busy replica. It only bounds how
// much work is saved; a series not in it is resolved through storage.
const refCacheSlots = 1 << 18

// refCache remembers, per (namespace, series ID, shard), the storage ref
// an earlier write resolved, so that a replica finds the series a
// coordinator sends again without a lookup in the shard's map under its
// lock: the replica's counterpart of the HTTP layer's series cache.
//
// It is direct-mapped (a newer series evicts the slot's older one) and
// lock-free: entries are immutable and slots are swapped atomically, so a
// batch's lookups carry no lock (each lock is an atomic operation, a fence
// on x86 that keeps the CPU from overlapping the cache misses of
// neighbouring series), and they run in phases (hashes, slots, entries)
// whose loads do not depend on each other.
//
// An entry is put only for a series that passed validation, so a hit
// needs no validation either: its exact ID bytes, namespace and shard are
// compared. The ref may be stale (the series was flushed out of memory or
// its shard dropped); storage notices and looks the ID up again, as for
// the HTTP layer's refs, and the server then replaces the entry.
type refCache struct {
	slots []atomic.Pointer[refEntry]
	mask  uint64
}

type refEntry struct {
	hash  uint64
	ns    string
	id    string // a copy: the request's bytes are reused
	shard uint32
	ref   storage.SeriesRef
}

// newRefCache returns a cache of n slots; n must be a power of two.
func newRefCache(n int) *refCache {
	return &refCache{slots: make([]atomic.Pointer[refEntry], n), mask: uint64(n - 1)}
}

// lookup sets hits[i] and batch[i].Ref for every sample i that starts a
// run of its series (firsts) and whose series the cache holds. hashes is
// scratch of len(batch).
func (c *refCache) lookup(ns string, batch []storage.Sample, firsts []bool, hashes []uint64, hits []*refEntry) {
	for i := range batch {
		if firsts[i] {
			hashes[i] = xxhash.Sum64(batch[i].ID)
		}
	}
	for i := range batch {
		if firsts[i] {
			hits[i] = c.slots[hashes[i]&c.mask].Load()
		}
	}
	for i := range batch {
		if e := hits[i]; e != nil && (e.hash != hashes[i] || e.shard != batch[i].Shard) {
			hits[i] = nil
		}
	}
	for i := range batch {
		if e := hits[i]; e != nil {
			if e.ns != ns || e.id != string(batch[i].ID) {
				hits[i] = nil
				continue
			}
			batch[i].Ref = e.ref
		}
	}
}

// put remembers ref for (ns, id, shard), which must have been validated.
func (c *refCache) put(ns string, id []byte, shard uint32, ref storage.SeriesRef) {
	h := xxhash.Sum64(id)
	c.slots[h&c.mask].Store(&refEntry{hash: h, ns: ns, id: string(id), shard: shard, ref: ref})
}
