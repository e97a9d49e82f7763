package rpc

import (
	"context"
	"math"
	"net"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/dbnode/commitlog"
	"github.com/tessera-tsdb/tessera/dbnode/rpc/nodepb"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
	"github.com/tessera-tsdb/tessera/ident"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// fetchOne reads back one series' samples through Fetch.
func fetchOne(t *testing.T, c *Client, id []byte) []Sample {
	t.Helper()
	fr, err := c.Fetch(context.Background(), &FetchRequest{Namespace: testNS, IDs: [][]byte{id},
		Start: time.Now().Add(-time.Hour).UnixMilli(), End: time.Now().UnixMilli()})
	require.NoError(t, err)
	require.Len(t, fr.Series, 1)
	return decodeStream(t, fr.Series[0].Stream)
}

// TestWriteStreamWrites: batches written over one stream, the later ones
// naming their series by handle, are stored as sent.
func TestWriteStreamWrites(t *testing.T) {
	db := &countingDB{Database: openStorage(t, commitlog.ModeSync)}
	c := serve(t, db, nil, ServerOptions{}, ClientOptions{})
	ws := c.NewWriteStream()
	defer ws.Close()
	ctx := context.Background()

	ids := idsInDistinctShards(3)
	want := map[string][]Sample{}
	all := samplesNearNow(12, 1)
	for round := 0; round < 4; round++ {
		var req WriteRequest
		req.Namespace = testNS
		for k, id := range ids {
			smp := all[round*3 : round*3+3]
			smp = []Sample{{T: smp[k].T, V: smp[k].V + float64(k)}}
			req.Series = append(req.Series, writeSeries(id, smp))
			want[string(id)] = append(want[string(id)], smp...)
		}
		res, err := ws.WriteBatch(ctx, testNS, req.batch())
		require.NoError(t, err)
		require.Equal(t, WriteResult{Written: 3}, res)
		require.False(t, ws.Broken())
	}
	require.EqualValues(t, 12, db.written.Load())
	for _, id := range ids {
		got := fetchOne(t, c, id)
		require.Len(t, got, len(want[string(id)]))
		for i, w := range want[string(id)] {
			require.Equal(t, w.T, got[i].T)
			require.Equal(t, math.Float64bits(w.V), math.Float64bits(got[i].V))
		}
	}
}

// TestWriteStreamRefusalKeepsStream: a batch refused on its own (a shard
// the node does not own, a series HTTP would refuse, an unknown
// namespace) is answered with the same status WriteBatch gives, writes
// nothing, and the stream carries on, handles included.
func TestWriteStreamRefusalKeepsStream(t *testing.T) {
	ids := idsInDistinctShards(2)
	db := &countingDB{Database: openStorage(t, commitlog.ModeAsync)}
	c := serve(t, db, ownsOnly(shardOf(ids[0])), ServerOptions{}, ClientOptions{})
	ws := c.NewWriteStream()
	defer ws.Close()
	ctx := context.Background()
	smp := samplesNearNow(3, 1)
	one := func(id []byte, s Sample) []storage.Sample {
		return []storage.Sample{{ID: id, Shard: shardOf(id), T: s.T, V: s.V}}
	}

	res, err := ws.WriteBatch(ctx, testNS, one(ids[0], smp[0]))
	require.NoError(t, err)
	require.Equal(t, 1, res.Written)

	_, err = ws.WriteBatch(ctx, testNS, append(one(ids[0], smp[1]), one(ids[1], smp[1])...))
	require.Equal(t, codes.FailedPrecondition, Code(err), "%v", err)
	require.ErrorContains(t, err, "not owned by node2")
	var rerr *Error
	require.ErrorAs(t, err, &rerr)
	require.Equal(t, []uint32{shardOf(ids[1])}, rerr.Shards)
	require.Equal(t, "WriteStream", rerr.Method)
	require.False(t, ws.Broken())

	noName := ident.FromLabels(labels.FromStrings("job", "api")) // no __name__
	_, err = ws.WriteBatch(ctx, testNS, []storage.Sample{{ID: noName, Shard: shardOf(noName), T: smp[1].T, V: 1}})
	require.Equal(t, codes.InvalidArgument, Code(err), "%v", err)
	require.ErrorContains(t, err, "__name__")
	require.False(t, ws.Broken())

	_, err = ws.WriteBatch(ctx, "nope", one(ids[0], smp[1]))
	require.Equal(t, codes.InvalidArgument, Code(err), "%v", err)
	require.False(t, ws.Broken())
	require.EqualValues(t, 1, db.written.Load(), "refused batches wrote nothing")

	// The handle ids[0] got in the first batch still works.
	res, err = ws.WriteBatch(ctx, testNS, one(ids[0], smp[2]))
	require.NoError(t, err)
	require.Equal(t, 1, res.Written)
	require.Len(t, fetchOne(t, c, ids[0]), 2)
}

// TestWriteStreamMalformedEndsStream: a handle payload the node cannot
// decode ends the stream with InvalidArgument naming the format (the
// handles it defined are lost); nothing is written and the node serves a
// new stream.
func TestWriteStreamMalformedEndsStream(t *testing.T) {
	db := &countingDB{Database: openStorage(t, commitlog.ModeAsync)}
	c := serve(t, db, nil, ServerOptions{}, ClientOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := c.conn.NewStream(ctx, &nodepb.Node_ServiceDesc.Streams[0], nodepb.Node_WriteStream_FullMethodName,
		grpc.ForceCodecV2(rawCodec{}))
	require.NoError(t, err)
	// Names handle 0, which the stream never defined.
	bad := marshal(t, &nodepb.WriteBatchRequest{Namespace: testNS, Format: nodepb.PayloadFormat_PAYLOAD_FORMAT_SERIES_HANDLES,
		Payload: []byte{1, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0}})
	require.NoError(t, st.SendMsg(bad))
	err = st.RecvMsg(&nodepb.WriteBatchResponse{})
	require.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)
	require.ErrorContains(t, err, "malformed write payload (format PAYLOAD_FORMAT_SERIES_HANDLES)")
	require.ErrorContains(t, err, "handle 0 not defined")
	require.Zero(t, db.written.Load())

	ws := c.NewWriteStream()
	defer ws.Close()
	id := seriesID("a")
	_, err = ws.WriteBatch(ctx, testNS, []storage.Sample{{ID: id, Shard: shardOf(id), T: samplesNearNow(1, 0)[0].T, V: 1}})
	require.NoError(t, err)
}

// TestWriteBatchRefusesHandles: handles only mean something within a
// stream, so WriteBatch refuses the handle format whole.
func TestWriteBatchRefusesHandles(t *testing.T) {
	db := &countingDB{Database: openStorage(t, commitlog.ModeAsync)}
	c := serve(t, db, nil, ServerOptions{}, ClientOptions{})
	err := invokeRaw(t, c, nodepb.Node_WriteBatch_FullMethodName,
		marshal(t, &nodepb.WriteBatchRequest{Namespace: testNS, Format: nodepb.PayloadFormat_PAYLOAD_FORMAT_SERIES_HANDLES,
			Payload: []byte{1, 1, 3, 1, 'a', 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0}}), &nodepb.WriteBatchResponse{})
	require.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)
	require.ErrorContains(t, err, "only read on WriteStream")
	require.Zero(t, db.written.Load())
}

