package rpc

import (
	"context"

	"github.com/tessera-tsdb/tessera/dbnode/encoding"
	"github.com/tessera-tsdb/tessera/dbnode/rpc/nodepb"
	"google.golang.org/protobuf/proto"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// DefaultStreamPageBytes is the page size of FetchBlock and FetchUnflushed
// when the request's MaxBytes is 0.
const DefaultStreamPageBytes = 4 << 20

// minPacedPageBytes is the smallest page a rate-limited server cuts pages
// down to (see pageBytes).
const minPacedPageBytes = 4 << 10

// blockMetadata lists the flushed blocks of every requested shard, all of
// which must be readable here.
func (s *Server) blockMetadata(ctx context.Context, req *BlockMetadataRequest) (*nodepb.BlockMetadataResponse, error) {
	if _, err := s.namespace(req.Namespace); err != nil {
		return nil, err
	}
	if len(req.Shards) == 0 {
		return nil, status.Error(codes.InvalidArgument, "no shards: name the shards to list")
	}
	check := newShardCheck(s.own, OpRead, s.db.NumShards())
	var shards []uint32 // distinct, in request order
	for _, sh := range req.Shards {
		if err := s.shardInRange(sh); err != nil {
			return nil, err
		}
		if !check.seen(sh) {
			shards = append(shards, sh)
		}
		check.allowed(sh)
	}
	if err := check.err(ctx); err != nil {
		return nil, err
	}
	resp := &BlockMetadataResponse{Shards: make([]ShardBlocks, len(shards))}
	for i, sh := range shards {
		if err := ctx.Err(); err != nil {
			return nil, ctxStatus(err)
		}
		metas, err := s.db.FlushedBlocks(req.Namespace, sh)
		if err != nil {
			return nil, s.fail("BlockMetadata", "list blocks", err)
		}
		sb := ShardBlocks{Shard: sh, Blocks: make([]BlockMeta, len(metas))}
		for j, m := range metas {
			sb.Blocks[j] = BlockMeta{BlockStart: m.BlockStart, Volume: uint32(m.Volume),
				Series: uint32(m.Series), Samples: uint32(m.Samples), Digest: m.Digest}
		}
		resp.Shards[i] = sb
	}
	out := resp.toPB()
	if err := s.fits(proto.Size(out)); err != nil {
		return nil, err
	}
	return out, nil
}

// fetchBlock answers one page of a flushed block, as stored.
func (s *Server) fetchBlock(ctx context.Context, req *FetchBlockRequest) (*nodepb.FetchBlockResponse, error) {
	if err := s.streamPrecheck(ctx, req.Namespace, req.Shard); err != nil {
		return nil, err
	}
	series, more, err := s.db.ReadBlock(req.Namespace, req.Shard, req.BlockStart, req.After, s.pageBytes(req.MaxBytes))
	if err != nil {
		return nil, s.fail("FetchBlock", "read block", err)
	}
	resp := &FetchBlockResponse{Series: make([]BlockSeries, len(series)), More: more}
	for i, f := range series {
		if !req.AcceptHistograms && encoding.IsPayloadContainer(f.Data) {
			// An older node would store a payload it cannot read.
			return nil, errHistogramsNotAccepted(f.ID)
		}
		resp.Series[i] = BlockSeries{ID: f.ID, Data: f.Data, Samples: uint32(f.Samples)}
	}
	out := resp.toPB()
	if err := s.send(ctx, out); err != nil {
		return nil, err
	}
	return out, nil
}

// fetchUnflushed answers one page of a shard's in-memory series.
func (s *Server) fetchUnflushed(ctx context.Context, req *FetchUnflushedRequest) (*nodepb.FetchUnflushedResponse, error) {
	if err := s.streamPrecheck(ctx, req.Namespace, req.Shard); err != nil {
		return nil, err
	}
	series, more, err := s.db.ReadUnflushed(req.Namespace, req.Shard, req.After, s.pageBytes(req.MaxBytes))
	if err != nil {
		return nil, s.fail("FetchUnflushed", "read unflushed", err)
	}
	resp := &FetchUnflushedResponse{Series: make([]FetchedSeries, len(series)), More: more}
	for i, f := range series {
		if len(f.Histograms) > 0 && !req.AcceptHistograms {
			return nil, errHistogramsNotAccepted(f.ID)
		}
		resp.Series[i] = FetchedSeries{ID: f.ID, Shard: req.Shard, Stream: f.Stream, Histograms: f.Histograms}
	}
	out := resp.toPB()
	if err := s.send(ctx, out); err != nil {
		return nil, err
	}
	return out, nil
}

// streamPrecheck refuses a page request for an unknown namespace, a shard
// out of range or one this node may not read.
func (s *Server) streamPrecheck(ctx context.Context, ns string, shard uint32) error {
	if _, err := s.namespace(ns); err != nil {
		return err
	}
	if err := s.shardInRange(shard); err != nil {
		return err
	}
	check := newShardCheck(s.own, OpRead, s.db.NumShards())
	check.allowed(shard)
	return check.err(ctx)
}

func (s *Server) shardInRange(shard uint32) error {
	if n := s.db.NumShards(); shard >= n {
		return status.Errorf(codes.InvalidArgument, "shard %d out of range: the node has %d shards", shard, n)
	}
	return nil
}

// pageBytes is the page size to read: the request's MaxBytes (the default
// when 0), capped at half the message limit so a page plus its IDs always
// fits and, on a rate-limited server, at one second's worth of bytes so a
// single page never waits much longer than a second for its turn.
func (s *Server) pageBytes(asked uint32) int {
	n := int(asked)
	if n == 0 {
		n = DefaultStreamPageBytes
	}
	n = min(n, s.opts.MaxMsgSize/2)
	if r := s.opts.MaxStreamBytesPerSecond; r > 0 {
		n = min(n, int(max(r, minPacedPageBytes)))
	}
	return max(n, 1)
}

// fits refuses an answer larger than the message limit (a single series
// bigger than it, since pages are cut at half of it).
func (s *Server) fits(size int) error {
	if size > s.opts.MaxMsgSize {
		return status.Errorf(codes.ResourceExhausted,
			"answer of %d bytes exceeds the %d-byte message limit", size, s.opts.MaxMsgSize)
	}
	return nil
}

// send checks the size of a streaming reply and waits for the rate limit
// to let its bytes go.
func (s *Server) send(ctx context.Context, m proto.Message) error {
	size := proto.Size(m)
	if err := s.fits(size); err != nil {
		return err
	}
	if err := s.pacer.wait(ctx, size); err != nil {
		return ctxStatus(err)
	}
	return nil
}
