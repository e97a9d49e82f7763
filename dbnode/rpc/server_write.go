package rpc

import (
	"context"
	"errors"
	"fmt"

	"github.com/tessera-tsdb/tessera/dbnode/rpc/nodepb"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// writeBatch decodes the payload straight into a pooled []storage.Sample
// and validates the whole batch before writing any of it: a batch with a
// malformed series or a refused shard is refused whole, so the client can
// resend it elsewhere without partial effects to reason about. Validation
// runs once per series entry, not per sample, and refuses what HTTP remote
// write refuses (limits.CheckID).
func (s *Server) writeBatch(ctx context.Context, req *nodepb.WriteBatchRequest) (WriteResult, error) {
	if _, err := s.namespace(req.GetNamespace()); err != nil {
		return WriteResult{}, err
	}
	switch f := req.GetFormat(); f {
	case nodepb.PayloadFormat_PAYLOAD_FORMAT_SERIES_V1:
	case nodepb.PayloadFormat_PAYLOAD_FORMAT_HISTOGRAMS_V1, nodepb.PayloadFormat_PAYLOAD_FORMAT_BATCH_V1:
		return s.writeKinds(ctx, req)
	case nodepb.PayloadFormat_PAYLOAD_FORMAT_SERIES_HANDLES, nodepb.PayloadFormat_PAYLOAD_FORMAT_SERIES_SEQS:
		return WriteResult{}, status.Errorf(codes.InvalidArgument,
			"write payload format %d (%s) is only read on WriteStream, whose earlier requests define its series", int32(f), f)
	default:
		// A newer sender switched formats before this node learnt it.
		return WriteResult{}, status.Errorf(codes.InvalidArgument,
			"write payload format %d (%s) unknown to this node: it reads %s, %s and %s only",
			int32(f), f, nodepb.PayloadFormat_PAYLOAD_FORMAT_SERIES_V1, nodepb.PayloadFormat_PAYLOAD_FORMAT_HISTOGRAMS_V1,
			nodepb.PayloadFormat_PAYLOAD_FORMAT_BATCH_V1)
	}
	if len(req.GetPayload()) == 0 {
		return WriteResult{}, nil
	}
	sc := s.getScratch()
	defer s.putScratch(sc)
	batch, err := decodePayload(req.GetPayload(), sc.samples[:0])
	sc.samples = batch
	if err != nil {
		// A failed decode may have filled samples past the length it
		// returns: drop their IDs (aliasing the request) before pooling.
		clear(batch[:cap(batch)])
		return WriteResult{}, status.Error(codes.InvalidArgument, err.Error())
	}

	// Series this node already holds under the exact ID bytes, in the
	// shard sent, need neither validation nor hashing: they passed both
	// before. The ref cache knows the series this server wrote lately;
	// storage is asked about the others. The refs also spare storage its
	// lookup.
	ns := req.GetNamespace()
	sc.grow(len(batch))
	for i := range batch {
		sc.firsts[i] = i == 0 || batch[i].Shard != batch[i-1].Shard || !sameSlice(batch[i].ID, batch[i-1].ID)
	}
	s.refs.lookup(ns, batch, sc.firsts, sc.hashes, sc.hits)
	for i := range batch {
		if !sc.firsts[i] {
			batch[i].Ref = batch[i-1].Ref
		}
	}
	s.db.ResolveRefs(ns, batch)
	return s.checkAndWrite(ctx, ns, batch, req.GetFillOnly(), nil, func(batch []storage.Sample) { s.remember(ns, batch, sc) })
}

// checkAndWrite validates the series of a decoded batch whose Ref is not
// set (limits.CheckID, the shard hash), checks every shard's ownership,
// and writes the batch, whole or not at all as far as validation goes.
// A refusal of shards is a FailedPrecondition status; with refused nil
// the refused shards go in the call's trailer (WriteBatch), else in
// *refused (WriteStream, whose trailer would only come at its end).
// written, unless nil, is called with the batch after a write that
// stored or rejected its samples (not for fill-only writes, which
// compact the batch).
func (s *Server) checkAndWrite(ctx context.Context, ns string, batch []storage.Sample, fill bool, refused *[]uint32,
	written func([]storage.Sample)) (WriteResult, error) {
	check := newShardCheck(s.own, OpWrite, s.db.NumShards())
	var prevID []byte
	entry := -1
	for i := range batch {
		smp := &batch[i]
		// Samples of one entry share their ID slice: check it once.
		if len(prevID) == len(smp.ID) && len(prevID) > 0 && &prevID[0] == &smp.ID[0] {
			continue
		}
		prevID = smp.ID
		entry++
		if smp.Ref != 0 {
			// Ownership is checked at every write: the placement moves.
			check.allowed(smp.Shard)
			continue
		}
		// What HTTP remote write would refuse, the RPC port refuses too:
		// one validation (limits.CheckID) for both paths.
		if err := s.opts.Limits.CheckID(smp.ID); err != nil {
			return WriteResult{}, status.Errorf(codes.InvalidArgument, "series %d: %v", entry, err)
		}
		// The client routed by the shard it sent; a wrong one would file
		// the series where reads never look.
		if got := s.db.Shard(smp.ID); got != smp.Shard {
			return WriteResult{}, status.Errorf(codes.InvalidArgument, "series %d (%q): sent as shard %d but its ID hashes to shard %d", entry, smp.ID, smp.Shard, got)
		}
		check.allowed(smp.Shard)
	}
	if refused != nil {
		for _, r := range check.refused {
			*refused = append(*refused, r.shard)
		}
		if len(check.refused) > 0 {
			return WriteResult{}, status.Error(codes.FailedPrecondition, refusedMessage(check.op, check.refused))
		}
	} else if err := check.err(ctx); err != nil {
		return WriteResult{}, err
	}
	if err := ctx.Err(); err != nil {
		return WriteResult{}, ctxStatus(err)
	}

	total := len(batch)
	if fill {
		// withoutHeld compacts batch: per-sample scratch no longer lines
		// up with it, so these series are not remembered below.
		var err error
		if batch, err = s.withoutHeld(ns, batch); err != nil {
			st := storageStatus("write batch (fill only)", err)
			s.logTransient("WriteBatch", st)
			return WriteResult{}, st
		}
		if len(batch) == 0 {
			return WriteResult{Written: total}, nil
		}
	}
	err := s.db.WriteBatch(ns, batch)
	if !fill && written != nil && (err == nil || errors.As(err, new(*storage.RejectedError))) {
		written(batch)
	}
	return s.writeOutcome("write batch", total, err)
}

// writeOutcome is the answer to a write of total samples that storage
// returned err for: permanent rejections are part of the result, any
// other error is a transient status.
func (s *Server) writeOutcome(what string, total int, err error) (WriteResult, error) {
	var rejected *storage.RejectedError
	switch {
	case err == nil:
		return WriteResult{Written: total}, nil
	case errors.As(err, &rejected):
		return WriteResult{Written: total - rejected.Total, Rejected: rejected.Total, RejectMsg: rejected.Error(),
			RejectedSeriesLimit: rejected.ByReason[storage.ReasonSeriesLimit]}, nil
	default:
		st := storageStatus(what, err)
		s.logTransient("WriteBatch", st)
		return WriteResult{}, st
	}
}

// writeKinds writes a BATCH_V1 payload (every kind of a batch) or a
// HISTOGRAMS_V1 one (histograms only, from a sender of the previous
// version) through storage's one entry point: validated whole before any
// of it is written, as writeBatch validates floats (every entry's ID by
// limits.CheckID, its shard against its ID and this node's ownership).
// fill_only (hint replays) keeps what the node already holds at a
// sample's series and timestamp, for every kind. The float hot path
// (SERIES_V1 and the stream formats) does not come here: it has the ref
// cache and pooled scratch a batch of floats alone pays for.
func (s *Server) writeKinds(ctx context.Context, req *nodepb.WriteBatchRequest) (WriteResult, error) {
	if len(req.GetPayload()) == 0 {
		return WriteResult{}, nil // a batch without samples, in any format
	}
	var b storage.Batch
	var err error
	if req.GetFormat() == nodepb.PayloadFormat_PAYLOAD_FORMAT_HISTOGRAMS_V1 {
		b.Histograms, err = decodeHistogramPayload(req.GetPayload(), nil)
	} else {
		b, err = decodeBatchPayload(req.GetPayload(), nil)
	}
	if err != nil {
		return WriteResult{}, status.Error(codes.InvalidArgument, err.Error())
	}
	check := newShardCheck(s.own, OpWrite, s.db.NumShards())
	var prev []byte
	series := func(id []byte, shard uint32) error {
		if sameSlice(prev, id) {
			return nil // samples of one entry share their ID
		}
		prev = id
		if err := s.opts.Limits.CheckID(id); err != nil {
			return status.Errorf(codes.InvalidArgument, "series %q: %v", id, err)
		}
		if got := s.db.Shard(id); got != shard {
			return status.Errorf(codes.InvalidArgument, "series %q: sent as shard %d but its ID hashes to shard %d", id, shard, got)
		}
		check.allowed(shard)
		return nil
	}
	for i := range b.Floats {
		if err := series(b.Floats[i].ID, b.Floats[i].Shard); err != nil {
			return WriteResult{}, err
		}
	}
	for i := range b.Histograms {
		if err := series(b.Histograms[i].ID, b.Histograms[i].Shard); err != nil {
			return WriteResult{}, err
		}
	}
	if err := check.err(ctx); err != nil {
		return WriteResult{}, err
	}
	if err := ctx.Err(); err != nil {
		return WriteResult{}, ctxStatus(err)
	}
	total := b.Len()
	if req.GetFillOnly() {
		if b, err = s.withoutHeldKinds(req.GetNamespace(), b); err != nil {
			return s.writeOutcome("write batch (fill only)", total, err)
		}
		if b.Len() == 0 {
			return WriteResult{Written: total}, nil
		}
	}
	return s.writeOutcome("write batch", total, s.db.Write(req.GetNamespace(), b))
}

// remember puts in the ref cache the series of a written batch that it
// did not hold or held with another ref (storage found that one stale).
// Every series of the batch passed validation or was resolved.
func (s *Server) remember(ns string, batch []storage.Sample, sc *writeScratch) {
	for i := range batch {
		smp := &batch[i]
		if !sc.firsts[i] || smp.Ref == 0 {
			continue
		}
		if e := sc.hits[i]; e == nil || e.ref != smp.Ref {
			s.refs.put(ns, smp.ID, smp.Shard, smp.Ref)
		}
	}
}

// sameSlice says whether a and b are the same bytes in memory: the
// samples of one payload entry share their ID slice.
func sameSlice(a, b []byte) bool {
	return len(a) == len(b) && len(a) > 0 && &a[0] == &b[0]
}

// writeScratch is the pooled working memory of one write batch: the
// decoded samples and, per sample, whether it starts a run of its series,
// its ID's hash and the ref cache entry it hit.
type writeScratch struct {
	samples []storage.Sample
	firsts  []bool
	hashes  []uint64
	hits    []*refEntry
}

// grow sizes the per-sample scratch to n, every hit nil.
func (sc *writeScratch) grow(n int) {
	if cap(sc.hits) < n {
		sc.firsts, sc.hashes, sc.hits = make([]bool, n), make([]uint64, n), make([]*refEntry, n)
	}
	sc.firsts, sc.hashes, sc.hits = sc.firsts[:n], sc.hashes[:n], sc.hits[:n]
}

func (s *Server) getScratch() *writeScratch {
	if v, ok := s.scratch.Get().(*writeScratch); ok {
		return v
	}
	return &writeScratch{}
}

// putScratch returns a batch's scratch to the pool without the IDs (which
// alias the request), series refs and entries it held. Only its length is
// cleared: it keeps the capacity of the largest batch it ever held, and a
// small write must not pay for clearing all of it.
func (s *Server) putScratch(sc *writeScratch) {
	clear(sc.samples)
	clear(sc.hits)
	sc.samples, sc.firsts, sc.hashes, sc.hits = sc.samples[:0], sc.firsts[:0], sc.hashes[:0], sc.hits[:0]
	s.scratch.Put(sc)
}

// withoutHeld drops, in place, the samples whose series already has a
// value at their timestamp (fill_only): one read per run of samples of
// one series, over the run's time range. A write of the same series and
// timestamp that lands between the read and the write still wins, as it
// would without fill_only.
func (s *Server) withoutHeld(ns string, batch []storage.Sample) ([]storage.Sample, error) {
	return dropHeld(batch, func(x *storage.Sample) ([]byte, int64) { return x.ID, x.T },
		func(id []byte, lo, hi int64, held map[int64]struct{}) error {
			it, err := s.db.Read(ns, id, lo, hi)
			if err != nil {
				return err
			}
			for it.Next() {
				t, _ := it.At()
				held[t] = struct{}{}
			}
			return it.Err()
		})
}

// withoutHeldKinds is withoutHeld for every kind of b.
func (s *Server) withoutHeldKinds(ns string, b storage.Batch) (storage.Batch, error) {
	var err error
	if len(b.Floats) > 0 {
		if b.Floats, err = s.withoutHeld(ns, b.Floats); err != nil {
			return b, err
		}
	}
	if len(b.Histograms) > 0 {
		b.Histograms, err = s.withoutHeldHistograms(ns, b.Histograms)
	}
	return b, err
}

// withoutHeldHistograms is withoutHeld for native histograms: it drops,
// in place, the samples whose series already has a histogram at their
// timestamp.
func (s *Server) withoutHeldHistograms(ns string, batch []storage.HistogramSample) ([]storage.HistogramSample, error) {
	return dropHeld(batch, func(x *storage.HistogramSample) ([]byte, int64) { return x.ID, x.T },
		func(id []byte, lo, hi int64, held map[int64]struct{}) error {
			it, err := s.db.ReadHistograms(ns, id, lo, hi)
			if err != nil {
				return err
			}
			for it.Next() {
				held[it.AtT()] = struct{}{}
			}
			return it.Err()
		})
}

// dropHeld keeps, in place and in order, the samples of batch whose
// timestamp is not among those readHeld reports for their series. It
// reads once per series of the batch, over the range of that series'
// timestamps, wherever its samples are in the batch: a hint replay sends
// many records one after another, each holding one sample of each of
// many series, and a read per sample (each decoding the series' block up
// to its timestamp) held the replay to a fraction of its configured rate.
func dropHeld[S any](batch []S, key func(*S) ([]byte, int64), readHeld func(id []byte, lo, hi int64, held map[int64]struct{}) error) ([]S, error) {
	type series struct {
		lo, hi int64
		at     []int32 // indices in batch of its samples, in order
	}
	index := make(map[string]int, len(batch))
	var all []series
	for i := range batch {
		id, t := key(&batch[i])
		g, ok := index[string(id)]
		if !ok {
			g = len(all)
			index[string(id)] = g
			all = append(all, series{lo: t, hi: t})
		}
		sr := &all[g]
		sr.lo, sr.hi = min(sr.lo, t), max(sr.hi, t)
		sr.at = append(sr.at, int32(i))
	}
	drop := make([]bool, len(batch))
	held := map[int64]struct{}{}
	for _, sr := range all {
		id, _ := key(&batch[sr.at[0]])
		clear(held)
		if err := readHeld(id, sr.lo, sr.hi, held); err != nil {
			return nil, fmt.Errorf("read series %q: %w", id, err)
		}
		if len(held) == 0 {
			continue
		}
		for _, k := range sr.at {
			if _, t := key(&batch[k]); has(held, t) {
				drop[k] = true
			}
		}
	}
	kept := batch[:0]
	for i := range batch {
		if !drop[i] {
			kept = append(kept, batch[i])
		}
	}
	return kept, nil
}

func has(m map[int64]struct{}, t int64) bool { _, ok := m[t]; return ok }
