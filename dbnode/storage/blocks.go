package storage

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sort"

	"github.com/cespare/xxhash/v2"
	"github.com/tessera-tsdb/tessera/dbnode/encoding"
	"github.com/tessera-tsdb/tessera/dbnode/fileset"
)

// This file is the storage side of peer bootstrap: a source lists and
// pages out its flushed blocks as stored (sealed payloads, never decoded)
// and its unflushed memory; a receiver loads whole sealed blocks as
// filesets of its own.

// BlockMeta describes one flushed block of a shard. Digest is an xxhash64
// over the (ID, checksum) pairs of its series in ID order: replicas whose
// digests agree hold identical blocks, so a receiver fetches it once.
type BlockMeta struct {
	BlockStart int64
	Volume     int
	Series     int
	Samples    int
	Digest     uint64
}

// FlushedBlocks lists the flushed blocks of a shard, by block start.
func (db *Database) FlushedBlocks(nsName string, shard uint32) ([]BlockMeta, error) {
	ns, err := db.namespace(nsName)
	if err != nil {
		return nil, err
	}
	if shard >= db.opts.NumShards {
		return nil, fmt.Errorf("shard %d out of range", shard)
	}
	sh := ns.existingShard(shard)
	if sh == nil {
		return nil, nil
	}
	var out []BlockMeta
	for _, bs := range sh.blockStarts() {
		r := sh.reader(bs)
		if r == nil {
			continue
		}
		h := xxhash.New()
		var sum [8]byte
		err := r.RangeIndex(func(id []byte, checksum uint64, _ int, _ int) error {
			_, _ = h.Write(binary.AppendUvarint(sum[:0], uint64(len(id))))
			_, _ = h.Write(id)
			binary.LittleEndian.PutUint64(sum[:], checksum)
			_, _ = h.Write(sum[:])
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("block %d of shard %d: %w", bs, shard, err)
		}
		out = append(out, BlockMeta{BlockStart: bs, Volume: r.ID().Volume, Series: r.Len(), Samples: r.Samples(), Digest: h.Sum64()})
	}
	return out, nil
}

// ReadBlock pages through a flushed block: the series with ID > after (all
// when after is nil), in ID order, until their payloads add up to maxBytes
// (at least one series). Payloads are the sealed bytes as stored.
func (db *Database) ReadBlock(nsName string, shard uint32, blockStart int64, after []byte, maxBytes int) ([]fileset.Series, bool, error) {
	ns, err := db.namespace(nsName)
	if err != nil {
		return nil, false, err
	}
	sh := ns.existingShard(shard)
	var r *fileset.Reader
	if sh != nil {
		r = sh.reader(blockStart)
	}
	if r == nil {
		return nil, false, fmt.Errorf("shard %d has no flushed block at %d", shard, blockStart)
	}
	var out []fileset.Series
	size, more := 0, false
	errStop := fmt.Errorf("page full")
	err = rangeSeries(r, func(id, data []byte, samples int) error {
		if after != nil && bytes.Compare(id, after) <= 0 {
			return nil
		}
		if len(out) > 0 && size+len(data) > maxBytes {
			more = true
			return errStop
		}
		out = append(out, fileset.Series{ID: append([]byte(nil), id...), Data: append([]byte(nil), data...), Samples: samples})
		size += len(data)
		return nil
	})
	if err != nil && err != errStop {
		return nil, false, fmt.Errorf("read block %d of shard %d: %w", blockStart, shard, err)
	}
	return out, more, nil
}

// SeriesStream is a series' unflushed samples: its floats as one encoding
// stream, its native histograms as histogram streams in time order (nil
// when none).
type SeriesStream struct {
	ID         []byte
	Stream     []byte
	Histograms [][]byte
}

// ReadUnflushed pages through a shard's in-memory samples the same way.
func (db *Database) ReadUnflushed(nsName string, shard uint32, after []byte, maxBytes int) ([]SeriesStream, bool, error) {
	ns, err := db.namespace(nsName)
	if err != nil {
		return nil, false, err
	}
	sh := ns.existingShard(shard)
	if sh == nil {
		return nil, false, nil
	}
	all := sh.snapshotSeries()
	sort.Slice(all, func(i, j int) bool { return all[i].id < all[j].id })
	var out []SeriesStream
	size := 0
	for i, s := range all {
		if after != nil && s.id <= string(after) {
			continue
		}
		its := s.iterators(-1<<62, 1<<62)
		hits := s.histIterators(-1<<62, 1<<62)
		if len(its)+len(hits) == 0 {
			continue
		}
		var stream []byte
		n := 0
		if len(its) > 0 {
			var err error
			if stream, n, err = encoding.Encode(mergeAll(its)); err != nil {
				return nil, false, fmt.Errorf("encode unflushed series of shard %d: %w", shard, err)
			}
		}
		var hist [][]byte
		hn := 0
		if len(hits) > 0 {
			var err error
			if hist, hn, err = encoding.EncodeHistograms(encoding.MergeHistogramIterators(hits...)); err != nil {
				return nil, false, fmt.Errorf("encode unflushed histograms of shard %d: %w", shard, err)
			}
		}
		if n+hn == 0 {
			continue
		}
		if n == 0 {
			stream = nil
		}
		sz := len(stream)
		for _, h := range hist {
			sz += len(h)
		}
		if len(out) > 0 && size+sz > maxBytes {
			return out, i < len(all), nil
		}
		out = append(out, SeriesStream{ID: s.ID(), Stream: stream, Histograms: hist})
		size += sz
	}
	return out, false, nil
}

// LoadBlock installs a sealed block streamed from a peer. With no local
// fileset for the block it is written as is (no decoding); with one, the
// two are merged (local samples win on equal timestamps) into the next
// volume, as a cold flush would. Series must be sorted by ID.
func (db *Database) LoadBlock(nsName string, shard uint32, blockStart int64, series []fileset.Series) error {
	ns, err := db.namespace(nsName)
	if err != nil {
		return err
	}
	if shard >= db.opts.NumShards {
		return fmt.Errorf("shard %d out of range", shard)
	}
	if blockStart != ns.blockStart(blockStart) {
		return fmt.Errorf("block start %d is not aligned to the block size", blockStart)
	}
	if len(series) == 0 {
		return nil
	}
	db.tickMu.Lock() // no flush of this shard meanwhile
	defer db.tickMu.Unlock()
	sh := ns.shard(shard)
	prev := sh.reader(blockStart)
	out := series
	if prev != nil {
		if out, err = mergeSealed(prev, series); err != nil {
			return fmt.Errorf("merge streamed block %d of shard %d: %w", blockStart, shard, err)
		}
	}
	vw, err := db.newVolumeWrite(ns, blockStart)
	if err != nil {
		return err
	}
	if err := vw.add(sh, prev, out); err != nil {
		vw.abort()
		return err
	}
	_, err = vw.install()
	return err
}

// mergeSealed merges a local fileset with streamed series: series only on
// one side are kept as they are; series on both are decoded and merged.
func mergeSealed(prev *fileset.Reader, in []fileset.Series) ([]fileset.Series, error) {
	byID := make(map[string]int, len(in))
	for i := range in {
		byID[string(in[i].ID)] = i
	}
	used := make([]bool, len(in))
	var out []fileset.Series
	err := rangeSeries(prev, func(id, data []byte, samples int) error {
		local := append([]byte(nil), data...)
		i, ok := byID[string(id)]
		if !ok {
			out = append(out, fileset.Series{ID: append([]byte(nil), id...), Data: local, Samples: samples})
			return nil
		}
		used[i] = true
		rfl, rh := encoding.PayloadIterators(in[i].Data)
		lfl, lh := encoding.PayloadIterators(local)
		s, err := sealSeries(id, mergeTwo(rfl, lfl), mergeTwoHist(rh, lh))
		if err != nil {
			return err
		}
		out = append(out, s)
		return nil
	})
	if err != nil {
		return nil, err
	}
	for i := range in {
		if !used[i] {
			out = append(out, in[i])
		}
	}
	sort.Slice(out, func(i, j int) bool { return bytes.Compare(out[i].ID, out[j].ID) < 0 })
	return out, nil
}
