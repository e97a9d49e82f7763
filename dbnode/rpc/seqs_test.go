package rpc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/dbnode/commitlog"
	"github.com/tessera-tsdb/tessera/dbnode/rpc/nodepb"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
)

// refdBatch writes one sample of each id into a coordinator's own
// storage, as a coordinator holding the series does, and returns the
// samples carrying their storage refs (so their series numbers), at
// timestamps from t0.
func refdBatch(t testing.TB, db *storage.Database, ids [][]byte, t0 int64) []storage.Sample {
	t.Helper()
	batch := make([]storage.Sample, len(ids))
	for i, id := range ids {
		batch[i] = storage.Sample{ID: id, Shard: shardOf(id), T: t0, V: float64(i) + 0.5}
	}
	require.NoError(t, db.WriteBatch(testNS, batch))
	for i := range batch {
		require.NotZero(t, batch[i].Ref.Seq())
	}
	return batch
}

// seqWire encodes chunks as one SERIES_SEQS request over d and
// unmarshals it back with proto, as a receiver's codec does.
func seqWire(t testing.TB, ns string, chunks []*SeqChunk, d *seqDefined) *nodepb.WriteBatchRequest {
	t.Helper()
	w, err := encodeSeqRequest(ns, chunks, d, mem.DefaultBufferPool())
	require.NoError(t, err)
	defer w.free()
	var req nodepb.WriteBatchRequest
	require.NoError(t, proto.Unmarshal(w.bufs.Materialize(), &req))
	return &req
}

// TestSeqPayloadRoundTrip: a chunk encoded once decodes on two streams
// to the batch sent, in order; each stream's first request defines the
// series, later ones send only numbers; an inline (refless) series
// travels with its ID every time; chunks concatenate.
func TestSeqPayloadRoundTrip(t *testing.T) {
	coord := openStorage(t, commitlog.ModeAsync)
	ids := idsInDistinctShards(3)
	now := samplesNearNow(1, 0)[0].T
	batch := refdBatch(t, coord, ids, now)
	// a's two samples form one entry; b comes back; c has no ref.
	batch = []storage.Sample{batch[0], {ID: ids[0], Shard: batch[0].Shard, T: now + 10, V: 2, Ref: batch[0].Ref},
		batch[1], {ID: ids[2], Shard: shardOf(ids[2]), T: now - 5, V: -0.0}, {ID: ids[1], Shard: batch[1].Shard, T: now + 1, V: 7, Ref: batch[1].Ref}}
	c := EncodeSeqChunk(batch)
	require.NotNil(t, c)
	require.Equal(t, 5, c.Samples())

	for stream := 0; stream < 2; stream++ {
		d, x := &seqDefined{}, &seqIndex{}
		first := seqWire(t, testNS, []*SeqChunk{c}, d)
		require.Equal(t, nodepb.PayloadFormat_PAYLOAD_FORMAT_SERIES_SEQS, first.GetFormat())
		require.Equal(t, testNS, first.GetNamespace())
		got, hs, err := decodeSeqPayload(first.GetPayload(), testNS, x, nil, nil)
		require.NoError(t, err)
		requireSamples(t, batch, got)
		require.Len(t, x.series, 2, "a and b defined, c inline")
		require.Equal(t, []uint32{0, 0, 1, noHandle, 1}, hs)
		require.Equal(t, 1, bytes.Count(first.GetPayload(), ids[0]), "a's ID once")

		second := seqWire(t, testNS, []*SeqChunk{c, c}, d)
		require.False(t, bytes.Contains(second.GetPayload(), ids[0]))
		require.False(t, bytes.Contains(second.GetPayload(), ids[1]))
		require.Equal(t, 2, bytes.Count(second.GetPayload(), ids[2]), "c inline in both chunks")
		got, _, err = decodeSeqPayload(second.GetPayload(), testNS, x, nil, nil)
		require.NoError(t, err)
		requireSamples(t, append(append([]storage.Sample(nil), batch...), batch...), got)
		require.Len(t, x.series, 2)
	}

	// The chunk gives the batch back, without aliasing the caller's
	// buffers: the inline ID is its own copy, the others the series'.
	inlineID := batch[3].ID
	batch[3].ID = append([]byte(nil), inlineID...)
	clear(inlineID)
	back := c.AppendSamples(nil)
	requireSamples(t, batch, back)
	id0 := storage.SeriesID(batch[0].Ref)
	require.NotNil(t, id0)
	require.Same(t, &id0[0], &back[0].ID[0])
	require.Equal(t, batch[2].Ref, back[2].Ref)
	require.Zero(t, back[3].Ref)

	// The chunk's bytes go out as they are, in every request.
	w, err := encodeSeqRequest(testNS, []*SeqChunk{c}, &seqDefined{}, mem.DefaultBufferPool())
	require.NoError(t, err)
	require.Len(t, w.bufs, 2)
	require.Same(t, &c.body[0], &w.bufs[1].ReadOnlyData()[0])
	w.free()
}

