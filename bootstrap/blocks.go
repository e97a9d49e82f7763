package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/tessera-tsdb/tessera/dbnode/encoding"
	"github.com/tessera-tsdb/tessera/dbnode/fileset"
	"github.com/tessera-tsdb/tessera/dbnode/rpc"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
	"github.com/tessera-tsdb/tessera/placement"
)

// pageBytes is the most a page of a streamed block or of unflushed data
// carries, bounding memory on both sides.
const pageBytes = 4 << 20

// loadBatchBytes is how many streamed block bytes a worker holds before
// loading them with one LoadBlocks call: enough blocks for their fileset
// writes to overlap (a small shard's block is a few KiB, and writing it is
// mostly fsync waits), few enough to bound the memory of Workers batches.
const loadBatchBytes = 32 << 20

// streamBlocks bootstraps shards from peers block by block: first every
// answering peer's block metadata (bootstrap consistency: unstrict
// majority, one answer is enough), then for each flushed block the sealed
// series as stored, from one peer when the replicas' digests agree and
// from one peer per distinct digest otherwise (LoadBlock merges them),
// then the unflushed samples of one peer, LEAVING source first.
func (b *Bootstrapper) streamBlocks(ctx context.Context, shards []uint32, peers []placement.Owner) error {
	db := b.opts.DB
	ordered := orderPeers(peers)
	clients := make([]Peer, len(ordered))
	for i, p := range ordered {
		c, err := b.opts.Dial(p.Endpoint)
		if err != nil {
			return fmt.Errorf("dial peer %s at %s: %w", p.InstanceID, p.Endpoint, err)
		}
		clients[i] = c
	}
	for _, ns := range db.Namespaces() {
		// shard -> block start -> digest -> peers holding it
		type blockKey struct {
			shard uint32
			start int64
		}
		holders := map[blockKey]map[uint64][]int{}
		answered := 0
		var errs []error
		for i, c := range clients {
			resp, err := c.BlockMetadata(ctx, &rpc.BlockMetadataRequest{Namespace: ns.Name, Shards: shards})
			if err != nil {
				errs = append(errs, fmt.Errorf("peer %s: %w", ordered[i].InstanceID, err))
				continue
			}
			answered++
			for _, sb := range resp.Shards {
				for _, bm := range sb.Blocks {
					k := blockKey{sb.Shard, bm.BlockStart}
					if holders[k] == nil {
						holders[k] = map[uint64][]int{}
					}
					holders[k][bm.Digest] = append(holders[k][bm.Digest], i)
				}
			}
		}
		if answered == 0 {
			return fmt.Errorf("no peer answered block metadata: %w", errors.Join(errs...))
		}
		keys := make([]blockKey, 0, len(holders))
		for k := range holders {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool {
			if keys[i].shard != keys[j].shard {
				return keys[i].shard < keys[j].shard
			}
			return keys[i].start < keys[j].start
		})
		var batch []storage.StreamedBlock
		var batchBytes int
		load := func() error {
			if len(batch) == 0 {
				return nil
			}
			err := db.LoadBlocks(ns.Name, batch)
			batch, batchBytes = batch[:0], 0
			return err
		}
		for _, k := range keys {
			for _, peersWithDigest := range holders[k] {
				series, err := b.fetchBlock(ctx, clients, ordered, peersWithDigest, ns.Name, k.shard, k.start)
				if err != nil {
					return err
				}
				batch = append(batch, storage.StreamedBlock{Shard: k.shard, BlockStart: k.start, Series: series})
				for _, s := range series {
					batchBytes += len(s.ID) + len(s.Data)
				}
				if batchBytes >= loadBatchBytes {
					if err := load(); err != nil {
						return err
					}
				}
			}
		}
		if err := load(); err != nil {
			return err
		}
		// Unflushed memory: from the first peer that answers.
		for _, sh := range shards {
			var err error
			for i, c := range clients {
				if err = b.fetchUnflushed(ctx, db, c, ns.Name, sh); err == nil {
					break
				}
				err = fmt.Errorf("peer %s: %w", ordered[i].InstanceID, err)
			}
			if err != nil {
				return fmt.Errorf("unflushed data of shard %d: %w", sh, err)
			}
		}
	}
	return nil
}

// fetchBlock pages one block in from the first of its holders that
// answers and returns its series, for the caller to load.
func (b *Bootstrapper) fetchBlock(ctx context.Context, clients []Peer, owners []placement.Owner, holders []int, ns string, shard uint32, start int64) ([]fileset.Series, error) {
	var errs []error
	for _, i := range holders {
		var series []fileset.Series
		var after []byte
		var bytes, samples int64
		var err error
		for {
			var resp *rpc.FetchBlockResponse
			resp, err = clients[i].FetchBlock(ctx, &rpc.FetchBlockRequest{Namespace: ns, Shard: shard, BlockStart: start, After: after, MaxBytes: pageBytes})
			if err != nil {
				break
			}
			var page int64
			for _, s := range resp.Series {
				series = append(series, fileset.Series{ID: s.ID, Data: s.Data, Samples: int(s.Samples)})
				page += int64(len(s.ID) + len(s.Data))
				samples += int64(s.Samples)
			}
			bytes += page
			// The limiter takes each page's bytes once.
			if err = b.limiter.Wait(ctx, page); err != nil {
				break
			}
			if !resp.More || len(resp.Series) == 0 {
				break
			}
			after = resp.Series[len(resp.Series)-1].ID
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("peer %s: %w", owners[i].InstanceID, err))
			continue
		}
		// Counted once the block is whole, so a holder failing mid-block
		// does not count its pages twice.
		b.bytesIn.Add(bytes)
		b.mBytes.Inc(bytes)
		b.samples.Add(samples)
		b.mSamples.Inc(samples)
		return series, nil
	}
	return nil, fmt.Errorf("block %d of shard %d: no holder answered: %w", start, shard, errors.Join(errs...))
}

func (b *Bootstrapper) fetchUnflushed(ctx context.Context, db DB, c Peer, ns string, shard uint32) error {
	var after []byte
	for {
		resp, err := c.FetchUnflushed(ctx, &rpc.FetchUnflushedRequest{Namespace: ns, Shard: shard, After: after, MaxBytes: pageBytes})
		if err != nil {
			return err
		}
		var batch []storage.Sample
		var bytes int64
		for _, s := range resp.Series {
			bytes += int64(len(s.ID) + len(s.Stream))
			it := encoding.NewIterator(s.Stream)
			for it.Next() {
				t, v := it.At()
				batch = append(batch, storage.Sample{ID: s.ID, Shard: shard, T: t, V: v})
			}
			if err := it.Err(); err != nil {
				return fmt.Errorf("decode unflushed series from peer: %w", err)
			}
		}
		if err := b.load(ns, batch); err != nil {
			return err
		}
		b.bytesIn.Add(bytes)
		b.mBytes.Inc(bytes)
		if err := b.limiter.Wait(ctx, bytes); err != nil {
			return err
		}
		if !resp.More || len(resp.Series) == 0 {
			return nil
		}
		after = resp.Series[len(resp.Series)-1].ID
	}
}
