package rpc

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/dbnode/commitlog"
	"github.com/tessera-tsdb/tessera/dbnode/rpc/nodepb"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// rawCodec sends requests as given bytes, as a node of another version
// might have marshalled them, and reads answers as proto. It is named
// "proto", so the server decodes with its ordinary codec.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(v.([]byte))}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	return proto.Unmarshal(data.Materialize(), v.(proto.Message))
}

// invokeRaw calls method on the server behind c with the request bytes b.
func invokeRaw(t *testing.T, c *Client, method string, b []byte, resp proto.Message) error {
	t.Helper()
	return c.conn.Invoke(context.Background(), method, b, resp, grpc.ForceCodecV2(rawCodec{}))
}

func marshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	require.NoError(t, err)
	return b
}

// TestNewerSenderUnknownFieldsIgnored: a node one version newer sends a
// WriteBatchRequest with fields this node does not know (a varint, a
// length-delimited and a fixed64 field under numbers the .proto does not
// use); the write is applied all the same, and so is a Fetch carrying one.
func TestNewerSenderUnknownFieldsIgnored(t *testing.T) {
	db := openStorage(t, commitlog.ModeAsync)
	c := serve(t, db, nil, ServerOptions{}, ClientOptions{})
	id := seriesID("cpu", "host", "newer")
	samples := samplesNearNow(3, 7)
	req := &WriteRequest{Namespace: testNS, Series: []WriteSeries{writeSeries(id, samples)}}

	b := marshal(t, &nodepb.WriteBatchRequest{Namespace: testNS, Payload: appendPayload(nil, req.batch())})
	b = protowire.AppendTag(b, 99, protowire.VarintType)
	b = protowire.AppendVarint(b, 12345)
	b = protowire.AppendTag(b, 100, protowire.BytesType)
	b = protowire.AppendBytes(b, []byte("a field from the future"))
	b = protowire.AppendTag(b, 2047, protowire.Fixed64Type)
	b = protowire.AppendFixed64(b, 1)

	var resp nodepb.WriteBatchResponse
	require.NoError(t, invokeRaw(t, c, nodepb.Node_WriteBatch_FullMethodName, b, &resp))
	require.EqualValues(t, 3, resp.GetWritten())

	fb := marshal(t, (&FetchRequest{Namespace: testNS, IDs: [][]byte{id}, Start: samples[0].T, End: samples[2].T}).toPB())
	fb = protowire.AppendTag(fb, 77, protowire.BytesType)
	fb = protowire.AppendString(fb, "consistency hint")
	var fr nodepb.FetchResponse
	require.NoError(t, invokeRaw(t, c, nodepb.Node_Fetch_FullMethodName, fb, &fr))
	require.Len(t, fr.GetSeries(), 1)
	require.Equal(t, samples, decodeStream(t, fr.GetSeries()[0].GetStream()))
}

// TestOlderSenderMissingFieldsDefault: a node one version older sends
// messages without fields this version has. A WriteBatchRequest without
// format means SERIES_V1; a FetchTaggedRequest without shards means every
// shard the node may read; a FetchBlockRequest without max_bytes means the
// server's page size.
func TestOlderSenderMissingFieldsDefault(t *testing.T) {
	db := openStorage(t, commitlog.ModeAsync)
	c := serve(t, db, nil, ServerOptions{}, ClientOptions{})
	id := seriesID("cpu", "host", "older")
	samples := samplesNearNow(2, 1)
	batch := (&WriteRequest{Series: []WriteSeries{writeSeries(id, samples)}}).batch()

	// Hand-built: namespace (1) and payload (3), no format (2).
	var b []byte
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	b = protowire.AppendString(b, testNS)
	b = protowire.AppendTag(b, 3, protowire.BytesType)
	b = protowire.AppendBytes(b, appendPayload(nil, batch))
	var resp nodepb.WriteBatchResponse
	require.NoError(t, invokeRaw(t, c, nodepb.Node_WriteBatch_FullMethodName, b, &resp))
	require.EqualValues(t, 2, resp.GetWritten())

	// Namespace, one matcher, start, end: no shards (5).
	b = nil
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	b = protowire.AppendString(b, testNS)
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	b = protowire.AppendBytes(b, marshal(t, &nodepb.Matcher{Name: "host", Value: "older"}))
	b = protowire.AppendTag(b, 3, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(samples[0].T))
	b = protowire.AppendTag(b, 4, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(samples[1].T))
	var fr nodepb.FetchResponse
	require.NoError(t, invokeRaw(t, c, nodepb.Node_FetchTagged_FullMethodName, b, &fr))
	require.Len(t, fr.GetSeries(), 1)
	require.Equal(t, samples, decodeStream(t, fr.GetSeries()[0].GetStream()))

	// An empty HealthRequest is what every version sends.
	var hr nodepb.HealthResponse
	require.NoError(t, invokeRaw(t, c, nodepb.Node_Health_FullMethodName, nil, &hr))
	require.True(t, hr.GetReady())
}

// TestBadWriteRequests: what a node cannot read is refused whole with a
// status that says why, nothing is written, and the node keeps serving.
func TestBadWriteRequests(t *testing.T) {
	db := &countingDB{Database: openStorage(t, commitlog.ModeAsync)}
	c := serve(t, db, nil, ServerOptions{}, ClientOptions{})
	good := appendPayload(nil, (&WriteRequest{Series: []WriteSeries{writeSeries(seriesID("a"), samplesNearNow(2, 1))}}).batch())

	cases := []struct {
		name string
		req  []byte
		code codes.Code
		msg  string
	}{
		{"unknown payload format", marshal(t, &nodepb.WriteBatchRequest{Namespace: testNS, Format: 7, Payload: good}),
			codes.InvalidArgument, "write payload format 7 (7) unknown to this node: it reads PAYLOAD_FORMAT_SERIES_V1 and PAYLOAD_FORMAT_HISTOGRAMS_V1 only"},
		{"truncated payload", marshal(t, &nodepb.WriteBatchRequest{Namespace: testNS, Payload: good[:len(good)-3]}),
			codes.InvalidArgument, "malformed write payload (format PAYLOAD_FORMAT_SERIES_V1) at byte"},
		{"trailing payload bytes", marshal(t, &nodepb.WriteBatchRequest{Namespace: testNS, Payload: append(append([]byte{}, good...), 0)}),
			codes.InvalidArgument, "1 trailing bytes"},
		{"not protobuf", []byte{0xff, 0xff, 0xff}, codes.Internal, "unmarshal"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := invokeRaw(t, c, nodepb.Node_WriteBatch_FullMethodName, tc.req, &nodepb.WriteBatchResponse{})
			require.Equal(t, tc.code, status.Code(err), "%v", err)
			require.ErrorContains(t, err, tc.msg)
		})
	}
	require.Zero(t, db.written.Load())

	// Still serving.
	var resp nodepb.WriteBatchResponse
	require.NoError(t, invokeRaw(t, c, nodepb.Node_WriteBatch_FullMethodName,
		marshal(t, &nodepb.WriteBatchRequest{Namespace: testNS, Payload: good}), &resp))
	require.EqualValues(t, 2, resp.GetWritten())
}

// countingDB counts the samples that reach storage.
type countingDB struct {
	Database
	written atomic.Int64
}

func (d *countingDB) WriteBatch(ns string, batch []storage.Sample) error {
	d.written.Add(int64(len(batch)))
	return d.Database.WriteBatch(ns, batch)
}
