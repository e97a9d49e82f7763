package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"

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
const loadBatchBytes = 16 << 20

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
		// A rollup namespace's blocks are streamed as stored like raw
		// ones, not derived here from the raw blocks streamed: a rollup
		// outlives its source (blocks older than raw's retention exist
		// only as rollup blocks on the peers), and a peer's entries are
		// the bytes this node would compute from the same raw blocks.
		// LoadBlocks merges them with a local rollup volume window by
		// window (storage/rollupsync.go).
		rollupNS := ns.RollupOf != ""
		// shard -> block start -> digest -> peers holding it
		holders := map[blockKey]map[uint64][]int{}
		answered := 0
		var errs []error
		for i, resp := range blockMetadata(ctx, clients, ns.Name, shards) {
			if resp.err != nil {
				errs = append(errs, fmt.Errorf("peer %s: %w", ordered[i].InstanceID, resp.err))
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
		// Each (block, digest) is fetched from one of its holders, up to
		// fetchConcurrency at once (a small shard's block is one round
		// trip, so latency, not bandwidth, bounds a lone fetcher), and the
		// fetched blocks are loaded loadBatchBytes at a time.
		type fetch struct {
			key     blockKey
			holders []int
		}
		var fetches []fetch
		for _, k := range keys {
			for _, peersWithDigest := range holders[k] {
				fetches = append(fetches, fetch{k, peersWithDigest})
			}
		}
		var (
			mu         sync.Mutex
			batch      []storage.StreamedBlock
			batchBytes int
		)
		// take hands the caller the batch to load once it is full (or
		// whatever is left when force).
		take := func(force bool) []storage.StreamedBlock {
			mu.Lock()
			defer mu.Unlock()
			if len(batch) == 0 || (!force && batchBytes < loadBatchBytes) {
				return nil
			}
			out := batch
			batch, batchBytes = nil, 0
			return out
		}
		err := parallel(ctx, fetchConcurrency, len(fetches), func(ctx context.Context, i int) error {
			f := fetches[i]
			series, err := b.fetchBlock(ctx, clients, ordered, f.holders, ns.Name, f.key.shard, f.key.start)
			if err != nil {
				return err
			}
			n := 0
			for _, s := range series {
				n += len(s.ID) + len(s.Data)
			}
			mu.Lock()
			batch = append(batch, storage.StreamedBlock{Shard: f.key.shard, BlockStart: f.key.start, Series: series})
			batchBytes += n
			mu.Unlock()
			if full := take(false); full != nil {
				return db.LoadBlocks(ns.Name, full)
			}
			return nil
		})
		if err != nil {
			return err
		}
		if rest := take(true); rest != nil {
			if err := db.LoadBlocks(ns.Name, rest); err != nil {
				return err
			}
		}
		if rollupNS {
			continue // a rollup namespace holds nothing in memory
		}
		// Unflushed memory: per shard from the first peer that answers,
		// fetchConcurrency shards at once. Pages are queued in the commit
		// log without waiting for each fsync (it starts at once and
		// overlaps the next fetches); the batch's shards are durable when
		// d.wait returns, before they may be marked bootstrapped.
		d := &durability{}
		err = parallel(ctx, fetchConcurrency, len(shards), func(ctx context.Context, i int) error {
			sh := shards[i]
			var err error
			for j, c := range clients {
				if err = b.fetchUnflushed(ctx, d, c, ns.Name, sh); err == nil {
					return nil
				}
				err = fmt.Errorf("peer %s: %w", ordered[j].InstanceID, err)
			}
			return fmt.Errorf("unflushed data of shard %d: %w", sh, err)
		})
		if werr := d.wait(); err == nil {
			err = werr
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// metadataAnswer is one peer's BlockMetadata reply, or why there is none.
type metadataAnswer struct {
	*rpc.BlockMetadataResponse
	err error
}

// blockMetadata asks every peer for the shards' block metadata at once
// and returns the answers in peer order. Asked one after the other, the
// three round trips of a join (the LEAVING source and two replicas) were
// paid by every batch of shards: on a loaded machine a tenth of the
// streaming time.
func blockMetadata(ctx context.Context, clients []Peer, ns string, shards []uint32) []metadataAnswer {
	out := make([]metadataAnswer, len(clients))
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Go(func() {
			resp, err := c.BlockMetadata(ctx, &rpc.BlockMetadataRequest{Namespace: ns, Shards: shards})
			out[i] = metadataAnswer{resp, err}
		})
	}
	wg.Wait()
	return out
}

// blockKey names one block of one shard.
type blockKey struct {
	shard uint32
	start int64
}

// fetchConcurrency is how many fetches one worker keeps in flight.
const fetchConcurrency = 8

// parallel runs fn(ctx, i) for every i in [0, n), at most limit at once,
// and returns the first error; after it no further i is started and the
// ctx of those running is cancelled.
func parallel(ctx context.Context, limit, n int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
		sem   = make(chan struct{}, limit)
	)
	for i := 0; i < n; i++ {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := fn(ctx, i); err != nil {
				once.Do(func() { first = err; cancel() })
			}
		}()
	}
	wg.Wait()
	if first != nil {
		return first
	}
	return ctx.Err()
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
			resp, err = clients[i].FetchBlock(ctx, &rpc.FetchBlockRequest{Namespace: ns, Shard: shard, BlockStart: start, After: after, MaxBytes: pageBytes,
				AcceptHistograms: true}) // payloads are stored as they are
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
		b.prog.bytes.Add(bytes)
		b.mBytes.Inc(bytes)
		b.prog.samples.Add(samples)
		b.mSamples.Inc(samples)
		b.publish()
		return series, nil
	}
	return nil, fmt.Errorf("block %d of shard %d: no holder answered: %w", start, shard, errors.Join(errs...))
}

func (b *Bootstrapper) fetchUnflushed(ctx context.Context, d *durability, c Peer, ns string, shard uint32) error {
	var after []byte
	for {
		resp, err := c.FetchUnflushed(ctx, &rpc.FetchUnflushedRequest{Namespace: ns, Shard: shard, After: after, MaxBytes: pageBytes,
			AcceptHistograms: true})
		if err != nil {
			return err
		}
		streams := make([]storage.SeriesStream, len(resp.Series))
		var bytes int64
		for i, s := range resp.Series {
			bytes += int64(len(s.ID) + len(s.Stream))
			for _, h := range s.Histograms {
				bytes += int64(len(h))
			}
			streams[i] = storage.SeriesStream{ID: s.ID, Stream: s.Stream, Histograms: s.Histograms}
		}
		if err := b.load(ctx, d, ns, shard, streams); err != nil {
			return err
		}
		b.prog.bytes.Add(bytes)
		b.mBytes.Inc(bytes)
		b.publish()
		if err := b.limiter.Wait(ctx, bytes); err != nil {
			return err
		}
		if !resp.More || len(resp.Series) == 0 {
			return nil
		}
		after = resp.Series[len(resp.Series)-1].ID
	}
}
