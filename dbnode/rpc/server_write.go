package rpc

import (
	"context"
	"errors"

	"github.com/tessera-tsdb/tessera/dbnode/storage"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// writeBatch validates the whole batch before writing any of it: a batch
// with a malformed series or a refused shard is refused whole, so the
// client can resend it elsewhere without partial effects to reason about.
func (s *Server) writeBatch(ctx context.Context, req *WriteRequest) (*WriteResponse, error) {
	if _, err := s.namespace(req.Namespace); err != nil {
		return nil, err
	}
	check := newShardCheck(s.own, OpWrite)
	total := 0
	for i := range req.Series {
		ws := &req.Series[i]
		if err := validateID(ws.ID); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "series %d (%q): malformed ID: %v", i, ws.ID, err)
		}
		// The client routed by ws.Shard; a wrong one would file the series
		// where reads never look.
		if got := s.db.Shard(ws.ID); got != ws.Shard {
			return nil, status.Errorf(codes.InvalidArgument, "series %d (%q): sent as shard %d but its ID hashes to shard %d", i, ws.ID, ws.Shard, got)
		}
		check.allowed(ws.Shard)
		total += len(ws.Samples)
	}
	if err := check.err(ctx); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, ctxStatus(err)
	}
	if total == 0 {
		return &WriteResponse{}, nil
	}

	buf := s.getSamples(total)
	defer s.putSamples(buf)
	batch := (*buf)[:0]
	for i := range req.Series {
		ws := &req.Series[i]
		for _, smp := range ws.Samples {
			batch = append(batch, storage.Sample{ID: ws.ID, Shard: ws.Shard, T: smp.T, V: smp.V})
		}
	}
	*buf = batch

	err := s.db.WriteBatch(req.Namespace, batch)
	var rejected *storage.RejectedError
	switch {
	case err == nil:
		return &WriteResponse{Written: total}, nil
	case errors.As(err, &rejected):
		return &WriteResponse{Written: total - rejected.Total, Rejected: rejected.Total, RejectMsg: rejected.Error()}, nil
	default:
		st := storageStatus("write batch", err)
		s.logTransient("WriteBatch", st)
		return nil, st
	}
}

func (s *Server) getSamples(n int) *[]storage.Sample {
	if v, ok := s.samples.Get().(*[]storage.Sample); ok && cap(*v) >= n {
		return v
	}
	b := make([]storage.Sample, 0, n)
	return &b
}

func (s *Server) putSamples(b *[]storage.Sample) {
	clear(*b) // drop the IDs, which alias the request
	*b = (*b)[:0]
	s.samples.Put(b)
}
