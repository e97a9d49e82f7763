package backup

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/tessera-tsdb/tessera/dbnode/fileset"
	"github.com/tessera-tsdb/tessera/dbnode/snapshot"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
	"github.com/tessera-tsdb/tessera/ident"
)

// Restoring into another shard count. A series lives in shard
// ident.Shard(id, numShards) = murmur3(id) % numShards, so a series of
// shard t of the new cluster (dst shards) was in source shard
// murmur3(id) % src of the backup. When dst divides src that is one of
// the source shards s with s % dst == t; when src divides dst it is
// t % src; otherwise it may be any. restoreResharded downloads exactly
// those source shards' parts, decodes each series, re-hashes its ID with
// the cluster's shard count and keeps the series of the shards asked
// for. Payloads are per series and independent of the shard, so a block
// part's series are written into the new shards' volumes as they are
// (never decoded); unflushed series go through the commit log as in the
// same-count case.

// sourceShards returns the backup's shards that can hold series of the
// given cluster shards, sorted.
func sourceShards(src, dst uint32, shards []uint32) []uint32 {
	var out []uint32
	switch {
	case src%dst == 0:
		want := make(map[uint32]bool, len(shards))
		for _, t := range shards {
			want[t] = true
		}
		for s := range src {
			if want[s%dst] {
				out = append(out, s)
			}
		}
	case dst%src == 0:
		seen := map[uint32]bool{}
		for _, t := range shards {
			if s := t % src; !seen[s] {
				seen[s] = true
				out = append(out, s)
			}
		}
		slices.Sort(out)
	default:
		for s := range src {
			out = append(out, s)
		}
	}
	return out
}

type reshardJob struct {
	src uint32
	ref ObjectRef
}

// restoreResharded restores shards (of the cluster's count) from a backup
// of another shard count. Block parts are taken one block start at a
// time, so the series of one block of every asked shard, gathered from
// all source shards, are usually installed in one volume; past
// loadBatchBytes the gathered series are installed early (a later part
// of the same block then merges with that volume, which costs a rewrite
// but never a sample). A damaged part costs the series of the asked
// shards it held, reported with its source shard.
func (r *Restorer) restoreResharded(ctx context.Context, shards []uint32) error {
	want := make([]bool, r.numShards)
	for _, t := range shards {
		want[t] = true
	}
	var jobs []reshardJob
	for _, s := range sourceShards(r.m.NumShards, r.numShards, shards) {
		e, ok := r.m.Shard(s)
		if !ok {
			continue // the source shard held no data
		}
		for _, o := range e.Objects {
			jobs = append(jobs, reshardJob{src: s, ref: o})
		}
	}
	// Block parts grouped by (namespace, block start), unflushed parts last.
	slices.SortStableFunc(jobs, func(a, b reshardJob) int {
		return cmp.Or(cmp.Compare(a.ref.Kind, b.ref.Kind), // "block" < "unflushed"
			cmp.Compare(a.ref.Namespace, b.ref.Namespace),
			cmp.Compare(a.ref.BlockStart, b.ref.BlockStart),
			cmp.Compare(a.src, b.src))
	})
	type blockKey struct {
		ns    string
		start int64
		shard uint32
	}
	var (
		gathered = map[blockKey][]fileset.Series{}
		pending  int64
		damaged  []Damage
		parts    int
		fetched  int64
		samples  int64
	)
	flush := func() error {
		byNS := map[string][]storage.StreamedBlock{}
		for k, series := range gathered {
			slices.SortFunc(series, func(a, b fileset.Series) int { return bytes.Compare(a.ID, b.ID) })
			byNS[k.ns] = append(byNS[k.ns], storage.StreamedBlock{Shard: k.shard, BlockStart: k.start, Series: series})
		}
		for ns, bl := range byNS {
			if err := r.db.LoadBlocks(ns, bl); err != nil {
				return fmt.Errorf("restore: load re-sharded blocks of %s: %w", ns, err)
			}
		}
		clear(gathered)
		pending = 0
		return nil
	}
	type streamKey struct {
		ns    string
		shard uint32
	}
	var (
		streamsOf   = map[streamKey][]storage.SeriesStream{}
		streamBytes int64
	)
	loadStreams := func() error {
		keys := slices.SortedFunc(maps.Keys(streamsOf), func(a, b streamKey) int {
			return cmp.Or(cmp.Compare(a.ns, b.ns), cmp.Compare(a.shard, b.shard))
		})
		for _, k := range keys {
			series := streamsOf[k]
			slices.SortFunc(series, func(a, b storage.SeriesStream) int { return bytes.Compare(a.ID, b.ID) })
			n, err := r.db.LoadStreams(k.ns, k.shard, series)
			var rej *storage.RejectedError
			if err != nil && !errors.As(err, &rej) { // out of retention by now: nothing to keep
				return fmt.Errorf("restore shard %d: load unflushed samples: %w", k.shard, err)
			}
			samples += int64(n)
		}
		clear(streamsOf)
		streamBytes = 0
		return nil
	}
	ahead, stop := r.prefetch(ctx, jobs)
	defer stop()
	for i, j := range jobs {
		// Between two block starts, install what was gathered once it is
		// big enough; within one, only far past the bound.
		boundary := i > 0 && (jobs[i-1].ref.Namespace != j.ref.Namespace || jobs[i-1].ref.BlockStart != j.ref.BlockStart ||
			jobs[i-1].ref.Kind != j.ref.Kind)
		if (boundary && pending >= loadBatchBytes) || pending >= 4*loadBatchBytes {
			if err := flush(); err != nil {
				return err
			}
		}
		buf, err := ahead.next(ctx, i)
		if errors.Is(err, ErrDamaged) {
			d := damageOf(j.src, j.ref, err)
			d.SourceNumShards = r.m.NumShards
			r.log.Error("restore: damaged backup object; the series of this node's shards it held are lost, the rest is restored",
				"damage", d.String())
			damaged = append(damaged, d)
			continue
		}
		if err != nil {
			return fmt.Errorf("restore from source shard %d: %w", j.src, err)
		}
		parts++
		fetched += j.ref.Size
		if j.ref.Kind == KindBlock {
			h, series, err := snapshot.DecodeBlock(buf) // checked by fetchPart
			if err != nil {
				return fmt.Errorf("restore: %s: %w", j.ref.Key, err)
			}
			kept, size := keepSeries(series, r.numShards, want)
			for _, s := range kept {
				k := blockKey{ns: h.Namespace, start: h.BlockStart, shard: ident.Shard(s.ID, r.numShards)}
				gathered[k] = append(gathered[k], s)
				samples += int64(s.Samples)
			}
			pending += size
			continue
		}
		// Flushed blocks go first: install them before the memory.
		if len(gathered) > 0 {
			if err := flush(); err != nil {
				return err
			}
		}
		h, streams, err := snapshot.DecodeUnflushed(buf)
		if err != nil {
			return fmt.Errorf("restore: %s: %w", j.ref.Key, err)
		}
		// Gathered per shard over the source parts, so each shard's
		// memory is one commit log write and wait, not one per source
		// part (thousands of fsync waits for a 1000-shard node).
		for _, s := range streams {
			if t := ident.Shard(s.ID, r.numShards); want[t] {
				k := streamKey{h.Namespace, t}
				c, size := copyStream(s)
				streamsOf[k] = append(streamsOf[k], c)
				streamBytes += size
			}
		}
		if streamBytes >= loadBatchBytes {
			if err := loadStreams(); err != nil {
				return err
			}
		}
	}
	if err := loadStreams(); err != nil {
		return err
	}
	if err := flush(); err != nil {
		return err
	}
	r.account(len(shards), parts, fetched, samples, damaged)
	return nil
}