// TestEncodeSeqChunkNotWorthIt: a batch mostly without refs (a
// coordinator not holding the series) is left to SERIES_HANDLES.
func TestEncodeSeqChunkNotWorthIt(t *testing.T) {
	ids := idsInDistinctShards(3)
	var batch []storage.Sample
	for _, id := range ids {
		batch = append(batch, storage.Sample{ID: id, Shard: shardOf(id), T: 1, V: 1})
	}
	require.Nil(t, EncodeSeqChunk(batch))
	require.Nil(t, EncodeSeqChunk(nil))
}

// TestSeqPayloadMalformed: what a receiver must refuse, each an error
// wrapping ErrMalformed that returns no samples.
func TestSeqPayloadMalformed(t *testing.T) {
	sample := []byte{2, 0, 0, 0, 0, 0, 0, 0, 0} // dt 1, value 0
	def := func(seq byte) []byte { return []byte{seq, 1, 'x', 3} }
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	cases := map[string][]byte{
		"undefined number":      cat([]byte{0, 1, 5, 1}, sample),
		"defined twice":         cat([]byte{2}, def(5), def(5), []byte{1, 5, 1}, sample),
		"defined earlier":       cat([]byte{1}, def(7), []byte{1, 7, 1}, sample),
		"number zero defined":   cat([]byte{1}, def(0)),
		"truncated definition":  {1, 5, 9, 'x'},
		"definitions overflow":  {0xff, 0xff, 0x03, 1},
		"empty chunk":           {0, 0},
		"count beyond total":    cat([]byte{1}, def(5), []byte{1, 5, 2}, sample, sample),
		"truncated sample":      cat([]byte{1}, def(5), []byte{1, 5, 1}, sample[:5]),
		"chunk total too large": cat([]byte{0, 9, 0, 1, 'x', 3, 1}, sample),
		"bad inline length":     cat([]byte{0, 1, 0, 40, 'x', 3, 1}, sample),
		"trailing partial":      cat([]byte{1}, def(5), []byte{1, 5, 1}, sample, []byte{1}),
		"no definition count":   {0x80},
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			x := &seqIndex{}
			x.define(7, streamSeries{id: []byte("y"), shard: 2})
			got, hs, err := decodeSeqPayload(b, testNS, x, nil, nil)
			require.ErrorIs(t, err, ErrMalformed)
			require.ErrorContains(t, err, "PAYLOAD_FORMAT_SERIES_SEQS")
			require.Empty(t, got)
			require.Empty(t, hs)
		})
	}
}

// FuzzSeqPayload checks the SERIES_SEQS decoder on arbitrary bytes
// against a stream that defined two numbers: no panic, every error wraps
// ErrMalformed and decodes nothing, the batch is no larger than the bytes
// allow, every defined sample's ID and shard are its definition's, and
// earlier definitions stay.
func FuzzSeqPayload(f *testing.F) {
	coord := openStorage(f, commitlog.ModeAsync)
	ids := idsInDistinctShards(3)
	batch := refdBatch(f, coord, ids[:2], samplesNearNow(1, 0)[0].T)
	batch = append(batch, storage.Sample{ID: ids[2], Shard: shardOf(ids[2]), T: 5, V: 1})
	c := EncodeSeqChunk(batch)
	f.Add(seqWire(f, "", []*SeqChunk{c, c}, &seqDefined{}).GetPayload())
	f.Add([]byte{1, 9, 1, 'z', 4, 1, 9, 1, 2, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{0, 1, 7, 1, 2, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{0})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		x := &seqIndex{}
		x.define(7, streamSeries{id: []byte("x"), shard: 1})
		x.define(1<<30, streamSeries{id: []byte("y"), shard: 2})
		got, hs, err := decodeSeqPayload(b, testNS, x, nil, nil)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error does not wrap ErrMalformed: %v", err)
			}
			if len(got) != 0 || len(hs) != 0 {
				t.Fatalf("failed decode returned %d samples", len(got))
			}
			return
		}
		if len(got)*minSampleSize > len(b) {
			t.Fatalf("decoded %d samples from %d bytes", len(got), len(b))
		}
		if string(x.series[0].id) != "x" || string(x.series[1].id) != "y" {
			t.Fatalf("earlier definitions changed")
		}
		if i, ok := x.lookup(7); !ok || i != 0 {
			t.Fatalf("number 7 lost")
		}
		for i := range got {
			if hs[i] == noHandle {
				continue
			}
			if int(hs[i]) >= len(x.series) || string(x.series[hs[i]].id) != string(got[i].ID) || x.series[hs[i]].shard != got[i].Shard {
				t.Fatalf("sample %d: number's definition %d does not match its ID", i, hs[i])
			}
		}
	})
}

