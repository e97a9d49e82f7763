package bootstrap

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/tessera-tsdb/tessera/client"
	"github.com/tessera-tsdb/tessera/dbnode/commitlog"
	"github.com/tessera-tsdb/tessera/dbnode/rpc"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
	"github.com/tessera-tsdb/tessera/dbnode/storage/storagetest"
	"github.com/tessera-tsdb/tessera/ident"
	"github.com/tessera-tsdb/tessera/placement"
	"google.golang.org/grpc"
)

// BenchmarkPeerBootstrap streams half the shards of a real peer (a
// storage engine behind a real rpc server on loopback) into a fresh
// storage engine per iteration, the way node4 joins the three-node
// example: 4096 shards, the joiner INITIALIZING on 2048 of them, the peer
// holding BOOTSTRAP_BENCH_SERIES series (default 10,000) x 720 samples at
// 10 s (2 h). "flushed" streams fileset blocks (FetchBlock), "unflushed"
// the peer's memory (FetchUnflushed). It reports samples/s and MB/s of
// streamed bytes, and the CPU seconds per bootstrap of both sides
// (getrusage, steadier than wall time on a shared box); the peer's setup
// is not timed.
//
//	go test -run XXX -bench PeerBootstrap -benchtime 3x ./bootstrap/
func BenchmarkPeerBootstrap(b *testing.B) {
	series := 10000
	if s := os.Getenv("BOOTSTRAP_BENCH_SERIES"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			b.Fatalf("BOOTSTRAP_BENCH_SERIES: %v", err)
		}
		series = n
	}
	for _, flushed := range []bool{true, false} {
		name := "unflushed"
		if flushed {
			name = "flushed"
		}
		b.Run(name, func(b *testing.B) { benchPeerBootstrap(b, series, flushed) })
	}
}

const benchShards = 4096

func benchPeerBootstrap(b *testing.B, nSeries int, flushed bool) {
	start := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC) // a 2h block boundary
	var mu sync.Mutex
	now := start.Add(2 * time.Hour)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	src := openBench(b, clock, commitlog.ModeSync)
	batch := make([]storage.Sample, 0, 720*100)
	for i := 0; i < nSeries; i++ {
		id := ident.FromLabels(labels.FromStrings("__name__", "bench_metric", "host", fmt.Sprintf("host-%05d", i)))
		sh := ident.Shard(id, benchShards)
		for k := 0; k < 720; k++ {
			t := start.UnixMilli() + int64(k)*10_000
			batch = append(batch, storage.Sample{ID: id, Shard: sh, T: t, V: benchValue(i, k)})
		}
		if len(batch) >= 720*100 || i == nSeries-1 {
			if err := src.WriteBatch("default", batch); err != nil {
				b.Fatalf("write: %v", err)
			}
			batch = batch[:0]
		}
	}
	if flushed {
		mu.Lock()
		now = start.Add(2*time.Hour + 20*time.Minute) // past end + bufferPast
		mu.Unlock()
		if err := src.Tick(); err != nil {
			b.Fatalf("flush peer: %v", err)
		}
	}
	ep := serveBench(b, src)

	var joining []uint32
	for s := uint32(0); s < benchShards/2; s++ {
		joining = append(joining, s)
	}
	p := placement.Placement{NumShards: benchShards, ReplicaFactor: 2, IsSharded: true, Version: 1}
	me := placement.Instance{ID: self, IsolationGroup: "g0", Weight: 1, Endpoint: "unused"}
	for _, s := range joining {
		me.Shards = append(me.Shards, placement.Shard{ID: s, State: placement.Initializing})
	}
	peer := placement.Instance{ID: "peer", IsolationGroup: "g1", Weight: 1, Endpoint: ep}
	for s := uint32(0); s < benchShards; s++ {
		peer.Shards = append(peer.Shards, placement.Shard{ID: s, State: placement.Available})
	}
	p.Instances = []placement.Instance{me, peer}

	c, err := rpc.Dial(ep, rpc.ClientOptions{Timeout: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })

	var samples, bytes int64
	var cpu time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		dst := openBench(b, clock, commitlog.ModeSync)
		bs, err := New(Options{
			InstanceID: self, DB: dst, Store: &fakeStore{p: p.Clone()},
			Dial:    func(string) (Peer, error) { return c, nil },
			Workers: 4, ShardsPerFetch: 64,
			MarkAvailableAttempts: 1, MarkAvailableBackoff: time.Millisecond,
		})
		if err != nil {
			b.Fatal(err)
		}
		cpu0 := cpuTime(b)
		b.StartTimer()
		if err := bs.Reconcile(context.Background(), client.NewMap(p)); err != nil {
			b.Fatalf("bootstrap: %v", err)
		}
		b.StopTimer()
		cpu += cpuTime(b) - cpu0
		pr := bs.Progress()
		samples += pr.Samples
		bytes += pr.Bytes
		if err := dst.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.StopTimer()
	sec := b.Elapsed().Seconds()
	b.ReportMetric(float64(samples)/sec, "samples/s")
	b.ReportMetric(float64(bytes)/sec/1e6, "MB/s")
	b.ReportMetric(float64(samples)/float64(b.N), "samples/op")
	b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
}

// cpuTime is the process' user+system CPU time so far: both sides of the
// stream run in this process, so a difference is what one bootstrap cost
// the joiner and the peer together, whatever else loads the machine.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchValue mixes what tessera bench writes: counters, gauges, noisy
// floats and large integers, by series.
func benchValue(series, k int) float64 {
	x := uint64(series*720+k) * 0x9E3779B97F4A7C15
	x ^= x >> 29
	switch series % 4 {
	case 0:
		return float64(k * (series%10 + 1))
	case 1:
		return float64(50 + int(x%20))
	case 2:
		return float64(x%1_000_000) / 997
	default:
		return float64(1<<40 + int(x%(1<<20)))
	}
}

// openBench opens a storage engine with the default namespace and
// benchShards shards in a temporary directory, closed at cleanup.
func openBench(b *testing.B, clock func() time.Time, mode commitlog.Mode) *storage.Database {
	b.Helper()
	db, err := storage.Open(storagetest.Options(storage.Options{Dir: b.TempDir(), Namespaces: []storage.NamespaceOptions{storagetest.Namespace()},
		NumShards: benchShards, Now: clock, CommitLogMode: mode}))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = db.Close() })
	return db
}

// serveBench serves db over a real rpc server on a loopback port until the
// benchmark's cleanup and returns its address.
func serveBench(b *testing.B, db *storage.Database) string {
	b.Helper()
	srv := rpc.NewServer(db, nil, rpc.ServerOptions{})
	g := grpc.NewServer(srv.GRPCServerOptions()...)
	srv.Register(g)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = g.Serve(ln)
	}()
	b.Cleanup(func() {
		g.Stop()
		<-done
	})
	return ln.Addr().String()
}
