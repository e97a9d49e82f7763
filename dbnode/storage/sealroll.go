package storage

import (
	"fmt"

	"github.com/tessera-tsdb/tessera/dbnode/encoding"
	"github.com/tessera-tsdb/tessera/dbnode/fileset"
	"github.com/tessera-tsdb/tessera/dbnode/rollup"
)

// Rollups from the samples a flush seals (docs/rollups.md, "Computed
// from the seal"). A tick's flush of a namespace with rollups keeps, per
// shard section it installs, the float samples it encoded into it; the
// rollups of that block then take them from memory instead of reading
// the section back (zstd pages and the raw decoder: about 40% of the
// rollup's CPU before). The samples are, bit for bit, what the section
// holds (the raw encoding round-trips every float64, and they are what
// was handed to the encoder), so computeRollupShard Computes the same
// windows, and writes the same bytes, as from the volume: the backfill,
// a re-derive after damage or another replica that reads the volume
// agree with it (TestRollupFromSealEqualsFromVolumes).
//
// A section is kept only when every series in it went through the
// encoder here with floats alone: one carried over undecoded (a cold
// flush, a compaction) or holding histograms leaves it to be read back,
// as before. Kept sections are keyed by the reader install swapped in,
// so a section replaced since (by anything) is never answered from
// memory, and dropped after the rollups of their rollup block are
// written (tickNamespace rolls up one rollup block at a time); at most
// sealBudget samples are kept at once, sections past it are read back.

// sealBudget bounds the samples a tick keeps for its rollups at once
// (16 bytes each: 64 MiB).
const sealBudget = 4 << 20

// sealCapture is one shard section's float samples as a flush encodes
// them, series after series into the tick's slab (Database.sealSlab, one
// allocation reused by every section of the tick).
type sealCapture struct {
	db     *Database
	ok     bool // every series so far captured
	n      int  // samples captured
	series []capturedSeries
}

// capturedSeries is one series' samples: db.sealSlab[from:to].
type capturedSeries struct {
	id       string
	from, to int
}

func (db *Database) newSealCapture() *sealCapture { return &sealCapture{db: db, ok: true} }

// encode is encoding.Encode keeping each sample it encodes.
func (c *sealCapture) encode(id []byte, it encoding.Iterator) ([]byte, int, error) {
	e := encoding.NewEncoder()
	slab := c.db.sealSlab
	from := len(slab)
	for it.Next() {
		t, v := it.At()
		if err := e.Append(t, v); err != nil {
			return nil, 0, fmt.Errorf("encode sample %d at %d: %w", e.Len(), t, err)
		}
		slab = append(slab, rollup.Sample{T: t, V: v})
	}
	if err := it.Err(); err != nil {
		return nil, 0, fmt.Errorf("encode after %d samples: %w", e.Len(), err)
	}
	c.db.sealSlab = slab
	c.series = append(c.series, capturedSeries{id: string(id), from: from, to: len(slab)})
	c.n += len(slab) - from
	return e.Bytes(), e.Len(), nil
}

// samples is the section's series by ID, each clipped to its own
// samples (an append by a user copies, never writes into a neighbour).
// A slab grown since keeps the old array's samples where they were.
func (c *sealCapture) samples() map[string][]rollup.Sample {
	slab := c.db.sealSlab
	out := make(map[string][]rollup.Sample, len(c.series))
	for _, s := range c.series {
		out[s.id] = slab[s.from:s.to:s.to]
	}
	return out
}

// keepSealed records, after vw's install, the sections whose every series
// was captured (capts[i] belongs to vw.installed[i]; nil: not captured).
func (db *Database) keepSealed(vw *volumeWrite, capts []*sealCapture) {
	if db.sealed == nil {
		return
	}
	for i, c := range capts {
		if c == nil || !c.ok || i >= len(vw.installed) {
			continue
		}
		db.sealed[vw.installed[i]] = c.samples()
	}
}

// capturing reports whether the flush in progress should keep what it
// seals of another shard section.
func (db *Database) capturing() bool {
	return db.sealed != nil && len(db.sealSlab) < sealBudget
}

// startSealed begins keeping sealed samples for ns's rollups (nothing
// when ns has none); the returned function stops and forgets them.
func (db *Database) startSealed(ns *namespace) (stop func()) {
	if ns.opts.RollupOf != "" || len(db.rollupsOf(ns.opts.Name)) == 0 || db.sealOff {
		return func() {}
	}
	db.sealed = map[*fileset.Reader]map[string][]rollup.Sample{}
	return func() { db.sealed, db.sealSlab = nil, nil }
}

// dropSealed forgets the sections kept so far (their rollups are
// written, and nothing refers to the slab any more: it is reused).
func (db *Database) dropSealed() {
	if db.sealed != nil {
		clear(db.sealed)
		db.sealSlab = db.sealSlab[:0]
	}
}

// rollupEdge reports whether source blocks a < b fall into different
// blocks of every rollup in dsts: the rollups of the blocks up to a can
// be written before b is flushed, each rollup block once.
func rollupEdge(dsts []*namespace, a, b int64) bool {
	for _, d := range dsts {
		if d.blockStart(a) == d.blockStart(b) {
			return false
		}
	}
	return true
}
