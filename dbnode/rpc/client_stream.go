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

// WriteStream writes batches to one node over one WriteStream call,
// naming each series by a handle once the stream sent its ID
// (PAYLOAD_FORMAT_SERIES_HANDLES): a replica receives, copies and looks
// up a few bytes per known series instead of its ID, and the stream
// costs no call set-up per batch. A request waits for its answer before
// the next is sent, so one WriteStream serves one caller at a time; the
// session's host queue gives each of its workers one.
//
// Once Broken, a WriteStream fails every write: the caller takes a new
// one (with an empty handle table). A node older than WriteStream fails
// the first write with Unimplemented without having written anything:
// send the batch with Client.WriteBatch instead.
type WriteStream struct {
	c      *Client
	st     grpc.ClientStream
	cancel context.CancelFunc
	t      *handleTable
	seqs   *seqDefined // SERIES_SEQS numbers the stream defined
	broken error
}

// errStreamFull ends a stream whose handle table is full.
var errStreamFull = errors.New("rpc: write stream handle table full")

// NewWriteStream returns a stream to the node; the first write opens it.
func (c *Client) NewWriteStream() *WriteStream {
	return &WriteStream{c: c, t: newHandleTable(), seqs: &seqDefined{}}
}

// Broken says whether the stream can no longer be written to.
func (w *WriteStream) Broken() bool { return w.broken != nil }

// Close ends the stream.
func (w *WriteStream) Close() {
	if w.st != nil {
		_ = w.st.CloseSend()
		w.cancel()
		w.st = nil
	}
	if w.broken == nil {
		w.broken = errors.New("rpc: write stream closed")
	}
}

// WriteBatch is Client.WriteBatch over the stream. Errors are *Error
// (Method "WriteStream"); after an error the stream may be Broken (the
// call, not the batch, failed: the node went away, the context ended, the
// node is older than WriteStream) or not (the node refused this batch).
func (w *WriteStream) WriteBatch(ctx context.Context, ns string, samples []storage.Sample) (WriteResult, error) {
	res, _, err := w.do(ctx, func() (*writeRequest, error) { return encodeHandleRequest(ns, samples, w.t, requestPool) })
	return res, err
}

// WriteChunks writes the samples of chunks, in order, as one
// SERIES_SEQS request: their bytes as they are, shared with the requests
// of other streams, after the definitions of the series this stream has
// not sent yet. Errors are as WriteBatch's. A node that does not read
// SERIES_SEQS (older than it) refuses the request with InvalidArgument
// and writes nothing; so may a newer one refuse a series. Either way the
// stream is Broken afterwards (its definitions may not have been taken),
// and the caller sends the batch again with WriteBatch.
func (w *WriteStream) WriteChunks(ctx context.Context, ns string, chunks []*SeqChunk) (WriteResult, error) {
	entries := 0
	for _, c := range chunks {
		entries += len(c.entries)
	}
	if !w.seqs.room(entries) && w.st != nil {
		// A stream never defines more than a receiver takes: start a new
		// one, with nothing defined.
		w.Close()
		w.broken = nil
		w.t, w.seqs = newHandleTable(), &seqDefined{}
	}
	res, code, err := w.do(ctx, func() (*writeRequest, error) { return encodeSeqRequest(ns, chunks, w.seqs, requestPool) })
	if code == codes.InvalidArgument && w.broken == nil {
		w.Close()
		w.broken = errors.New("rpc: write stream's series numbers refused")
	}
	return res, err
}

// do sends the request encode builds and waits for its answer. code is
// the refusal code of an answered request (OK otherwise).
func (w *WriteStream) do(ctx context.Context, encode func() (*writeRequest, error)) (WriteResult, codes.Code, error) {
	if w.broken != nil {
		return WriteResult{}, codes.OK, w.fail(status.New(codes.Unavailable, w.broken.Error()), nil)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, w.c.timeout)
		defer cancel()
	}
	if w.st == nil {
		sctx, cancel := context.WithCancel(context.Background())
		stop := context.AfterFunc(ctx, cancel)
		st, err := w.c.conn.NewStream(sctx, &nodepb.Node_ServiceDesc.Streams[0], nodepb.Node_WriteStream_FullMethodName,
			grpc.ForceCodecV2(writeCodec{}))
		stop()
		if err != nil {
			cancel()
			return WriteResult{}, codes.OK, w.breakWith(ctx, err)
		}
		w.st, w.cancel = st, cancel
	}
	// The stream outlives the call's context: a context that ends while
	// the request is out cancels the stream, since its answer would come
	// out of turn.
	stop := context.AfterFunc(ctx, w.cancel)
	defer func() {
		if !stop() && w.broken == nil {
			// The context ended after the answer came, but its callback
			// cancelled the stream all the same: the next write needs a
			// new one.
			w.Close()
			w.broken = errors.New("rpc: write stream cancelled with its caller's context")
		}
	}()
	req, err := encode()
	if err != nil {
		w.Close()
		w.broken = err
		return WriteResult{}, codes.OK, err
	}
	err = w.st.SendMsg(req)
	req.free()
	if err != nil && !errors.Is(err, io.EOF) {
		return WriteResult{}, codes.OK, w.breakWith(ctx, err)
	}
	// On io.EOF the stream ended; RecvMsg says why.
	resp := new(nodepb.WriteBatchResponse)
	if err := w.st.RecvMsg(resp); err != nil {
		if errors.Is(err, io.EOF) {
			err = status.Error(codes.Unavailable, "write stream ended by the node")
		}
		return WriteResult{}, codes.OK, w.breakWith(ctx, err)
	}
	if w.t.full() || w.seqs.n >= maxStreamHandles {
		w.Close()
		w.broken = errStreamFull
	}
	if c := codes.Code(resp.GetErrorCode()); c != codes.OK {
		return WriteResult{}, c, w.fail(status.New(c, resp.GetErrorMessage()), resp.GetRefusedShards())
	}
	return writeResultFromPB(resp), codes.OK, nil
}

// breakWith ends the stream after err and returns it as an *Error; the
// context's own end wins over the cancellation it caused.
func (w *WriteStream) breakWith(ctx context.Context, err error) error {
	w.Close()
	w.broken = err
	if cerr := ctx.Err(); cerr != nil {
		return w.fail(status.Convert(ctxStatus(cerr)), nil)
	}
	st, ok := status.FromError(err)
	if !ok {
		st = status.New(Code(err), err.Error())
	}
	return w.fail(st, nil)
}

func (w *WriteStream) fail(st *status.Status, shards []uint32) error {
	return &Error{Addr: w.c.addr, Method: "WriteStream", Status: st, Shards: shards}
}
