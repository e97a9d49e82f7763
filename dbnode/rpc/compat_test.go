package rpc

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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
			codes.InvalidArgument, "write payload format 7 (7) unknown to this node: it reads PAYLOAD_FORMAT_SERIES_V1, PAYLOAD_FORMAT_HISTOGRAMS_V1 and PAYLOAD_FORMAT_BATCH_V1 only"},
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

func (d *countingDB) Write(ns string, b storage.Batch) error {
	d.written.Add(int64(b.Len()))
	return d.Database.Write(ns, b)
}

// mixedBatch is a batch of both kinds near now: float series f, histogram
// series h, and series both holding floats then histograms (a series that
// changed type), each sample at its own timestamp.
func mixedBatch() (storage.Batch, []byte, []byte, []byte) {
	f, h, both := seriesID("up", "host", "m"), seriesID("lat", "host", "m"), seriesID("req", "host", "m")
	t0 := time.Now().Add(-time.Minute).UnixMilli()
	var b storage.Batch
	for i := 0; i < 3; i++ {
		t := t0 + int64(i)*1000
		b.Floats = append(b.Floats, storage.Sample{ID: f, Shard: shardOf(f), T: t, V: float64(i)})
		b.Histograms = append(b.Histograms, storage.HistogramSample{ID: h, Shard: shardOf(h), T: t, H: rpcHist(i)})
	}
	b.Floats = append(b.Floats, storage.Sample{ID: both, Shard: shardOf(both), T: t0, V: 7})
	b.Histograms = append(b.Histograms, storage.HistogramSample{ID: both, Shard: shardOf(both), T: t0 + 1000, FH: rpcHist(5).ToFloat(nil)})
	return b, f, h, both
}

// requireMixedStored checks that db holds the samples of mixedBatch.
func requireMixedStored(t *testing.T, db *storage.Database, b storage.Batch, f, h, both []byte) {
	t.Helper()
	lo, hi := b.Floats[0].T, b.Floats[0].T+10_000
	count := func(id []byte) (floats, hists int) {
		it, err := db.Read(testNS, id, lo, hi)
		require.NoError(t, err)
		for it.Next() {
			floats++
		}
		require.NoError(t, it.Err())
		hit, err := db.ReadHistograms(testNS, id, lo, hi)
		require.NoError(t, err)
		for hit.Next() {
			hists++
		}
		require.NoError(t, hit.Err())
		return floats, hists
	}
	for _, c := range []struct {
		id            []byte
		floats, hists int
	}{{f, 3, 0}, {h, 0, 3}, {both, 1, 1}} {
		fl, hs := count(c.id)
		require.Equal(t, [2]int{c.floats, c.hists}, [2]int{fl, hs}, "series %s", c.id)
	}
}

// formatsSeen records the payload format of every WriteBatch request a
// server receives; with older set it first makes the server see BATCH_V1
// as a format it does not know, as a node of the previous version sees
// it (that node reads SERIES_V1 and HISTOGRAMS_V1 only).
type formatsSeen struct {
	older bool
	mu    sync.Mutex
	seen  []nodepb.PayloadFormat
}

func (fs *formatsSeen) intercept(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if r, ok := req.(*nodepb.WriteBatchRequest); ok {
		fs.mu.Lock()
		fs.seen = append(fs.seen, r.GetFormat())
		fs.mu.Unlock()
		if fs.older && r.GetFormat() == nodepb.PayloadFormat_PAYLOAD_FORMAT_BATCH_V1 {
			r.Format = 7
		}
	}
	return h(ctx, req)
}

func (fs *formatsSeen) take() []nodepb.PayloadFormat {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	s := fs.seen
	fs.seen = nil
	return s
}

// serveSeen is serve with fs watching the server's WriteBatch calls.
func serveSeen(t *testing.T, db Database, fs *formatsSeen) *Client {
	t.Helper()
	return serveWith(t, db, nil, ServerOptions{}, ClientOptions{}, grpc.UnaryInterceptor(fs.intercept))
}

