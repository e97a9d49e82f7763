package storage

import (
	"math"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/tessera-tsdb/tessera/dbnode/encoding"
	"github.com/tessera-tsdb/tessera/dbnode/fileset"
	"github.com/tessera-tsdb/tessera/internal/xtime"
)

// shard owns the series of one virtual shard of one namespace: the
// in-memory series map and the flushed filesets, one (latest) volume per
// block.
type shard struct {
	id uint32

	mu     sync.RWMutex
	series seriesMap
	blocks map[int64]*fileset.Reader // block start -> latest complete volume
	// active is the node's count of in-memory series, every shard of
	// every namespace: changed with the series map, under mu.
	active *atomic.Int64
}

func newShard(id uint32, active *atomic.Int64) *shard {
	return &shard{id: id, series: newSeriesMap(), blocks: map[int64]*fileset.Reader{}, active: active}
}

// getOrCreate returns the series for id (h = hashID(id)) of namespace ns,
// creating it on first write.
func (sh *shard) getOrCreate(ns *namespace, h uint32, id []byte) *Series {
	s, _ := sh.getOrCreateUpTo(ns, h, id, 0)
	return s
}

// getOrCreateLocked is getOrCreate looking the ID up once, under the
// write lock: for the commit log replay, where nearly every lookup is of
// a series not created yet (a miss under the read lock would only be
// repeated under the write lock) and nothing else writes the shard.
func (sh *shard) getOrCreateLocked(ns *namespace, h uint32, id []byte) *Series {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if s := sh.series.get(h, id); s != nil {
		return s
	}
	sh.active.Add(1)
	s := &Series{id: string(id), ns: ns.num, seq: nextSeq(), shard: sh.tag()}
	sh.series.insert(h, s)
	return s
}

// getOrCreateUpTo is getOrCreate refusing (nil, false) to create a series
// when the node already holds max (0: no limit). The slot is reserved
// with one atomic add before the series is inserted, so concurrent
// writers to any shards never take the node past max.
func (sh *shard) getOrCreateUpTo(ns *namespace, h uint32, id []byte, max int64) (*Series, bool) {
	sh.mu.RLock()
	s := sh.series.get(h, id)
	sh.mu.RUnlock()
	if s != nil {
		return s, true
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if s = sh.series.get(h, id); s != nil {
		return s, true
	}
	if n := sh.active.Add(1); max > 0 && n > max {
		sh.active.Add(-1)
		return nil, false
	}
	s = &Series{id: string(id), ns: ns.num, seq: nextSeq(), shard: sh.tag()}
	sh.series.insert(h, s)
	return s, true
}

// tag is Series.shard for the series of this shard.
func (sh *shard) tag() uint16 {
	if sh.id >= math.MaxUint16 {
		return 0
	}
	return uint16(sh.id + 1)
}

// readSource is one source of a series' float samples for a read: its
// iterator, the block it holds samples of and timestamps every one of
// its samples lies within.
type readSource struct {
	it encoding.Iterator
	// stream, when it is nil, is the source as a copied stream (a read
	// with a slab, readScratch).
	stream []byte
	block  int64
	lo, hi int64
}

// read returns the sources of id's float data and the iterators over its
// histogram data in blocks [from, to] (blockSize ms each): filesets first
// (oldest), memory last (newest wins on equal timestamps). The sources
// are appended to its (a query reading many series reuses one slice: a
// fresh one was an allocation per series). hint, when not nil, is the
// series of id in this shard as a caller found it by its registry slot
// (Database.readIDs): if it is still in the shard's map it is the one
// read, without hashing id and probing the map.
func (sh *shard) read(id []byte, hint *Series, from, to, blockSize int64, its []readSource, slab *byteSlab) ([]readSource, []encoding.HistogramIterator, error) {
	sh.mu.RLock()
	var readers []*fileset.Reader
	for start, r := range sh.blocks {
		if start >= from && start <= to {
			readers = append(readers, r)
		}
	}
	var s *Series
	if hint != nil && registry.get(hint.slot) == hint {
		// It holds its slot while it is in a shard's map, and its ID and
		// namespace (which the caller checked) say whose: this shard's
		// series of id, as the map would answer, read under the same
		// lock as the filesets.
		s = hint
	} else {
		s = sh.series.get(hashID(id), id)
	}
	sh.mu.RUnlock()
	if len(readers) > 1 {
		sort.Slice(readers, func(i, j int) bool { return readers[i].ID().BlockStart < readers[j].ID().BlockStart })
	}

	var hits []encoding.HistogramIterator
	for _, r := range readers {
		data, ok, err := r.Read(id)
		if err != nil {
			return nil, nil, err
		}
		if ok {
			fl, h := encoding.PayloadIterators(data)
			if fl != nil {
				bs := r.ID().BlockStart
				its = append(its, readSource{it: fl, block: bs, lo: bs, hi: xtime.Add(bs, blockSize-1)})
			}
			if h != nil {
				hits = append(hits, h)
			}
		}
	}
	if s != nil {
		its, hits = s.readIterators(its, hits, from, to, slab)
	}
	return its, hits, nil
}

// snapshotSeries returns the series currently in memory.
func (sh *shard) snapshotSeries() []*Series { return sh.appendSeries(nil) }

// appendSeries appends the series currently in memory to dst. Tick walks
// every series twice per round into one slice it keeps (Database.tickSeries):
// with a million series a fresh snapshot each time was 16 MB of garbage
// per tick, as much as the whole write path made in that time, and the
// collector runs as often as garbage fills its room.
func (sh *shard) appendSeries(dst []*Series) []*Series {
	sh.mu.RLock()
	defer sh.mu.RUnlock()
	dst = slices.Grow(dst, sh.series.len())
	sh.series.each(func(s *Series) { dst = append(dst, s) })
	return dst
}

// removeIfEmpty drops series with no buckets left, so flushed series free
// their memory. It marks them removed under the series lock, so a writer
// that found the series just before sees the mark and looks it up again.
// It returns how many it removed from the shard's map.
func (sh *shard) removeIfEmpty(ss []*Series) (removed int) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	for _, s := range ss {
		s.mu.Lock()
		if s.emptyLocked() && !s.removed {
			if sh.series.remove(hashID(s.ID()), s) {
				sh.active.Add(-1)
				removed++
			}
			s.removed = true
		}
		s.mu.Unlock()
	}
	return removed
}

func (sh *shard) reader(blockStart int64) *fileset.Reader {
	sh.mu.RLock()
	defer sh.mu.RUnlock()
	return sh.blocks[blockStart]
}

func (sh *shard) blockStarts() []int64 {
	sh.mu.RLock()
	defer sh.mu.RUnlock()
	out := make([]int64, 0, len(sh.blocks))
	for s := range sh.blocks {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
