package storage

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/tessera-tsdb/tessera/dbnode/fileset"
)

// DropShard releases a shard the placement no longer gives this node: its
// memory and its filesets in every namespace. Its sections of version 2
// volumes that other shards still use stay on disk until those volumes
// are superseded or expire; a durable record (fileset.Released, written
// first) keeps a restart from serving them again. Its series stay in the
// tag index until their blocks expire; reads are restricted to owned
// shards, so they are never answered from here. The commit log keeps the
// shard's samples until its files are deleted; a restart before that
// replays them and the owner drops the shard again.
func (db *Database) DropShard(shard uint32) error {
	if shard >= db.opts.NumShards {
		return fmt.Errorf("drop shard %d: out of range", shard)
	}
	db.tickMu.Lock()
	defer db.tickMu.Unlock()
	if err := db.recordRelease(shard); err != nil {
		return fmt.Errorf("drop shard %d: %w", shard, err)
	}
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
			s.more, s.inlineUsed, s.inline = nil, false, bucket{}
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

// recordRelease durably records, in every namespace where the shard has
// flushed blocks, that its sections in the volumes written so far are not
// to be served again. The caller holds tickMu.
func (db *Database) recordRelease(shard uint32) error {
	now := db.opts.Now().UnixMilli()
	for _, ns := range db.nsList {
		sh := ns.existingShard(shard)
		if sh == nil {
			continue
		}
		changed := false
		for _, bs := range sh.blockStarts() {
			vol := ns.volumes(bs).next - 1
			k := releaseKey{shard: shard, bs: bs}
			if old, ok := ns.released[k]; !ok || old < vol {
				ns.released[k] = vol
				changed = true
			}
		}
		if !changed {
			continue
		}
		expireBefore := ns.blockStart(now - ns.opts.Retention.Milliseconds())
		list := make([]fileset.Released, 0, len(ns.released))
		for k, v := range ns.released {
			if k.bs < expireBefore {
				delete(ns.released, k)
				continue
			}
			list = append(list, fileset.Released{Shard: k.shard, BlockStart: k.bs, Volume: v})
		}
		slices.SortFunc(list, func(a, b fileset.Released) int {
			return cmp.Or(cmp.Compare(a.BlockStart, b.BlockStart), cmp.Compare(a.Shard, b.Shard))
		})
		if err := fileset.WriteReleased(db.opts.FS, db.dataDir(), ns.opts.Name, list); err != nil {
			return err
		}
	}
	return nil
}