const (
	fmtSeries = nodepb.PayloadFormat_PAYLOAD_FORMAT_SERIES_V1
	fmtHists  = nodepb.PayloadFormat_PAYLOAD_FORMAT_HISTOGRAMS_V1
	fmtBatch  = nodepb.PayloadFormat_PAYLOAD_FORMAT_BATCH_V1
)

// TestWriteBatchOfEveryKind: a batch of floats and histograms goes to a
// node of this version as one BATCH_V1 request, and every sample of it is
// stored; a batch of floats alone still goes as SERIES_V1, which every
// version reads.
func TestWriteBatchOfEveryKind(t *testing.T) {
	db := openStorage(t, commitlog.ModeAsync)
	fs := &formatsSeen{}
	c := serveSeen(t, db, fs)
	b, f, h, both := mixedBatch()
	res, err := c.Write(context.Background(), testNS, b)
	require.NoError(t, err)
	require.Equal(t, WriteResult{Written: b.Len()}, res)
	require.Equal(t, []nodepb.PayloadFormat{fmtBatch}, fs.take())
	requireMixedStored(t, db, b, f, h, both)

	_, err = c.Write(context.Background(), testNS, storage.Batch{Floats: b.Floats})
	require.NoError(t, err)
	require.Equal(t, []nodepb.PayloadFormat{fmtSeries}, fs.take())

	// An empty payload is a batch without samples, in this format too.
	var resp nodepb.WriteBatchResponse
	require.NoError(t, invokeRaw(t, c, nodepb.Node_WriteBatch_FullMethodName,
		marshal(t, &nodepb.WriteBatchRequest{Namespace: testNS, Format: fmtBatch}), &resp))
	require.Zero(t, resp.GetWritten())
}

// TestNewerSenderFallsBackForOlderNode: a node of the previous version
// refuses BATCH_V1 as a format it does not know and writes nothing; the
// sender then writes the same batch in the formats that node reads
// (SERIES_V1, then HISTOGRAMS_V1), every sample is stored, and further
// writes to it skip BATCH_V1 (no refused request each time).
func TestNewerSenderFallsBackForOlderNode(t *testing.T) {
	db := &countingDB{Database: openStorage(t, commitlog.ModeAsync)}
	fs := &formatsSeen{older: true}
	c := serveSeen(t, db, fs)
	b, f, h, both := mixedBatch()
	res, err := c.Write(context.Background(), testNS, b)
	require.NoError(t, err)
	require.Equal(t, WriteResult{Written: b.Len()}, res)
	require.Equal(t, []nodepb.PayloadFormat{fmtBatch, fmtSeries, fmtHists}, fs.take())
	require.EqualValues(t, b.Len(), db.written.Load(), "the refused BATCH_V1 wrote nothing")
	requireMixedStored(t, db.Database.(*storage.Database), b, f, h, both)

	res, err = c.WriteFill(context.Background(), testNS, b)
	require.NoError(t, err)
	require.Equal(t, WriteResult{Written: b.Len()}, res)
	require.Equal(t, []nodepb.PayloadFormat{fmtSeries, fmtHists}, fs.take())
}

// TestNewNodeReadsOlderHistogramPayload: a node of the previous version
// sends native histograms as HISTOGRAMS_V1 (marshalled as it marshals
// them); this node stores them.
func TestNewNodeReadsOlderHistogramPayload(t *testing.T) {
	db := openStorage(t, commitlog.ModeAsync)
	c := serve(t, db, nil, ServerOptions{}, ClientOptions{})
	b, _, h, _ := mixedBatch()
	hs := b.Histograms[:3]
	payload, err := appendHistogramPayload(nil, hs)
	require.NoError(t, err)
	var resp nodepb.WriteBatchResponse
	require.NoError(t, invokeRaw(t, c, nodepb.Node_WriteBatch_FullMethodName,
		marshal(t, &nodepb.WriteBatchRequest{Namespace: testNS, Format: fmtHists, Payload: payload}), &resp))
	require.EqualValues(t, 3, resp.GetWritten())
	it, err := db.ReadHistograms(testNS, h, hs[0].T, hs[2].T)
	require.NoError(t, err)
	n := 0
	for it.Next() {
		_, got := it.AtHistogram(nil)
		require.Equal(t, hs[n].H.Count, got.Count)
		n++
	}
	require.NoError(t, it.Err())
	require.Equal(t, 3, n)
}

