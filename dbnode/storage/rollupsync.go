package storage

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/tessera-tsdb/tessera/dbnode/fileset"
	"github.com/tessera-tsdb/tessera/dbnode/rollup"
)

// Replicas of a rollup namespace (docs/rollups.md "Replicas"): each
// replica computes its rollup blocks from its own raw blocks, so equal raw
// blocks give equal bytes. What a replica cannot compute (rollup blocks
// older than its raw retention, when it joined or lost a volume) it gets
// from a peer as stored: peer bootstrap streams rollup blocks as it
// streams raw ones, and repair compares them by the stored entries'
// checksums and pulls a differing series' entry. Where both sides hold an
// entry for a series and they differ, mergeRollupEntries keeps, per
// window End, the window with more samples (a replica that missed writes
// has fewer), ties broken by the encoded bytes: the rule is symmetric, so
// two replicas that pull each other's entries end up with the same bytes.

// rollupChecksums lists the stored entries of rollup block bs of sh with
// their checksums (the fileset index's xxhash64 of each entry), for repair.
// Only blocks wholly inside [start, end) are compared: a rollup block is
// rewritten by every flush of a source block inside it, at a different
// moment on each replica, so an incomplete one differs for a while on its
// own.
func rollupChecksums(ns *namespace, sh *shard, bs, start, end int64) ([]SeriesChecksum, error) {
	if bs < start || bs+ns.blockSize > end {
		return nil, nil
	}
	r := sh.reader(bs)
	if r == nil {
		return nil, nil
	}
	var out []SeriesChecksum
	err := r.RangeIndex(func(id []byte, checksum uint64, _, samples int) error {
		out = append(out, SeriesChecksum{ID: append([]byte(nil), id...), Checksum: checksum, Samples: samples})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("rollup block %d of shard %d: %w", bs, sh.id, err)
	}
	return out, nil
}

// rollupBlockDigests is BlockDigests for a rollup namespace: one digest
// per complete flushed block inside [start, end).
func rollupBlockDigests(ns *namespace, sh *shard, start, end int64) ([]BlockDigest, error) {
	var out []BlockDigest
	for _, bs := range sh.blockStarts() {
		sums, err := rollupChecksums(ns, sh, bs, start, end)
		if err != nil {
			return nil, err
		}
		if len(sums) > 0 {
			out = append(out, digestOf(bs, sums))
		}
	}
	return out, nil
}

// mergeRollupSealed merges a local rollup volume with streamed entries
// (LoadBlocks into a rollup namespace): entries only on one side are kept
// as they are, equal ones once, differing ones merged window by window
// (mergeRollupEntries).
func mergeRollupSealed(prev *fileset.Reader, in []fileset.Series) ([]fileset.Series, error) {
	out, err := mergeByID(in,
		func(fn func(id, data []byte, samples int) error) error {
			return prev.RangeData(func(id, data []byte) error { return fn(id, data, 0) })
		},
		func(id, data []byte, _ int) fileset.Series {
			return fileset.Series{ID: append([]byte(nil), id...), Data: append([]byte(nil), data...)}
		},
		func(id, data []byte, _ int, streamed fileset.Series) (fileset.Series, error) {
			if bytes.Equal(data, streamed.Data) {
				return streamed, nil
			}
			return mergeRollupEntries(id, data, streamed.Data)
		})
	if err != nil {
		return nil, err
	}
	for i := range out {
		if out[i].Samples == 0 {
			// Kept from the local volume: count its windows as the
			// flush does.
			_, ws, hs, err := rollup.DecodePayload(out[i].Data)
			if err != nil {
				return nil, fmt.Errorf("series %q: %w", out[i].ID, err)
			}
			out[i].Samples = len(ws) + len(hs)
		}
	}
	return out, nil
}

// mergeRollupEntries merges two replicas' entries of one series and
// rollup block: the union of their windows by End, and where both hold a
// window of the same End the one with the larger Count (equal Counts:
// the larger encoding, bytewise). Both arguments may come in either order:
// the result is the same.
func mergeRollupEntries(id, a, b []byte) (fileset.Series, error) {
	resA, wa, ha, err := rollup.DecodePayload(a)
	if err != nil {
		return fileset.Series{}, fmt.Errorf("series %q: local rollup entry: %w", id, err)
	}
	resB, wb, hb, err := rollup.DecodePayload(b)
	if err != nil {
		return fileset.Series{}, fmt.Errorf("series %q: streamed rollup entry: %w", id, err)
	}
	if resA != resB {
		return fileset.Series{}, fmt.Errorf("series %q: rollup entries of resolutions %d and %d ms", id, resA, resB)
	}
	enc := func(w rollup.Window) []byte { b, _ := rollup.Encode(nil, resA, []rollup.Window{w}); return b }
	encH := func(w rollup.HWindow) []byte {
		b, _ := rollup.EncodeHistograms(nil, resA, []rollup.HWindow{w})
		return b
	}
	ws := unionWindows(wa, wb, func(w rollup.Window) (int64, uint64) { return w.End, w.Count }, enc)
	hs := unionWindows(ha, hb, func(w rollup.HWindow) (int64, uint64) { return w.End, w.Count }, encH)
	data, err := rollup.AppendPayload(nil, resA, ws, hs)
	if err != nil {
		return fileset.Series{}, fmt.Errorf("series %q: merged rollup entry: %w", id, err)
	}
	return fileset.Series{ID: append([]byte(nil), id...), Data: data, Samples: len(ws) + len(hs)}, nil
}

// unionWindows merges two End-ordered window lists (each End at most once
// per list) by mergeRollupEntries' rule.
func unionWindows[W any](a, b []W, key func(W) (int64, uint64), enc func(W) []byte) []W {
	out := make([]W, 0, max(len(a), len(b)))
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		var ea, eb int64 = math.MaxInt64, math.MaxInt64
		if i < len(a) {
			ea, _ = key(a[i])
		}
		if j < len(b) {
			eb, _ = key(b[j])
		}
		switch {
		case ea < eb:
			out = append(out, a[i])
			i++
		case eb < ea:
			out = append(out, b[j])
			j++
		default:
			_, ca := key(a[i])
			_, cb := key(b[j])
			pick := a[i]
			if cb > ca || (cb == ca && bytes.Compare(enc(b[j]), enc(a[i])) > 0) {
				pick = b[j]
			}
			out = append(out, pick)
			i++
			j++
		}
	}
	return out
}

