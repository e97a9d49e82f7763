package rpc

import (
	"context"
	"errors"

	"github.com/tessera-tsdb/tessera/dbnode/rpc/nodepb"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// writeBatch decodes the payload straight into a pooled []storage.Sample
// and validates the whole batch before writing any of it: a batch with a
// malformed series or a refused shard is refused whole, so the client can
// resend it elsewhere without partial effects to reason about. Validation
// runs once per series entry, not per sample.
func (s *Server) writeBatch(ctx context.Context, req *nodepb.WriteBatchRequest) (WriteResult, error) {
	if _, err := s.namespace(req.GetNamespace()); err != nil {
		return WriteResult{}, err
	}
	if f := req.GetFormat(); f != nodepb.PayloadFormat_PAYLOAD_FORMAT_SERIES_V1 {
		// A newer sender switched formats before this node learnt it.
		return WriteResult{}, status.Errorf(codes.InvalidArgument,
			"write payload format %d (%s) unknown to this node: it reads %s only",
			int32(f), f, nodepb.PayloadFormat_PAYLOAD_FORMAT_SERIES_V1)
	}
	if len(req.GetPayload()) == 0 {
		return WriteResult{}, nil
	}
	buf := s.getSamples(0)
	defer s.putSamples(buf)
	batch, err := decodePayload(req.GetPayload(), (*buf)[:0])
	*buf = batch
	if err != nil {
		// A failed decode may have filled samples past the length it
		// returns: drop their IDs (aliasing the request) before pooling.
		clear(batch[:cap(batch)])
		return WriteResult{}, status.Error(codes.InvalidArgument, err.Error())
	}

	// Series this node already holds under the exact ID bytes, in the
	// shard sent, need neither validation nor hashing: storage filed them
	// there after checking both. Their refs also spare storage its lookup.
	s.db.ResolveRefs(req.GetNamespace(), batch)
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
		if smp.Ref != nil {
			// Ownership is checked at every write: the placement moves.
			check.allowed(smp.Shard)
			continue
		}
		if err := validateID(smp.ID); err != nil {
			return WriteResult{}, status.Errorf(codes.InvalidArgument, "series %d (%q): malformed ID: %v", entry, smp.ID, err)
		}
		// The client routed by the shard it sent; a wrong one would file
		// the series where reads never look.
		if got := s.db.Shard(smp.ID); got != smp.Shard {
			return WriteResult{}, status.Errorf(codes.InvalidArgument, "series %d (%q): sent as shard %d but its ID hashes to shard %d", entry, smp.ID, smp.Shard, got)
		}
		check.allowed(smp.Shard)
	}
	if err := check.err(ctx); err != nil {
		return WriteResult{}, err
	}
	if err := ctx.Err(); err != nil {
		return WriteResult{}, ctxStatus(err)
	}

	total := len(batch)
	err = s.db.WriteBatch(req.GetNamespace(), batch)
	var rejected *storage.RejectedError
	switch {
	case err == nil:
		return WriteResult{Written: total}, nil
	case errors.As(err, &rejected):
		return WriteResult{Written: total - rejected.Total, Rejected: rejected.Total, RejectMsg: rejected.Error()}, nil
	default:
		st := storageStatus("write batch", err)
		s.logTransient("WriteBatch", st)
		return WriteResult{}, st
	}
}

func (s *Server) getSamples(n int) *[]storage.Sample {
	if v, ok := s.samples.Get().(*[]storage.Sample); ok && cap(*v) >= n {
		return v
	}
	b := make([]storage.Sample, 0, n)
	return &b
}

// putSamples returns a batch buffer to the pool without the IDs (which
// alias the request) and series refs it held. Only its length is cleared:
// the buffer keeps the capacity of the largest batch it ever held, and a
// small write must not pay for clearing all of it.
func (s *Server) putSamples(b *[]storage.Sample) {
	clear(*b)
	*b = (*b)[:0]
	s.samples.Put(b)
}