// TestBadBatchRefusedWhole: a BATCH_V1 request with one bad series (a
// histogram sent under the wrong shard) is refused with InvalidArgument,
// not taken for an unknown format (no fallback), and none of its floats
// are written either; a truncated one says which section is malformed.
func TestBadBatchRefusedWhole(t *testing.T) {
	db := &countingDB{Database: openStorage(t, commitlog.ModeAsync)}
	fs := &formatsSeen{}
	c := serveSeen(t, db, fs)
	b, _, _, _ := mixedBatch()
	b.Histograms[1].Shard++
	_, err := c.Write(context.Background(), testNS, b)
	require.Equal(t, codes.InvalidArgument, Code(err), "%v", err)
	require.ErrorContains(t, err, "hashes to shard")
	require.Equal(t, []nodepb.PayloadFormat{fmtBatch}, fs.take())
	require.Zero(t, db.written.Load())

	b.Histograms[1].Shard--
	payload, err := appendBatchPayload(nil, b)
	require.NoError(t, err)
	for _, cut := range []struct {
		n       int
		section string
	}{{len(payload) - 2, "histogram section"}, {5, "float section"}} {
		err = invokeRaw(t, c, nodepb.Node_WriteBatch_FullMethodName,
			marshal(t, &nodepb.WriteBatchRequest{Namespace: testNS, Format: fmtBatch, Payload: payload[:cut.n]}), &nodepb.WriteBatchResponse{})
		require.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)
		require.ErrorContains(t, err, cut.section)
	}
	require.Zero(t, db.written.Load())
}

// TestBatchPayloadRoundTrip: BATCH_V1 gives back every sample of both
// kinds, in order, and an empty batch.
func TestBatchPayloadRoundTrip(t *testing.T) {
	b, _, _, _ := mixedBatch()
	for _, in := range []storage.Batch{b, {Floats: b.Floats}, {Histograms: b.Histograms}, {}} {
		p, err := appendBatchPayload(nil, in)
		require.NoError(t, err)
		got, err := decodeBatchPayload(p, nil)
		require.NoError(t, err)
		require.Equal(t, len(in.Floats), len(got.Floats))
		require.Equal(t, len(in.Histograms), len(got.Histograms))
		for i := range in.Floats {
			require.Equal(t, in.Floats[i], got.Floats[i])
		}
		for i := range in.Histograms {
			w, g := in.Histograms[i], got.Histograms[i]
			require.Equal(t, [3]any{string(w.ID), w.Shard, w.T}, [3]any{string(g.ID), g.Shard, g.T})
			if w.H != nil {
				require.Equal(t, w.H.Count, g.H.Count)
			} else {
				require.Equal(t, w.FH.Count, g.FH.Count)
			}
		}
	}
}

// FuzzBatchPayload: a BATCH_V1 decoder never panics, yields no more than
// the payload's size warrants, and what it decodes encodes back to a
// payload that decodes to the same samples.
func FuzzBatchPayload(f *testing.F) {
	b, _, _, _ := mixedBatch()
	p, err := appendBatchPayload(nil, b)
	require.NoError(f, err)
	f.Add(p)
	f.Add([]byte{0})
	f.Add([]byte{2, 0, 0, 1, 'x', 0, 0})
	f.Fuzz(func(t *testing.T, in []byte) {
		got, err := decodeBatchPayload(in, nil)
		if err != nil {
			return
		}
		require.LessOrEqual(t, got.Len(), 8*len(in))
		again, err := appendBatchPayload(nil, got)
		require.NoError(t, err)
		back, err := decodeBatchPayload(again, nil)
		require.NoError(t, err)
		require.Equal(t, got.Floats, back.Floats)
		require.Equal(t, len(got.Histograms), len(back.Histograms))
		for i := range got.Histograms {
			g, w := got.Histograms[i], back.Histograms[i]
			require.Equal(t, [3]any{string(g.ID), g.Shard, g.T}, [3]any{string(w.ID), w.Shard, w.T})
		}
	})
}
