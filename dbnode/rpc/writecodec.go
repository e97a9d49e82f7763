package rpc

import (
	"errors"
	"fmt"

	"github.com/tessera-tsdb/tessera/dbnode/storage"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
)

// A coordinator sends every batch it replicates to each remote replica.
// Built as a nodepb.WriteBatchRequest, the payload would be encoded into
// one buffer and copied again by proto.Marshal into gRPC's; instead the
// request is encoded once, in its wire form, straight into a buffer of
// gRPC's pool, and writeCodec hands that buffer to gRPC, which frees it
// when the bytes are sent. The bytes are exactly what proto.Marshal makes
// of the same WriteBatchRequest (TestWriteRequestWireForm), so servers and
// the rolling-upgrade rules do not see the difference.

// writeRequest is a WriteBatchRequest in wire form, in one buffer or, for
// a SERIES_SEQS request, in several (its own header and definitions, then
// the chunks it shares with the requests to other replicas). Its buffers
// move to gRPC when the codec marshals it; free releases them if that
// never happened (the call failed first).
type writeRequest struct {
	bufs mem.BufferSlice
}

func (w *writeRequest) free() {
	if w.bufs != nil {
		w.bufs.Free()
		w.bufs = nil
	}
}

// encodeWriteRequest builds WriteBatchRequest{Namespace: ns, Format:
// SERIES_V1, Payload: the payload of samples} in wire form. SERIES_V1 is
// format 0, proto3's default, which proto.Marshal does not send either.
func encodeWriteRequest(ns string, samples []storage.Sample, fill bool, pool mem.BufferPool) (*writeRequest, error) {
	plen, entries := payloadLen(samples)
	n := protowire.SizeTag(3) + protowire.SizeBytes(plen)
	if ns != "" {
		n += protowire.SizeTag(1) + protowire.SizeBytes(len(ns))
	}
	if fill {
		n += protowire.SizeTag(16) + protowire.SizeVarint(1)
	}
	buf := pool.Get(n)
	b := (*buf)[:0]
	if ns != "" {
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendString(b, ns)
	}
	b = protowire.AppendTag(b, 3, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(plen))
	b = appendPayloadEntries(b, samples, entries)
	if fill { // fill_only = 16, after 3 as proto.Marshal orders fields
		b = protowire.AppendTag(b, 16, protowire.VarintType)
		b = protowire.AppendVarint(b, 1)
	}
	if len(b) != n {
		pool.Put(buf)
		return nil, fmt.Errorf("rpc: write request encoded to %d bytes, expected %d", len(b), n)
	}
	*buf = b
	return &writeRequest{bufs: mem.BufferSlice{mem.NewBuffer(buf, pool)}}, nil
}

// writeCodec is gRPC's proto codec, except that it sends a *writeRequest
// as it is. It is forced on WriteBatch calls only (grpc.ForceCodecV2; its
// name is the proto codec's, so the content type is unchanged).
type writeCodec struct{}

var protoCodec = encoding.GetCodecV2(grpcproto.Name)

var errMarshalledTwice = errors.New("rpc: write request marshalled twice")

func (writeCodec) Marshal(v any) (mem.BufferSlice, error) {
	w, ok := v.(*writeRequest)
	if !ok {
		return protoCodec.Marshal(v)
	}
	if w.bufs == nil {
		return nil, errMarshalledTwice
	}
	b := w.bufs
	w.bufs = nil
	return b, nil
}

func (writeCodec) Unmarshal(data mem.BufferSlice, v any) error { return protoCodec.Unmarshal(data, v) }

func (writeCodec) Name() string { return protoCodec.Name() }