// TestWriteChunksToTwoReplicas: one encoding of each batch written over
// two real nodes' streams is stored by both; after the first batch the
// streams send no IDs, and the replicas' writes arrive at storage with
// their refs (no lookup, no validation).
func TestWriteChunksToTwoReplicas(t *testing.T) {
	coord := openStorage(t, commitlog.ModeAsync)
	ids := idsInDistinctShards(4)
	smp := samplesNearNow(3, 1)
	var dbs []*refsSeenDB
	var streams []*WriteStream
	for i := 0; i < 2; i++ {
		db := &refsSeenDB{Database: openStorage(t, commitlog.ModeSync)}
		c := serve(t, db, nil, ServerOptions{}, ClientOptions{})
		ws := c.NewWriteStream()
		t.Cleanup(ws.Close)
		dbs, streams = append(dbs, db), append(streams, ws)
	}
	for k := range smp {
		batch := refdBatch(t, coord, ids, smp[k].T)
		c := EncodeSeqChunk(batch)
		require.NotNil(t, c)
		for _, ws := range streams {
			res, err := ws.WriteChunks(context.Background(), testNS, []*SeqChunk{c})
			require.NoError(t, err)
			require.Equal(t, WriteResult{Written: len(ids)}, res)
			require.False(t, ws.Broken())
		}
	}
	for _, db := range dbs {
		require.Equal(t, []int{0, 4, 4}, db.withRef, "refs from the second batch on")
		for _, id := range ids {
			it, err := db.Read(testNS, id, 0, smp[2].T)
			require.NoError(t, err)
			n := 0
			for it.Next() {
				n++
			}
			require.NoError(t, it.Err())
			require.Equal(t, 3, n)
		}
	}
}

// TestWriteChunksRefusedByOlderNode: a node that does not read
// SERIES_SEQS (here a real server that sees the format as one it does
// not know, as an older node's) refuses the request with InvalidArgument
// and writes nothing; the stream is Broken, since the node took none of
// its definitions, and the batch goes through WriteBatch or a new
// stream's handles.
func TestWriteChunksRefusedByOlderNode(t *testing.T) {
	db := &countingDB{Database: openStorage(t, commitlog.ModeAsync)}
	c := serveWith(t, db, nil, ServerOptions{}, ClientOptions{}, grpc.StreamInterceptor(olderFormatsOnly))

	coord := openStorage(t, commitlog.ModeAsync)
	batch := refdBatch(t, coord, idsInDistinctShards(2), samplesNearNow(1, 0)[0].T)
	ws := c.NewWriteStream()
	defer ws.Close()
	_, err := ws.WriteChunks(context.Background(), testNS, []*SeqChunk{EncodeSeqChunk(batch)})
	require.Equal(t, codes.InvalidArgument, Code(err), "%v", err)
	require.ErrorContains(t, err, "unknown to this node")
	require.True(t, ws.Broken())
	require.Zero(t, db.written.Load())

	ws2 := c.NewWriteStream()
	defer ws2.Close()
	res, err := ws2.WriteBatch(context.Background(), testNS, batch)
	require.NoError(t, err)
	require.Equal(t, 2, res.Written)
}

// olderFormatsOnly makes a real server see SERIES_SEQS requests as a
// format it does not know, as a node older than the format sees them.
func olderFormatsOnly(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	return h(srv, olderStream{ss})
}

type olderStream struct{ grpc.ServerStream }

