package repair

import (
	"context"
	"fmt"
	"time"

	"github.com/tessera-tsdb/tessera/dbnode/encoding"
	"github.com/tessera-tsdb/tessera/dbnode/fileset"
	"github.com/tessera-tsdb/tessera/dbnode/rpc"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
)

// Window is the range [Start, End) (unix ms) a repair compares for a
// namespace at now: from the oldest block wholly inside retention (the
// one before it may be expiring on one replica and not yet on another) to
// the settle cutoff now - bufferPast - margin, past which writes may still
// be on their way to some replica.
func Window(ns storage.NamespaceOptions, now time.Time, margin time.Duration) (start, end int64) {
	bsz := ns.BlockSize.Milliseconds()
	oldest := now.Add(-ns.Retention).UnixMilli()
	start = floorTo(oldest, bsz) + bsz
	end = now.Add(-ns.BufferPast - margin).UnixMilli()
	return start, end
}

func floorTo(t, size int64) int64 {
	r := t % size
	if r < 0 {
		r += size
	}
	return t - r
}

// repairShard compares one shard with each of its peers in turn (after a
// pull from the first, the second is compared against the repaired
// data). A failing peer is recorded and the next one still compared.
func (r *Repairer) repairShard(ctx context.Context, t target, lo, hi int64) ShardResult {
	began := time.Now()
	res := ShardResult{Namespace: t.ns.Name, Shard: t.shard, At: r.opts.Now(), Peers: len(t.peers)}
	if hi <= lo {
		return res
	}
	// The local digests are computed once and again only after a pull
	// changed the shard.
	var local []storage.BlockDigest
	stale := true
	for _, o := range t.peers {
		if ctx.Err() != nil {
			break
		}
		if stale {
			var err error
			if local, err = r.opts.DB.BlockDigests(t.ns.Name, t.shard, lo, hi); err != nil {
				// Nothing to compare against: the shard fails as a whole.
				res.Errors++
				res.Error = fmt.Sprintf("local block digests: %v", err)
				break
			}
			stale = false
		}
		p, err := r.opts.Dial(o.Endpoint)
		if err == nil {
			written := res.SamplesRepaired
			err = r.comparePeer(ctx, t, p, local, lo, hi, &res.Tally)
			stale = res.SamplesRepaired != written || err != nil
		}
		if err != nil {
			res.Errors++
			if res.Error == "" {
				res.Error = fmt.Sprintf("peer %s (%s): %v", o.InstanceID, o.Endpoint, err)
			}
		}
	}
	res.Took = time.Since(began)
	return res
}

// comparePeer compares the block digests of one shard with one peer and
// narrows every block that differs.
func (r *Repairer) comparePeer(ctx context.Context, t target, p Peer, local []storage.BlockDigest, lo, hi int64, tl *Tally) error {
	resp, err := p.BlockDigests(ctx, &rpc.BlockDigestsRequest{Namespace: t.ns.Name, Shard: t.shard, Start: lo, End: hi})
	if err != nil {
		return fmt.Errorf("block digests: %w", err)
	}
	if err := r.received(ctx, tl, int64(len(resp.Blocks))*blockDigestBytes); err != nil {
		return err
	}
	mine := make(map[int64]uint64, len(local))
	for _, d := range local {
		mine[d.BlockStart] = d.Digest
	}
	theirs := make(map[int64]bool, len(resp.Blocks))
	for _, d := range resp.Blocks {
		theirs[d.BlockStart] = true
		tl.BlocksCompared++
		if dg, ok := mine[d.BlockStart]; ok && dg == d.Digest {
			continue
		}
		tl.BlocksDiffering++
		if err := r.repairBlock(ctx, t, p, d.BlockStart, lo, hi, tl); err != nil {
			return fmt.Errorf("block %s: %w", time.UnixMilli(d.BlockStart).UTC().Format(time.RFC3339), err)
		}
	}
	// Blocks only this node holds differ too, but the peer has nothing to
	// give: it pulls them in its own pass.
	for _, d := range local {
		if !theirs[d.BlockStart] {
			tl.BlocksCompared++
			tl.BlocksDiffering++
		}
	}
	return nil
}

// blockDigestBytes and seriesChecksumOverhead are what the tally counts
// per digest and per series checksum on the wire (protobuf fields and
// framing, rounded up).
const (
	blockDigestBytes       = 28
	seriesChecksumOverhead = 16
)

