package rpc

import (
	"context"
	"errors"
	"io"

	"github.com/tessera-tsdb/tessera/dbnode/rpc/nodepb"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// writeStream serves one WriteStream call: requests in order, each
// answered before the next is read, sharing the stream's series handles
// (streamTable). A request refused on its own is answered with its error
// in the response and the stream goes on; a request whose payload cannot
// be decoded ends the stream, since the handles it defined are lost.
func (s *Server) writeStream(st grpc.BidiStreamingServer[nodepb.WriteBatchRequest, nodepb.WriteBatchResponse]) error {
	ctx := st.Context()
	t := &streamTable{}
	sc := &streamScratch{}
	for {
		req, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		var refused []uint32
		res, err := s.writeStreamed(ctx, req, t, sc, &refused)
		var resp *nodepb.WriteBatchResponse
		switch {
		case err == nil:
			resp = res.toPB()
		case errors.Is(err, ErrMalformed):
			return status.Error(codes.InvalidArgument, err.Error())
		default:
			st := status.Convert(err)
			resp = &nodepb.WriteBatchResponse{ErrorCode: uint32(st.Code()), ErrorMessage: st.Message(), RefusedShards: refused}
		}
		if err := st.Send(resp); err != nil {
			return err
		}
	}
}

// streamScratch is one stream's working memory, reused by its requests.
type streamScratch struct {
	samples []storage.Sample
	handles []uint32            // per sample
	given   []storage.SeriesRef // per entry: the ref decode gave its samples
}

// writeStreamed carries out one request of a stream. Errors wrapping
// ErrMalformed end the stream; others refuse this request only.
func (s *Server) writeStreamed(ctx context.Context, req *nodepb.WriteBatchRequest, t *streamTable, sc *streamScratch, refused *[]uint32) (WriteResult, error) {
	ns := req.GetNamespace()
	var batch []storage.Sample
	var err error
	var series *[]streamSeries // what the handles of sc.handles index
	switch f := req.GetFormat(); f {
	case nodepb.PayloadFormat_PAYLOAD_FORMAT_SERIES_SEQS:
		// As for handles: what it defines exists from now on.
		batch, sc.handles, err = decodeSeqPayload(req.GetPayload(), ns, &t.seqs, sc.samples[:0], sc.handles[:0])
		series = &t.seqs.series
	case nodepb.PayloadFormat_PAYLOAD_FORMAT_SERIES_HANDLES:
		// Decoded before anything is checked: the handles it defines
		// exist from now on, on both sides, whatever becomes of the rest.
		batch, sc.handles, err = decodeHandlePayload(req.GetPayload(), ns, t, sc.samples[:0], sc.handles[:0])
		series = &t.series
	case nodepb.PayloadFormat_PAYLOAD_FORMAT_SERIES_V1:
		batch, err = decodePayload(req.GetPayload(), sc.samples[:0])
		sc.handles = sc.handles[:0]
	default:
		return WriteResult{}, status.Errorf(codes.InvalidArgument,
			"write payload format %d (%s) unknown to this node: it reads %s, %s and %s", int32(f), f,
			nodepb.PayloadFormat_PAYLOAD_FORMAT_SERIES_V1, nodepb.PayloadFormat_PAYLOAD_FORMAT_SERIES_HANDLES,
			nodepb.PayloadFormat_PAYLOAD_FORMAT_SERIES_SEQS)
	}
	sc.samples = batch
	if err != nil {
		return WriteResult{}, err // the stream ends: its scratch goes with it
	}
	defer clear(batch) // IDs may alias the request, refs pin series
	if _, err := s.namespace(ns); err != nil {
		return WriteResult{}, err
	}
	if len(batch) == 0 {
		return WriteResult{}, nil
	}
	var written func([]storage.Sample)
	if len(sc.handles) == len(batch) {
		// The refs decode handed out are compared with what the write
		// left, one per entry (a run of one handle), so the handles
		// are touched only where storage resolved something new.
		sc.given = sc.given[:0]
		for i := range batch {
			if i == 0 || sc.handles[i] != sc.handles[i-1] {
				sc.given = append(sc.given, batch[i].Ref)
			}
		}
		written = func(batch []storage.Sample) {
			e := -1
			for i := range batch {
				if i > 0 && sc.handles[i] == sc.handles[i-1] {
					continue
				}
				e++
				if h := sc.handles[i]; h != noHandle {
					if r := batch[i].Ref; r != 0 && r != sc.given[e] {
						ser := &(*series)[h]
						ser.ref, ser.ns = r, ns
					}
				}
			}
			clear(sc.given)
		}
	}
	return s.checkAndWrite(ctx, ns, batch, req.GetFillOnly(), refused, written)
}
