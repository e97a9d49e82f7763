package storage

import (
	"fmt"
)

// DropShard releases a shard the placement no longer gives this node: its
// memory and its filesets in every namespace. Its series stay in the tag
// index until their blocks expire; reads are restricted to owned shards, so
// they are never answered from here. The commit log keeps the shard's
// samples until its files are deleted; a restart before that replays them
// and the owner drops the shard again.
func (db *Database) DropShard(shard uint32) error {
	if shard >= db.opts.NumShards {
		return fmt.Errorf("drop shard %d: out of range", shard)
	}
	db.tickMu.Lock()
	defer db.tickMu.Unlock()
	for _, ns := range db.nsList {
		sh := ns.dropShard(shard)
		if sh == nil {
			continue
		}
		sh.mu.Lock()
		for bs, r := range sh.blocks {
			delete(sh.blocks, bs)
			db.graveyard = append(db.graveyard, removeOnClose{r: r, db: db})
		}
		sh.active.Add(-int64(sh.series.len()))
		sh.series.clear(func(s *Series) {
			s.mu.Lock()
			s.removed = true
			s.buckets = bucketList{}
			s.mu.Unlock()
		})
		sh.mu.Unlock()
	}
	return nil
}

// ShardsWithData lists the shards holding memory or filesets in any
// namespace.
func (db *Database) ShardsWithData() []uint32 {
	seen := map[uint32]bool{}
	for _, ns := range db.nsList {
		for _, sh := range ns.allShards() {
			sh.mu.RLock()
			if sh.series.len() > 0 || len(sh.blocks) > 0 {
				seen[sh.id] = true
			}
			sh.mu.RUnlock()
		}
	}
	out := make([]uint32, 0, len(seen))
	for s := range seen {
		out = append(out, s)
	}
	return out
}