// TestWriteStreamDeadlineBreaksStream: a write whose context ends while
// the node has not answered fails with DeadlineExceeded and breaks the
// stream (a late answer would come out of turn); a new stream works.
func TestWriteStreamDeadlineBreaksStream(t *testing.T) {
	block := make(chan struct{})
	db := &faultyDB{Database: openStorage(t, commitlog.ModeAsync), block: block}
	c := serve(t, db, nil, ServerOptions{}, ClientOptions{})
	ws := c.NewWriteStream()
	defer ws.Close()
	id := seriesID("a")
	batch := []storage.Sample{{ID: id, Shard: shardOf(id), T: samplesNearNow(1, 0)[0].T, V: 1}}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := ws.WriteBatch(ctx, testNS, batch)
	require.Equal(t, codes.DeadlineExceeded, Code(err), "%v", err)
	require.True(t, ws.Broken())
	_, err = ws.WriteBatch(context.Background(), testNS, batch)
	require.Error(t, err, "a broken stream fails every write")

	db.mu.Lock()
	db.block = nil
	db.mu.Unlock()
	close(block)
	ws2 := c.NewWriteStream()
	defer ws2.Close()
	_, err = ws2.WriteBatch(context.Background(), testNS, batch)
	require.NoError(t, err)
}

