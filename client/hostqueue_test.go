package client

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/dbnode/rpc"
	"github.com/tessera-tsdb/tessera/dbnode/rpc/nodepb"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
	"github.com/tessera-tsdb/tessera/dbnode/storage/storagetest"
	"github.com/tessera-tsdb/tessera/ident"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// serveNode starts a real node RPC server over a real storage engine on a
// loopback port. old makes it answer WriteStream as a node that predates
// it does (Unimplemented, nothing written).
func serveNode(t testing.TB, old bool) (*rpc.Client, *storage.Database) {
	t.Helper()
	db := storagetest.Open(t, 64, nil)
	srv := rpc.NewServer(db, nil, rpc.ServerOptions{})
	opts := srv.GRPCServerOptions()
	if old {
		opts = append(opts, grpc.StreamInterceptor(func(s any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			if info.FullMethod == nodepb.Node_WriteStream_FullMethodName {
				return status.Errorf(codes.Unimplemented, "unknown method WriteStream for service %s", rpc.ServiceName)
			}
			return h(s, ss)
		}))
	}
	g := grpc.NewServer(opts...)
	srv.Register(g)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan struct{})
	go func() { defer close(done); _ = g.Serve(ln) }()
	c, err := rpc.Dial(ln.Addr().String(), rpc.ClientOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close()); g.Stop(); <-done })
	return c, db
}

func readBack(t *testing.T, db *storage.Database, id []byte) int {
	t.Helper()
	it, err := db.Read(storagetest.Namespace().Name, id, 0, time.Now().UnixMilli())
	require.NoError(t, err)
	n := 0
	for it.Next() {
		n++
	}
	require.NoError(t, it.Err())
	return n
}

// TestHostWorkerStreamsAndFallsBack: a worker writes over a stream to a
// node that has WriteStream, and to an older node it sends the same
// batches with WriteBatch (the refused stream wrote nothing), every
// sample stored exactly once either way.
func TestHostWorkerStreamsAndFallsBack(t *testing.T) {
	for _, old := range []bool{false, true} {
		t.Run(map[bool]string{false: "new node", true: "older node"}[old], func(t *testing.T) {
			c, db := serveNode(t, old)
			h := &hostQueue{peer: c}
			w := &hostWorker{h: h}
			defer w.close()
			id := ident.FromLabels(labels.FromStrings("__name__", "up", "job", "a"))
			ns := storagetest.Namespace().Name
			now := time.Now().Add(-time.Minute).UnixMilli()
			for i := 0; i < 3; i++ {
				batch := []storage.Sample{{ID: id, Shard: ident.Shard(id, 64), T: now + int64(i), V: float64(i)}}
				res, err := w.write(context.Background(), ns, func() []storage.Sample { return batch }, nil)
				require.NoError(t, err)
				require.Equal(t, 1, res.Written)
			}
			require.Equal(t, 3, readBack(t, db, id))
			if old {
				require.Nil(t, w.ws, "no stream kept to an older node")
				require.Greater(t, h.noStreamsUntil.Load(), time.Now().UnixNano())
			} else {
				require.NotNil(t, w.ws)
				require.False(t, w.ws.Broken())
			}
		})
	}
}

// olderFormatsOnly makes a real server see SERIES_SEQS requests as a
// payload format it does not know, as a node older than it sees them.
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

// TestHostWorkersShareOneEncoding: a batch two replicas receive alike is
// encoded once (SERIES_SEQS) and stored by both; a replica that does not
// read that format refuses it without writing, and its worker sends the
// batch again with handles (every sample stored exactly once) and keeps
// to handles for that host.
func TestHostWorkersShareOneEncoding(t *testing.T) {
	coord := storagetest.Open(t, 64, nil)
	ns := storagetest.Namespace().Name
	now := time.Now().Add(-time.Minute).UnixMilli()
	var ids [][]byte
	for _, job := range []string{"a", "b", "c"} {
		ids = append(ids, ident.FromLabels(labels.FromStrings("__name__", "up", "job", job)))
	}
	batchAt := func(ts int64) []storage.Sample {
		batch := make([]storage.Sample, len(ids))
		for i, id := range ids {
			batch[i] = storage.Sample{ID: id, Shard: ident.Shard(id, 64), T: ts, V: float64(i)}
		}
		require.NoError(t, coord.WriteBatch(ns, batch)) // the coordinator's own write sets the refs
		return batch
	}

	c1, db1 := serveNode(t, false)
	c2, db2 := serveNode(t, false)
	db3 := storagetest.Open(t, 64, nil)
	srv := rpc.NewServer(db3, nil, rpc.ServerOptions{})
	g := grpc.NewServer(append(srv.GRPCServerOptions(), grpc.StreamInterceptor(olderFormatsOnly))...)
	srv.Register(g)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan struct{})
	go func() { defer close(done); _ = g.Serve(ln) }()
	c3, err := rpc.Dial(ln.Addr().String(), rpc.ClientOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c3.Close()); g.Stop(); <-done })

	var workers []*hostWorker
	for _, c := range []*rpc.Client{c1, c2, c3} {
		w := &hostWorker{h: &hostQueue{peer: c}}
		t.Cleanup(w.close)
		workers = append(workers, w)
	}
	for k := 0; k < 3; k++ {
		chunk := rpc.EncodeSeqChunk(batchAt(now + int64(k)))
		require.NotNil(t, chunk)
		sb := &sharedBatch{chunk: chunk}
		for _, w := range workers {
			res, err := w.write(context.Background(), ns, sb.samples, []*sharedBatch{sb})
			require.NoError(t, err)
			require.Equal(t, len(ids), res.Written)
		}
	}
	for _, db := range []*storage.Database{db1, db2, db3} {
		for _, id := range ids {
			require.Equal(t, 3, readBack(t, db, id))
		}
	}
	require.Zero(t, workers[0].h.noSeqsUntil.Load())
	require.Greater(t, workers[2].h.noSeqsUntil.Load(), time.Now().UnixNano(), "handles for the older node")
	require.False(t, workers[2].ws.Broken())
}

// TestHostQueueWriteAfterCloseReturns: a write racing Close used to land
// in the buffered ops channel after the workers' last drain (select picks
// either ready case) and wait for an answer no worker would give: the
// session's goroutine leaked and the caller hung. Every write after close
// must answer.
func TestHostQueueWriteAfterCloseReturns(t *testing.T) {
	c, _ := serveNode(t, false)
	h := newHostQueue(context.Background(), "node", c, newHealth("node", "node"), 100, time.Minute)
	h.close()
	id := ident.FromLabels(labels.FromStrings("__name__", "up", "job", "a"))
	batch := []storage.Sample{{ID: id, Shard: ident.Shard(id, 64), T: time.Now().UnixMilli(), V: 1}}
	for i := 0; i < 64; i++ {
		done := make(chan error, 1)
		go func() { done <- h.write(context.Background(), storagetest.Namespace().Name, batch, nil) }()
		select {
		case err := <-done:
			require.ErrorIs(t, err, errHostClosed)
		case <-time.After(30 * time.Second):
			t.Fatalf("write %d after close did not return", i)
		}
	}
}
