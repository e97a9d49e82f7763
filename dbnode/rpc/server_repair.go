package rpc

import (
	"bytes"
	"context"
	"sort"

	"github.com/tessera-tsdb/tessera/dbnode/rpc/nodepb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// blockDigests answers the block digests of one readable shard.
func (s *Server) blockDigests(ctx context.Context, req *BlockDigestsRequest) (*nodepb.BlockDigestsResponse, error) {
	if err := s.repairPrecheck(ctx, req.Namespace, req.Shard, req.Start, req.End); err != nil {
		return nil, err
	}
	ds, err := s.db.BlockDigests(req.Namespace, req.Shard, req.Start, req.End)
	if err != nil {
		return nil, s.fail("BlockDigests", "digest blocks", err)
	}
	resp := &BlockDigestsResponse{Blocks: make([]BlockDigest, len(ds))}
	for i, d := range ds {
		resp.Blocks[i] = BlockDigest{BlockStart: d.BlockStart, Series: uint32(d.Series), Samples: uint64(d.Samples), Digest: d.Digest}
	}
	out := resp.toPB()
	if err := s.send(ctx, out); err != nil {
		return nil, err
	}
	return out, nil
}

// seriesChecksums answers one page of a block's per-series checksums.
func (s *Server) seriesChecksums(ctx context.Context, req *SeriesChecksumsRequest) (*nodepb.SeriesChecksumsResponse, error) {
	if err := s.repairPrecheck(ctx, req.Namespace, req.Shard, req.Start, req.End); err != nil {
		return nil, err
	}
	nso, _ := s.namespace(req.Namespace)
	if bsz := nso.BlockSize.Milliseconds(); bsz > 0 && req.BlockStart%bsz != 0 {
		return nil, status.Errorf(codes.InvalidArgument, "block start %d is not a multiple of the block size %v", req.BlockStart, nso.BlockSize)
	}
	sums, err := s.db.SeriesChecksums(req.Namespace, req.Shard, req.BlockStart, req.Start, req.End)
	if err != nil {
		return nil, s.fail("SeriesChecksums", "checksum series", err)
	}
	if len(req.After) > 0 {
		i := sort.Search(len(sums), func(i int) bool { return bytes.Compare(sums[i].ID, req.After) > 0 })
		sums = sums[i:]
	}
	limit := int(req.MaxSeries)
	if limit == 0 {
		limit = DefaultChecksumsPageSeries
	}
	resp := &SeriesChecksumsResponse{}
	size := 0
	for i, c := range sums {
		// Cut the page at the series limit or half the message limit.
		if i >= limit || (i > 0 && size+len(c.ID)+24 > s.opts.MaxMsgSize/2) {
			resp.More = true
			break
		}
		size += len(c.ID) + 24
		resp.Series = append(resp.Series, SeriesChecksum{ID: c.ID, Checksum: c.Checksum, Samples: uint32(c.Samples)})
	}
	out := resp.toPB()
	if err := s.send(ctx, out); err != nil {
		return nil, err
	}
	return out, nil
}

func (s *Server) repairPrecheck(ctx context.Context, ns string, shard uint32, start, end int64) error {
	if start > end {
		return status.Errorf(codes.InvalidArgument, "start %d after end %d", start, end)
	}
	return s.streamPrecheck(ctx, ns, shard)
}
