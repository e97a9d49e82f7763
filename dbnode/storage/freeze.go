package storage

import (
	"fmt"
	"sort"

	"github.com/tessera-tsdb/tessera/dbnode/fileset"
)

// FrozenBlock is one flushed block of one shard as this node served it
// when Freeze ran, and the files that hold it.
type FrozenBlock struct {
	Namespace  string
	Shard      uint32
	BlockStart int64 // unix ms
	BlockSize  int64 // ms
	// Fileset names the shard's fileset (version 1) or its section of a
	// per-block volume (version 2: Fileset.Shard is the section).
	Fileset fileset.ID
	Version int
	// Files are the paths (under DataRoot) of every file of the fileset
	// or volume; a volume's files are shared by the blocks of its shards.
	Files []string
}

// DataRoot is the directory holding the namespaces' filesets.
func (db *Database) DataRoot() string { return db.dataDir() }

// Freeze calls fn with every flushed block the node serves, while
// holding the tick lock: until fn returns no flush, cold flush, expiry,
// peer-loaded block or dropped shard changes which files serve a block,
// deletes one, or releases memory into a fileset. Writes and reads go on
// (they do not take the tick lock), so a snapshot taken inside fn pauses
// no write.
//
// Every sample acknowledged before Freeze was called is therefore either
// in one of the blocks fn is given or still in memory (ReadUnflushed)
// when fn runs; samples written meanwhile may be in either or neither.
// fn must not call Tick, LoadBlocks, DropShard or Freeze (deadlock).
func (db *Database) Freeze(fn func(blocks []FrozenBlock) error) error {
	db.tickMu.Lock()
	defer db.tickMu.Unlock()
	var out []FrozenBlock
	root := db.dataDir()
	for _, ns := range db.nsList {
		for _, sh := range ns.allShards() {
			sh.mu.RLock()
			for bs, r := range sh.blocks {
				id := r.ID()
				fb := FrozenBlock{Namespace: ns.opts.Name, Shard: sh.id, BlockStart: bs, BlockSize: ns.blockSize,
					Fileset: id, Version: r.Version()}
				if r.Version() == 1 {
					for _, k := range []string{"info", "index", "data", "digest", "checkpoint"} {
						fb.Files = append(fb.Files, fileset.FilePath(root, id, k))
					}
				} else {
					bid := fileset.BlockID{Namespace: id.Namespace, BlockStart: id.BlockStart, Volume: id.Volume}
					for _, k := range []string{"data", "index", "checkpoint"} {
						fb.Files = append(fb.Files, fileset.BlockFilePath(root, bid, k))
					}
				}
				out = append(out, fb)
			}
			sh.mu.RUnlock()
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		if a.Shard != b.Shard {
			return a.Shard < b.Shard
		}
		return a.BlockStart < b.BlockStart
	})
	if err := fn(out); err != nil {
		return fmt.Errorf("freeze: %w", err)
	}
	return nil
}
