package rpc

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/dbnode/commitlog"
	"github.com/tessera-tsdb/tessera/dbnode/encoding"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
	"github.com/tessera-tsdb/tessera/dbnode/storage/storagetest"
	"github.com/tessera-tsdb/tessera/ident"
	"google.golang.org/grpc"
)

const (
	testNS     = "default"
	testShards = 64
)

func testStorageOptions(dir string, mode commitlog.Mode) storage.Options {
	return storagetest.Options(storage.Options{
		Dir: dir,
		Namespaces: []storage.NamespaceOptions{
			{Name: testNS, Retention: 48 * time.Hour, BlockSize: 2 * time.Hour,
				BufferPast: 10 * time.Minute, BufferFuture: 2 * time.Minute, ColdWrites: true, Index: true},
			{Name: "noindex", Retention: 48 * time.Hour, BlockSize: 2 * time.Hour,
				BufferPast: 10 * time.Minute, BufferFuture: 2 * time.Minute},
		},
		NumShards:     testShards,
		CommitLogMode: mode,
	})
}

func openStorage(t testing.TB, mode commitlog.Mode) *storage.Database {
	t.Helper()
	db, err := storage.Open(testStorageOptions(t.TempDir(), mode))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, db.Close()) })
	return db
}

// serve starts a real gRPC server on a free loopback port and returns a
// client of it; both stop at the end of the test.
func serve(t testing.TB, db Database, own Ownership, sopts ServerOptions, copts ClientOptions) *Client {
	t.Helper()
	return serveWith(t, db, own, sopts, copts)
}

// serveWith is serve with extra gRPC server options (interceptors that
// make a real server behave as a node of another version).
func serveWith(t testing.TB, db Database, own Ownership, sopts ServerOptions, copts ClientOptions, gopts ...grpc.ServerOption) *Client {
	t.Helper()
	srv := NewServer(db, own, sopts)
	g := grpc.NewServer(append(srv.GRPCServerOptions(), gopts...)...)
	srv.Register(g)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = g.Serve(ln)
	}()
	c, err := Dial(ln.Addr().String(), copts)
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, c.Close())
		g.Stop()
		<-done
	})
	return c
}

// ownFunc adapts a function to Ownership.
type ownFunc func(shard uint32, op Op) error

func (f ownFunc) CheckShard(shard uint32, op Op) error { return f(shard, op) }

// ownsOnly serves the given shards for both ops and names node2 as the
// owner of the others.
func ownsOnly(shards ...uint32) Ownership {
	set := map[uint32]bool{}
	for _, s := range shards {
		set[s] = true
	}
	return ownFunc(func(shard uint32, _ Op) error {
		if set[shard] {
			return nil
		}
		return fmt.Errorf("not owned by node2")
	})
}

func seriesID(name string, kv ...string) []byte {
	return ident.FromLabels(labels.FromStrings(append([]string{"__name__", name}, kv...)...))
}

func shardOf(id []byte) uint32 { return ident.Shard(id, testShards) }

// idsInDistinctShards returns n series IDs with pairwise different shards.
func idsInDistinctShards(n int) [][]byte {
	var out [][]byte
	seen := map[uint32]bool{}
	for i := 0; len(out) < n; i++ {
		id := seriesID("cpu", "host", fmt.Sprintf("h%d", i))
		if !seen[shardOf(id)] {
			seen[shardOf(id)] = true
			out = append(out, id)
		}
	}
	return out
}

// samplesNearNow returns n samples one second apart ending a minute ago.
func samplesNearNow(n int, v0 float64) []Sample {
	end := time.Now().Add(-time.Minute).UnixMilli()
	out := make([]Sample, n)
	for i := range out {
		out[i] = Sample{T: end - int64(n-1-i)*1000, V: v0 + float64(i)*0.5}
	}
	return out
}

// Sample, WriteSeries and WriteRequest shape test batches the way a
// reader thinks of them; batch flattens them into what Client.WriteBatch
// takes.
type Sample struct {
	T int64
	V float64
}

type WriteSeries struct {
	ID      []byte
	Shard   uint32
	Samples []Sample
}

type WriteRequest struct {
	Namespace string
	Series    []WriteSeries
}

func (r *WriteRequest) batch() []storage.Sample {
	var out []storage.Sample
	for _, s := range r.Series {
		for _, smp := range s.Samples {
			out = append(out, storage.Sample{ID: s.ID, Shard: s.Shard, T: smp.T, V: smp.V})
		}
	}
	return out
}

// writeReq sends req through c.WriteBatch.
func writeReq(ctx context.Context, c *Client, req *WriteRequest) (WriteResult, error) {
	return c.WriteBatch(ctx, req.Namespace, req.batch())
}

func writeSeries(id []byte, samples []Sample) WriteSeries {
	return WriteSeries{ID: id, Shard: shardOf(id), Samples: samples}
}

func decodeStream(t testing.TB, stream []byte) []Sample {
	t.Helper()
	var out []Sample
	it := encoding.NewIterator(stream)
	for it.Next() {
		ts, v := it.At()
		out = append(out, Sample{T: ts, V: v})
	}
	require.NoError(t, it.Err())
	return out
}

// faultyDB wraps a Database to inject failures and stalls.
type faultyDB struct {
	Database
	mu       sync.Mutex
	writeErr error
	readErr  error
	block    chan struct{} // non-nil: calls wait until it is closed
}

func (f *faultyDB) wait() {
	f.mu.Lock()
	b := f.block
	f.mu.Unlock()
	if b != nil {
		<-b
	}
}

func (f *faultyDB) WriteBatch(ns string, batch []storage.Sample) error {
	f.wait()
	f.mu.Lock()
	err := f.writeErr
	f.mu.Unlock()
	if err != nil {
		return err
	}
	return f.Database.WriteBatch(ns, batch)
}

func (f *faultyDB) Read(ns string, id []byte, start, end int64) (encoding.Iterator, error) {
	f.wait()
	f.mu.Lock()
	err := f.readErr
	f.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return f.Database.Read(ns, id, start, end)
}
