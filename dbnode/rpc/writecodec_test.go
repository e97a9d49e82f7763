package rpc

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/dbnode/rpc/nodepb"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"pgregory.net/rapid"
)

// The request the client sends without copying is byte for byte what
// proto.Marshal makes of the same WriteBatchRequest, so a server of any
// version reads it as before; and it parses back to that request.
func TestWriteRequestWireForm(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		batch := genBatch.Draw(t, "batch")
		ns := rapid.SampledFrom([]string{"", "default", "a-namespace-with-a-longer-name-than-127-bytes-" + string(make([]byte, 100))}).Draw(t, "ns")
		fill := rapid.Bool().Draw(t, "fill")
		pb := &nodepb.WriteBatchRequest{Namespace: ns, Payload: appendPayload(nil, batch), FillOnly: fill}
		want, err := proto.MarshalOptions{Deterministic: true}.Marshal(pb)
		require.NoError(t, err)

		req, err := encodeWriteRequest(ns, batch, fill, mem.DefaultBufferPool())
		require.NoError(t, err)
		data, err := writeCodec{}.Marshal(req)
		require.NoError(t, err)
		got := data.Materialize()
		data.Free()
		require.Equal(t, want, got)

		var back nodepb.WriteBatchRequest
		require.NoError(t, proto.Unmarshal(got, &back))
		require.True(t, proto.Equal(pb, &back))
	})
}

// The codec hands a request's buffer over once; other messages go
// through gRPC's proto codec.
func TestWriteCodec(t *testing.T) {
	req, err := encodeWriteRequest("default", nil, false, mem.DefaultBufferPool())
	require.NoError(t, err)
	data, err := writeCodec{}.Marshal(req)
	require.NoError(t, err)
	data.Free()
	_, err = writeCodec{}.Marshal(req)
	require.ErrorIs(t, err, errMarshalledTwice)
	req.free() // nothing left to free

	resp := &nodepb.WriteBatchResponse{Written: 7, RejectMsg: "x"}
	data, err = writeCodec{}.Marshal(resp)
	require.NoError(t, err)
	var back nodepb.WriteBatchResponse
	require.NoError(t, writeCodec{}.Unmarshal(data, &back))
	require.True(t, proto.Equal(resp, &back))
	require.Equal(t, "proto", writeCodec{}.Name())
}