// repairBlock narrows a differing block to its differing series and, unless
// compare-only, pulls and merges them.
func (r *Repairer) repairBlock(ctx context.Context, t target, p Peer, bs, lo, hi int64, tl *Tally) error {
	sums, err := r.opts.DB.SeriesChecksums(t.ns.Name, t.shard, bs, lo, hi)
	if err != nil {
		return fmt.Errorf("local series checksums: %w", err)
	}
	mine := make(map[string]uint64, len(sums))
	for _, s := range sums {
		mine[string(s.ID)] = s.Checksum
	}
	var diff [][]byte
	var after []byte
	for {
		resp, err := p.SeriesChecksums(ctx, &rpc.SeriesChecksumsRequest{Namespace: t.ns.Name, Shard: t.shard,
			BlockStart: bs, Start: lo, End: hi, After: after})
		if err != nil {
			return fmt.Errorf("series checksums: %w", err)
		}
		n := int64(0)
		for _, s := range resp.Series {
			n += int64(len(s.ID)) + seriesChecksumOverhead
			tl.SeriesCompared++
			if c, ok := mine[string(s.ID)]; !ok || c != s.Checksum {
				diff = append(diff, s.ID)
			}
		}
		if err := r.received(ctx, tl, n); err != nil {
			return err
		}
		if !resp.More || len(resp.Series) == 0 {
			break
		}
		after = resp.Series[len(resp.Series)-1].ID
	}
	tl.SeriesDiffering += int64(len(diff))
	if r.opts.CompareOnly || len(diff) == 0 {
		return nil
	}
	if t.ns.RollupOf != "" {
		return r.repairRollupBlock(ctx, t, p, bs, diff, tl)
	}
	from, to := max(bs, lo), min(bs+t.ns.BlockSize.Milliseconds(), hi) // [from, to)
	for len(diff) > 0 {
		ids := diff[:min(len(diff), r.opts.SeriesPerFetch)]
		diff = diff[len(ids):]
		// Histograms are accepted: a peer refuses a series holding them to
		// a requester that does not read them.
		resp, err := p.Fetch(ctx, &rpc.FetchRequest{Namespace: t.ns.Name, IDs: ids, Start: from, End: to - 1, AcceptHistograms: true})
		if err != nil {
			return fmt.Errorf("fetch %d series: %w", len(ids), err)
		}
		n := int64(0)
		in := make([]storage.RepairInput, 0, len(resp.Series))
		for _, s := range resp.Series {
			n += int64(len(s.ID) + len(s.Stream))
			for _, h := range s.Histograms {
				n += int64(len(h))
			}
			pts, err := decodeRange(s, from, to)
			if err != nil {
				return err
			}
			hs, err := decodeHistogramRange(s, from, to)
			if err != nil {
				return err
			}
			if len(pts) > 0 || len(hs) > 0 {
				in = append(in, storage.RepairInput{ID: s.ID, Points: pts, Histograms: hs})
			}
		}
		res, err := r.opts.DB.RepairSeries(t.ns.Name, in)
		if err != nil {
			return fmt.Errorf("merge %d pulled series: %w", len(in), err)
		}
		// Samples of either kind count alike.
		tl.SeriesRepaired += int64(res.Series)
		tl.SamplesRepaired += int64(res.Written)
		tl.SamplesSkipped += int64(res.Skipped)
		if err := r.received(ctx, tl, n); err != nil {
			return err
		}
	}
	return nil
}

// decodeRange decodes a pulled series' samples in [from, to).
func decodeRange(s rpc.FetchedSeries, from, to int64) ([]storage.RepairPoint, error) {
	if len(s.Stream) == 0 {
		return nil, nil
	}
	var pts []storage.RepairPoint
	it := encoding.NewIterator(s.Stream)
	for it.Next() {
		ts, v := it.At()
		if ts >= from && ts < to {
			pts = append(pts, storage.RepairPoint{T: ts, V: v})
		}
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("decode pulled series %x: %w", s.ID, err)
	}
	return pts, nil
}

// decodeHistogramRange decodes a pulled series' native histograms in
// [from, to), in time order (the streams merged as a read merges them).
func decodeHistogramRange(s rpc.FetchedSeries, from, to int64) ([]storage.HistogramSample, error) {
	it := s.HistogramIterator()
	if it == nil {
		return nil, nil
	}
	var out []storage.HistogramSample
	for it.Next() {
		if ts := it.AtT(); ts < from || ts >= to {
			continue
		}
		smp := storage.HistogramSample{ID: s.ID, Shard: s.Shard}
		if it.IsFloat() {
			smp.T, smp.FH = it.AtFloatHistogram(nil)
		} else {
			smp.T, smp.H = it.AtHistogram(nil)
		}
		out = append(out, smp)
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("decode pulled histograms of series %x: %w", s.ID, err)
	}
	return out, nil
}

// received counts bytes from a peer and waits for the pace to allow them.
func (r *Repairer) received(ctx context.Context, tl *Tally, n int64) error {
	tl.Bytes += n
	return r.limiter.Wait(ctx, n)
}

// repairRollupBlock pulls the stored entries of the differing series diff
// of a rollup block from the peer (FetchBlock, paged) and merges them
// into the local block (storage's window-by-window rule, the same on
// both replicas, so a pass on each converges them). The tally counts a
// series' windows as its samples.
func (r *Repairer) repairRollupBlock(ctx context.Context, t target, p Peer, bs int64, diff [][]byte, tl *Tally) error {
	want := make(map[string]bool, len(diff))
	for _, id := range diff {
		want[string(id)] = true
	}
	var pulled []fileset.Series
	var after []byte
	for {
		resp, err := p.FetchBlock(ctx, &rpc.FetchBlockRequest{Namespace: t.ns.Name, Shard: t.shard, BlockStart: bs, After: after, AcceptHistograms: true})
		if err != nil {
			return fmt.Errorf("fetch rollup block: %w", err)
		}
		n := int64(0)
		for _, s := range resp.Series {
			n += int64(len(s.ID) + len(s.Data))
			if want[string(s.ID)] {
				pulled = append(pulled, fileset.Series{ID: s.ID, Data: s.Data, Samples: int(s.Samples)})
			}
		}
		if err := r.received(ctx, tl, n); err != nil {
			return err
		}
		if !resp.More || len(resp.Series) == 0 {
			break
		}
		after = resp.Series[len(resp.Series)-1].ID
	}
	if len(pulled) == 0 {
		return nil
	}
	if err := r.opts.DB.LoadBlocks(t.ns.Name, []storage.StreamedBlock{{Shard: t.shard, BlockStart: bs, Series: pulled}}); err != nil {
		return fmt.Errorf("merge %d pulled rollup series: %w", len(pulled), err)
	}
	tl.SeriesRepaired += int64(len(pulled))
	for _, s := range pulled {
		tl.SamplesRepaired += int64(s.Samples)
	}
	return nil
}