// MergeRollupReplicas merges two replicas' windows of one series (a read
// through the cluster, which asks more than one owner of a shard): the
// union by End, and where both hold a window of an End the one with more
// samples (mergeRollupEntries' rule, so the answer does not depend on
// which replica answered first). Each list holds an End at most once (a
// read merges block-edge halves).
func MergeRollupReplicas(a, b RollupSeries) RollupSeries {
	res := a.Resolution
	enc := func(w rollup.Window) []byte { e, _ := rollup.Encode(nil, res, []rollup.Window{w}); return e }
	encH := func(w rollup.HWindow) []byte {
		e, _ := rollup.EncodeHistograms(nil, res, []rollup.HWindow{w})
		return e
	}
	a.Windows = unionWindows(a.Windows, b.Windows, func(w rollup.Window) (int64, uint64) { return w.End, w.Count }, enc)
	a.HWindows = unionWindows(a.HWindows, b.HWindows, func(w rollup.HWindow) (int64, uint64) { return w.End, w.Count }, encH)
	if len(a.HWindows) == 0 {
		a.HWindows = nil
	}
	return a
}

// rollupDamaged records that block bs of ns failed its checks at start,
// or a page of it its checksum on read (ns a rollup namespace; raw ones
// are flushed again from the commit log). The backfill cursor is already
// past its source blocks, so without this the windows only it held would
// stay missing (until repair pulled them, for damage found at start).
func (db *Database) rollupDamaged(ns *namespace, bs int64) {
	if ns.opts.RollupOf == "" {
		return
	}
	p := db.progress(ns)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.damaged == nil {
		p.damaged = map[int64]bool{}
	}
	p.damaged[bs] = true
}

// rederiveDamaged derives again, from the source blocks still held, every
// rollup block found damaged at start (tickMu held): each source block
// inside it is rolled up anew over what is served now (the older volume
// or nothing), as if it had just flushed, and the levels below follow.
// Windows whose source blocks have expired cannot be derived; repair
// pulls them from a replica. A block that fails stays recorded and is
// tried again at the next tick.
func (db *Database) rederiveDamaged() error {
	var errs []error
	for _, dst := range db.nsList {
		if dst.opts.RollupOf == "" {
			continue
		}
		p := db.progress(dst)
		p.mu.Lock()
		starts := make([]int64, 0, len(p.damaged))
		for bs := range p.damaged {
			starts = append(starts, bs)
		}
		p.mu.Unlock()
		sort.Slice(starts, func(i, j int) bool { return starts[i] < starts[j] })
		src := db.namespaces[dst.opts.RollupOf]
		for _, rbs := range starts {
			blocks := map[int64][]uint32{}
			for _, sh := range src.allShards() {
				for _, bs := range sh.blockStarts() {
					if bs >= rbs && bs < rbs+dst.blockSize && sh.reader(bs) != nil {
						blocks[bs] = append(blocks[bs], sh.id)
					}
				}
			}
			if err := db.rollUpBlocks(src, blocks, rolledEnd(src, blocks), dst); err != nil {
				errs = append(errs, fmt.Errorf("derive damaged rollup block %d of %s again: %w", rbs, dst.opts.Name, err))
				continue
			}
			p.mu.Lock()
			delete(p.damaged, rbs)
			if len(blocks) > 0 {
				p.rederived++
			}
			p.mu.Unlock()
			if len(blocks) > 0 {
				db.opts.Logger.Warn("rollup block derived again from its source after damage",
					"namespace", dst.opts.Name, "block", time.UnixMilli(rbs).UTC(), "source_blocks", len(blocks))
			}
		}
	}
	return errors.Join(errs...)
}

// readIntactRollups reads prev's entries one series at a time into old
// (calling get for each), leaving out the series whose page fails its
// checksum: a damaged page costs its own series' windows, and only those
// whose source blocks are gone (the others are recomputed).
func readIntactRollups(prev *fileset.Reader, old map[string]seriesRollup, get func([]byte) *seriesRollup) error {
	var ids [][]byte
	if err := prev.RangeIndex(func(id []byte, _ uint64, _, _ int) error {
		ids = append(ids, append([]byte(nil), id...))
		return nil
	}); err != nil {
		return err
	}
	for _, id := range ids {
		data, ok, err := prev.Read(id)
		if errors.Is(err, fileset.ErrCorrupt) || !ok {
			continue
		}
		if err != nil {
			return err
		}
		_, ws, hs, err := rollup.DecodePayload(data)
		if err != nil {
			continue // as damaged as a failed checksum
		}
		old[string(id)] = seriesRollup{ws: ws, hs: hs}
		get(id)
	}
	return nil
}
