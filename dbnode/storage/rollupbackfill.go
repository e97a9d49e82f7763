package storage

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path/filepath"
	"sort"

	"github.com/tessera-tsdb/tessera/dbnode/vfs"
)

// Backfill (docs/rollups.md): a rollup namespace added over a source that
// already has flushed blocks, or a node that stopped between a source
// flush and its rollup, has source blocks no flush will roll up. Each
// rollup namespace keeps a cursor: every source block starting before it
// has been rolled up. The flush hook advances it when it rolls up the
// block at the cursor; each tick rolls up, oldest first, a few flushed
// source blocks at or past it (rollupBackfillPerTick), then advances it.
// The cursor is persisted under Dir/rollup/<namespace>.json (written
// atomically), so a restart resumes where the last run stopped; without
// the file the cursor starts at the source's oldest flushed block, so a
// new rollup namespace backfills everything its source still holds.

// rollupBackfillPerTick bounds the source blocks one tick backfills per
// rollup namespace, so a backfill of months does not hold the tick (and
// its flushes) for long.
const rollupBackfillPerTick = 4

// cursorUnset: no block rolled up and none to backfill yet; the first
// rollup sets the cursor past its block.
const cursorUnset = math.MinInt64

type cursorFile struct {
	// Cursor is the start of the first source block not known to be
	// rolled up (Unix ms).
	Cursor int64 `json:"cursor"`
}

func (db *Database) cursorPath(ns *namespace) string {
	return filepath.Join(db.opts.Dir, "rollup", ns.opts.Name+".json")
}

// loadCursor reads dst's cursor on first use (tickMu held): the file's,
// else the oldest flushed block of the source (cursorUnset when none).
func (db *Database) loadCursor(dst, src *namespace) (int64, error) {
	p := db.progress(dst)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cursorLoaded {
		return p.cursor, nil
	}
	b, err := vfs.ReadFile(db.opts.FS, db.cursorPath(dst))
	switch {
	case err == nil:
		var c cursorFile
		if err := json.Unmarshal(b, &c); err != nil {
			return 0, fmt.Errorf("rollup cursor %s: %w", db.cursorPath(dst), err)
		}
		p.cursor = c.Cursor
	case errors.Is(err, fs.ErrNotExist):
		p.cursor = cursorUnset
		if starts := flushedStarts(src, cursorUnset); len(starts) > 0 {
			p.cursor = starts[0]
		}
	default:
		return 0, fmt.Errorf("rollup cursor: %w", err)
	}
	p.cursorLoaded = true
	return p.cursor, nil
}

// advanceCursor records that src's block bs is rolled up into dst: the
// cursor moves past it when bs is at (or before) the cursor, and is
// persisted when it moved.
func (db *Database) advanceCursor(dst, src *namespace, bs int64) error {
	if _, err := db.loadCursor(dst, src); err != nil {
		return err
	}
	p := db.progress(dst)
	p.mu.Lock()
	next := bs + src.blockSize
	if p.cursor != cursorUnset && (bs > p.cursor || next <= p.cursor) {
		p.mu.Unlock()
		return nil
	}
	p.mu.Unlock()
	return db.setCursor(dst, next)
}

// setCursor moves dst's cursor forward to next and persists it.
func (db *Database) setCursor(dst *namespace, next int64) error {
	p := db.progress(dst)
	p.mu.Lock()
	if p.cursor != cursorUnset && next <= p.cursor {
		p.mu.Unlock()
		return nil
	}
	p.cursor = next
	p.mu.Unlock()
	b, _ := json.Marshal(cursorFile{Cursor: next})
	if err := db.opts.FS.MkdirAll(filepath.Dir(db.cursorPath(dst)), 0o755); err != nil {
		return fmt.Errorf("rollup cursor dir: %w", err)
	}
	if err := vfs.WriteFileAtomic(db.opts.FS, db.cursorPath(dst), b); err != nil {
		return fmt.Errorf("write rollup cursor: %w", err)
	}
	return nil
}

// flushedStarts lists, in order, the starts of ns's flushed blocks (any
// shard) at or after from.
func flushedStarts(ns *namespace, from int64) []int64 {
	seen := map[int64]bool{}
	for _, sh := range ns.allShards() {
		for _, bs := range sh.blockStarts() {
			if bs >= from {
				seen[bs] = true
			}
		}
	}
	out := make([]int64, 0, len(seen))
	for bs := range seen {
		out = append(out, bs)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// backfillRollups rolls up, per rollup namespace, up to
// rollupBackfillPerTick flushed source blocks at or past its cursor whose
// memory is flushed (tickMu held).
func (db *Database) backfillRollups(now int64) error {
	var errs []error
	if err := db.rederiveDamaged(); err != nil {
		errs = append(errs, err)
	}
	for _, dst := range db.nsList {
		if dst.opts.RollupOf == "" {
			continue
		}
		src := db.namespaces[dst.opts.RollupOf]
		cur, err := db.loadCursor(dst, src)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if cur == cursorUnset {
			continue
		}
		p := db.progress(dst)
		batch := map[int64][]uint32{}
		last := int64(cursorUnset)
		for _, bs := range flushedStarts(src, cur) {
			if len(batch) == rollupBackfillPerTick || !db.sourceComplete(src, bs, now) {
				break // not complete yet: its flush (or its own rollup) rolls it up
			}
			last = bs
			var shards []uint32
			for _, sh := range src.allShards() {
				if sh.reader(bs) != nil {
					shards = append(shards, sh.id)
				}
			}
			batch[bs] = shards
		}
		if last == cursorUnset {
			continue
		}
		if err := db.rollUpBlocks(src, batch, last+src.blockSize, dst); err != nil {
			errs = append(errs, fmt.Errorf("backfill: %w", err))
			continue // retried from the same blocks next tick
		}
		p.mu.Lock()
		p.backfilled += int64(len(batch))
		p.mu.Unlock()
		// Blocks between with no data at all are rolled up too (nothing).
		if err := db.setCursor(dst, last+src.blockSize); err != nil {
			errs = append(errs, err)
		}
		p.mu.Lock()
		if p.cursor != cursorUnset {
			p.backfillTo.Update(float64(p.cursor) / 1000)
		}
		p.mu.Unlock()
	}
	return errors.Join(errs...)
}

// sourceComplete reports whether src's block bs takes no more data: a raw
// block past its bufferPast, a rollup block whose own source blocks are
// all rolled up (its cursor is past the block's end).
func (db *Database) sourceComplete(src *namespace, bs, now int64) bool {
	end := bs + src.blockSize
	if src.opts.RollupOf == "" {
		return end <= now-src.opts.BufferPast.Milliseconds()
	}
	c, err := db.loadCursor(src, db.namespaces[src.opts.RollupOf])
	return err == nil && c != cursorUnset && c >= end
}