func (s olderStream) RecvMsg(m any) error {
	err := s.ServerStream.RecvMsg(m)
	if r, ok := m.(*nodepb.WriteBatchRequest); ok && err == nil && r.GetFormat() == nodepb.PayloadFormat_PAYLOAD_FORMAT_SERIES_SEQS {
		r.Format = 7
	}
	return err
}

// BenchmarkEncodeForReplicas is what a coordinator spends encoding one
// batch of 5000 samples for two replicas over warm streams (every series
// known to both): SERIES_HANDLES encodes it per stream, SERIES_SEQS once
// (EncodeSeqChunk) plus a header per stream. The samples carry storage
// refs, as a coordinator holding the series writes them.
func BenchmarkEncodeForReplicas(b *testing.B) {
	db := openStorage(b, commitlog.ModeAsync)
	base := time.Now().Add(-time.Minute).UnixMilli()
	for _, shape := range benchShapes {
		ids := benchIDs(shape.series)
		warm := benchBatchFill(nil, ids, 0, base, 1)
		require.NoError(b, db.WriteBatch(testNS, warm))
		batch := benchBatchFill(nil, ids, 1, base, shape.perSeries)
		for i := range batch {
			batch[i].Ref = warm[i/shape.perSeries].Ref
		}
		pool := mem.DefaultBufferPool()
		name := fmt.Sprintf("series=%dx%d", shape.series, shape.perSeries)
		b.Run(name+"/handles", func(b *testing.B) {
			tabs := []*handleTable{newHandleTable(), newHandleTable()}
			for _, t := range tabs {
				w, err := encodeHandleRequest(testNS, batch, t, pool)
				require.NoError(b, err)
				w.free()
			}
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				for _, t := range tabs {
					w, err := encodeHandleRequest(testNS, batch, t, pool)
					if err != nil {
						b.Fatal(err)
					}
					w.free()
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(batch)), "ns/sample")
		})
		b.Run(name+"/seqs", func(b *testing.B) {
			defs := []*seqDefined{{}, {}}
			for _, d := range defs {
				w, err := encodeSeqRequest(testNS, []*SeqChunk{EncodeSeqChunk(batch)}, d, pool)
				require.NoError(b, err)
				w.free()
			}
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				c := EncodeSeqChunk(batch)
				for _, d := range defs {
					w, err := encodeSeqRequest(testNS, []*SeqChunk{c}, d, pool)
					if err != nil {
						b.Fatal(err)
					}
					w.free()
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(batch)), "ns/sample")
		})
	}
}

// TestWriteChunksRefusalKeepsDefinitions: a request refused on its own
// (a shard the node does not own) writes nothing but keeps the stream
// and the numbers it defined: the next request names the series by
// number only and is stored.
func TestWriteChunksRefusalKeepsDefinitions(t *testing.T) {
	ids := idsInDistinctShards(2)
	db := &countingDB{Database: openStorage(t, commitlog.ModeAsync)}
	c := serve(t, db, ownsOnly(shardOf(ids[0])), ServerOptions{}, ClientOptions{})
	ws := c.NewWriteStream()
	defer ws.Close()
	coord := openStorage(t, commitlog.ModeAsync)
	smp := samplesNearNow(2, 1)

	both := refdBatch(t, coord, ids, smp[0].T)
	_, err := ws.WriteChunks(context.Background(), testNS, []*SeqChunk{EncodeSeqChunk(both)})
	require.Equal(t, codes.FailedPrecondition, Code(err), "%v", err)
	var rerr *Error
	require.ErrorAs(t, err, &rerr)
	require.Equal(t, []uint32{shardOf(ids[1])}, rerr.Shards)
	require.False(t, ws.Broken())
	require.Zero(t, db.written.Load())
	require.True(t, ws.seqs.has(uint32(both[0].Ref.Seq())), "defined by the refused request")

	one := refdBatch(t, coord, ids[:1], smp[1].T)
	w, err := encodeSeqRequest(testNS, []*SeqChunk{EncodeSeqChunk(one)}, &seqDefined{bits: append([]uint64(nil), ws.seqs.bits...), n: ws.seqs.n}, mem.DefaultBufferPool())
	require.NoError(t, err)
	require.False(t, bytes.Contains(w.bufs.Materialize(), ids[0]), "named by number only")
	w.free()
	res, err := ws.WriteChunks(context.Background(), testNS, []*SeqChunk{EncodeSeqChunk(one)})
	require.NoError(t, err)
	require.Equal(t, 1, res.Written)
	require.Len(t, fetchOne(t, c, ids[0]), 1)
}