// keepSeries copies the series whose ID hashes (with numShards) to a
// wanted shard into one new buffer, so the part they were decoded from
// is not kept alive by the few it may contribute; it returns them and
// the bytes they hold.
func keepSeries(series []fileset.Series, numShards uint32, want []bool) ([]fileset.Series, int64) {
	var size int
	keep := make([]bool, len(series))
	n := 0
	for i, s := range series {
		if want[ident.Shard(s.ID, numShards)] {
			keep[i] = true
			size += len(s.ID) + len(s.Data)
			n++
		}
	}
	arena := make([]byte, 0, size)
	out := make([]fileset.Series, 0, n)
	for i, s := range series {
		if !keep[i] {
			continue
		}
		at := len(arena)
		arena = append(arena, s.ID...)
		id := arena[at:len(arena):len(arena)]
		at = len(arena)
		arena = append(arena, s.Data...)
		out = append(out, fileset.Series{ID: id, Data: arena[at:len(arena):len(arena)], Samples: s.Samples})
	}
	return out, int64(size)
}

// copyStream copies an unflushed series out of the part it was decoded
// from (which would otherwise stay in memory for it) into one buffer.
func copyStream(s storage.SeriesStream) (storage.SeriesStream, int64) {
	size := len(s.ID) + len(s.Stream)
	for _, h := range s.Histograms {
		size += len(h)
	}
	arena := make([]byte, 0, size)
	take := func(b []byte) []byte {
		if b == nil {
			return nil
		}
		at := len(arena)
		arena = append(arena, b...)
		return arena[at:len(arena):len(arena)]
	}
	out := storage.SeriesStream{ID: take(s.ID), Stream: take(s.Stream)}
	for _, h := range s.Histograms {
		out.Histograms = append(out.Histograms, take(h))
	}
	return out, int64(size)
}

// fetchAhead is how many parts a re-sharding restore downloads at once,
// ahead of the one it decodes: it reads every part of many source shards
// in one call, where the same-count restore has the bootstrapper's
// workers fetching in parallel.
const fetchAhead = 4

type fetched struct {
	buf []byte
	err error
}

// prefetched delivers jobs' parts in order, downloaded up to fetchAhead
// at once.
type prefetched struct {
	out  []chan fetched
	slot chan struct{}
}

// next waits for job i's part (its turn: call for i = 0, 1, ...).
func (p *prefetched) next(ctx context.Context, i int) ([]byte, error) {
	select {
	case f := <-p.out[i]:
		<-p.slot
		return f.buf, f.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// prefetch starts downloading jobs' parts in order; stop cancels what is
// left and waits for the downloads in flight.
func (r *Restorer) prefetch(ctx context.Context, jobs []reshardJob) (*prefetched, func()) {
	ctx, cancel := context.WithCancel(ctx)
	p := &prefetched{out: make([]chan fetched, len(jobs)), slot: make(chan struct{}, fetchAhead)}
	for i := range p.out {
		p.out[i] = make(chan fetched, 1)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for i, j := range jobs {
			select {
			case p.slot <- struct{}{}: // released by next
			case <-ctx.Done():
				return
			}
			wg.Go(func() {
				buf, err := fetchPart(ctx, r.bucket, j.src, j.ref)
				p.out[i] <- fetched{buf, err}
			})
		}
	})
	return p, func() { cancel(); wg.Wait() }
}
