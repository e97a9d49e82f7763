package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"sync"

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

// SeriesStream is a series' unflushed samples as one encoding stream.
type SeriesStream struct {
	ID     []byte
	Stream []byte
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
	sort.Slice(all, func(i, j int) bool { return bytes.Compare(all[i].id, all[j].id) < 0 })
	var out []SeriesStream
	size := 0
	for i, s := range all {
		if after != nil && bytes.Compare(s.id, after) <= 0 {
			continue
		}
		its := s.iterators(-1<<62, 1<<62)
		if len(its) == 0 {
			continue
		}
		it := its[0]
		if len(its) > 1 {
			it = encoding.MergeIterators(its...)
		}
		stream, n, err := encoding.Encode(it)
		if err != nil {
			return nil, false, fmt.Errorf("encode unflushed series of shard %d: %w", shard, err)
		}
		if n == 0 {
			continue
		}
		if len(out) > 0 && size+len(stream) > maxBytes {
			return out, i < len(all), nil
		}
		out = append(out, SeriesStream{ID: s.id, Stream: stream})
		size += len(stream)
	}
	return out, false, nil
}

// LoadStreams loads series streamed from a peer's memory (the form
// ReadUnflushed gives) into shard, as LoadBatch would load their samples:
// through the commit log (durable on return in sync mode), cold writes
// taken, no active-series limit. Each series is looked up or created once
// instead of once per sample. It returns how many samples it wrote: with a
// *RejectedError (samples out of retention or the buffer window by now)
// the others are written and counted; with any other error, 0. A stream
// that does not decode fails the call before anything is written.
func (db *Database) LoadStreams(nsName string, shard uint32, series []SeriesStream) (int, error) {
	ns, err := db.namespace(nsName)
	if err != nil {
		return 0, err
	}
	if shard >= db.opts.NumShards {
		return 0, fmt.Errorf("load streams: shard %d out of range", shard)
	}
	n := 0
	for _, s := range series {
		n += len(s.Stream) / 2 // a guess: most samples take under 2 bytes
	}
	batch := make([]Sample, 0, n)
	sh := ns.shard(shard)
	for _, s := range series {
		var se *Series
		it := encoding.NewIterator(s.Stream)
		for it.Next() {
			if se == nil {
				se, _ = sh.getOrCreateUpTo(ns, hashID(s.ID), s.ID, 0) // 0: no limit
			}
			t, v := it.At()
			batch = append(batch, Sample{ID: s.ID, Shard: shard, T: t, V: v, Ref: se})
		}
		if err := it.Err(); err != nil {
			return 0, fmt.Errorf("decode streamed series %q of shard %d: %w", s.ID, shard, err)
		}
	}
	err = db.writeBatch(nsName, batch, true)
	var rej *RejectedError
	switch {
	case errors.As(err, &rej):
		return len(batch) - rej.Total, err
	case err != nil:
		return 0, err
	}
	return len(batch), nil
}

// LoadBlock installs a sealed block streamed from a peer. With no local
// fileset for the block it is written as is (no decoding); with one, the
// two are merged (local samples win on equal timestamps) into the next
// volume, as a cold flush would. Series must be sorted by ID.
func (db *Database) LoadBlock(nsName string, shard uint32, blockStart int64, series []fileset.Series) error {
	return db.LoadBlocks(nsName, []StreamedBlock{{Shard: shard, BlockStart: blockStart, Series: series}})
}

// StreamedBlock is one sealed block of a shard as a peer streamed it, for
// LoadBlocks. Series must be sorted by ID.
type StreamedBlock struct {
	Shard      uint32
	BlockStart int64
	Series     []fileset.Series
}

// loadParallelism bounds the fileset writes LoadBlocks runs at once. A
// fileset write waits on about nine fsyncs (five files, the directory
// twice, a new shard directory's parents), and concurrent fsyncs share
// the file system's journal commits: on this project's ext4 test box 16
// writers fsync at ~80 us each where one alone takes ~800 us. A peer
// bootstrap of many small shards is nothing but such waits.
const loadParallelism = 16

// LoadBlocks installs several streamed blocks as LoadBlock does, each
// durable (fsynced, checkpointed) when it returns. Blocks without a local
// fileset, the common case of a shard new to this node, are written
// concurrently (loadParallelism at once); a block with a local fileset,
// or named twice in blocks (one copy per differing replica), is merged
// after them, one at a time, in the order given. Every block is tried;
// the error names each block that failed.
func (db *Database) LoadBlocks(nsName string, blocks []StreamedBlock) error {
	ns, err := db.namespace(nsName)
	if err != nil {
		return err
	}
	for _, b := range blocks {
		if b.Shard >= db.opts.NumShards {
			return fmt.Errorf("load block %d of shard %d: shard out of range", b.BlockStart, b.Shard)
		}
		if b.BlockStart != ns.blockStart(b.BlockStart) {
			return fmt.Errorf("load block %d of shard %d: block start is not aligned to the block size", b.BlockStart, b.Shard)
		}
	}
	db.tickMu.Lock() // no flush meanwhile
	defer db.tickMu.Unlock()
	type key struct {
		shard uint32
		start int64
	}
	var fresh, merge []int
	seen := make(map[key]bool, len(blocks))
	for i, b := range blocks {
		if len(b.Series) == 0 {
			continue
		}
		k := key{b.Shard, b.BlockStart}
		if seen[k] || ns.shard(b.Shard).reader(b.BlockStart) != nil {
			merge = append(merge, i)
			continue
		}
		seen[k] = true
		fresh = append(fresh, i)
	}
	errs := make([]error, len(blocks))
	var wg sync.WaitGroup
	sem := make(chan struct{}, loadParallelism)
	for _, i := range fresh {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			errs[i] = db.loadBlockLocked(ns, blocks[i])
		}()
	}
	wg.Wait()
	for _, i := range merge {
		errs[i] = db.loadBlockLocked(ns, blocks[i])
	}
	return errors.Join(errs...)
}

// loadBlockLocked installs one streamed block, merging it with the local
// fileset if there is one. The caller holds tickMu; concurrent calls must
// be for blocks without a local fileset (installVolume then retires no
// old volume) and of distinct (shard, block start).
func (db *Database) loadBlockLocked(ns *namespace, b StreamedBlock) error {
	sh := ns.shard(b.Shard)
	prev := sh.reader(b.BlockStart)
	out := b.Series
	if prev != nil {
		var err error
		if out, err = mergeSealed(prev, b.Series); err != nil {
			return fmt.Errorf("merge streamed block %d of shard %d: %w", b.BlockStart, b.Shard, err)
		}
	}
	if _, err := db.installVolume(ns, sh, b.BlockStart, prev, out); err != nil {
		return fmt.Errorf("load block %d of shard %d: %w", b.BlockStart, b.Shard, err)
	}
	return nil
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
		merged := encoding.MergeIterators(encoding.NewSealedIterator(in[i].Data), encoding.NewSealedIterator(local))
		s, err := sealSeries(id, merged)
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