// oldNodeDesc is the node service as a node older than WriteStream
// registers it: the same unary methods, no streams.
func oldNodeDesc() *grpc.ServiceDesc {
	d := nodepb.Node_ServiceDesc
	d.Streams = nil
	return &d
}

// TestWriteStreamToOlderNode: a node that predates WriteStream answers
// Unimplemented to the first write of a stream and writes nothing, so the
// sender can send the batch with WriteBatch, which it reads.
func TestWriteStreamToOlderNode(t *testing.T) {
	db := &countingDB{Database: openStorage(t, commitlog.ModeAsync)}
	srv := NewServer(db, nil, ServerOptions{})
	g := grpc.NewServer(srv.GRPCServerOptions()...)
	g.RegisterService(oldNodeDesc(), service{s: srv})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan struct{})
	go func() { defer close(done); _ = g.Serve(ln) }()
	c, err := Dial(ln.Addr().String(), ClientOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close()); g.Stop(); <-done })

	id := seriesID("a")
	batch := []storage.Sample{{ID: id, Shard: shardOf(id), T: samplesNearNow(1, 0)[0].T, V: 1}}
	ws := c.NewWriteStream()
	defer ws.Close()
	_, err = ws.WriteBatch(context.Background(), testNS, batch)
	require.Equal(t, codes.Unimplemented, Code(err), "%v", err)
	require.True(t, ws.Broken())
	require.Zero(t, db.written.Load())

	res, err := c.WriteBatch(context.Background(), testNS, batch)
	require.NoError(t, err)
	require.Equal(t, 1, res.Written)
}

// refsSeenDB records, per WriteBatch, how many samples arrived with a
// storage ref.
type refsSeenDB struct {
	Database
	withRef []int
}

func (d *refsSeenDB) WriteBatch(ns string, batch []storage.Sample) error {
	n := 0
	for _, s := range batch {
		if s.Ref != 0 {
			n++
		}
	}
	d.withRef = append(d.withRef, n)
	return d.Database.WriteBatch(ns, batch)
}

// TestWriteStreamRemembersRefs: after a stream's first write of a series
// its handle carries the storage series, so the next write of it arrives
// at storage with its ref (no lookup, no validation); a write in another
// namespace does not take it.
func TestWriteStreamRemembersRefs(t *testing.T) {
	db := &refsSeenDB{Database: openStorage(t, commitlog.ModeAsync)}
	srv := NewServer(db, nil, ServerOptions{})
	tab, sender := &streamTable{}, newHandleTable()
	sc := &streamScratch{}
	ids := idsInDistinctShards(2)
	smp := samplesNearNow(3, 1)
	send := func(ns string, k int) {
		t.Helper()
		var batch []storage.Sample
		for _, id := range ids {
			batch = append(batch, storage.Sample{ID: id, Shard: shardOf(id), T: smp[k].T, V: smp[k].V},
				storage.Sample{ID: id, Shard: shardOf(id), T: smp[k].T + 1, V: smp[k].V})
		}
		var refused []uint32
		res, err := srv.writeStreamed(context.Background(), wireRequest(t, ns, batch, sender), tab, sc, &refused)
		require.NoError(t, err)
		require.Equal(t, 4, res.Written)
	}
	send(testNS, 0)
	send(testNS, 1)
	send("noindex", 2)
	require.Equal(t, []int{0, 4, 0}, db.withRef)
	for i := range tab.series {
		require.NotNil(t, tab.series[i].ref)
		require.Equal(t, "noindex", tab.series[i].ns, "the last write's namespace")
	}
}

// TestWriteStreamOutlivesCallerContexts: a write's context ending after
// the write returned does not touch the stream, which carries the next
// write.
func TestWriteStreamOutlivesCallerContexts(t *testing.T) {
	db := &countingDB{Database: openStorage(t, commitlog.ModeAsync)}
	c := serve(t, db, nil, ServerOptions{}, ClientOptions{})
	ws := c.NewWriteStream()
	defer ws.Close()
	id := seriesID("a")
	smp := samplesNearNow(3, 1)
	for _, s := range smp {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		_, err := ws.WriteBatch(ctx, testNS, []storage.Sample{{ID: id, Shard: shardOf(id), T: s.T, V: s.V}})
		cancel()
		require.NoError(t, err)
		require.False(t, ws.Broken())
	}
	require.EqualValues(t, 3, db.written.Load())
}
