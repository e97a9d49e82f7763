package rpc

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/dbnode/commitlog"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
)

const benchBatch = 5000

// benchShape is how a batch of benchBatch samples spreads over series:
// Prometheus remote write sends one sample per series, a client session
// that buffered for a while several.
var benchShapes = []struct{ series, perSeries int }{{5000, 1}, {500, 10}}

// benchIDs are the series IDs of a shape, and their shards.
func benchIDs(n int) []WriteSeries {
	out := make([]WriteSeries, n)
	for i := range out {
		id := seriesID("http_requests_total", "instance", fmt.Sprintf("host-%04d:9100", i), "job", "node", "code", "200")
		out[i] = WriteSeries{ID: id, Shard: shardOf(id)}
	}
	return out
}

// benchRequest fills req for iteration iter: fresh timestamps each time (a
// millisecond step keeps b.N batches inside the buffer window), realistic
// counter values.
func benchRequest(req *WriteRequest, iter int64, base int64, perSeries int) {
	for i := range req.Series {
		s := &req.Series[i]
		if cap(s.Samples) < perSeries {
			s.Samples = make([]Sample, perSeries)
		}
		s.Samples = s.Samples[:perSeries]
		for j := range s.Samples {
			t := base + iter*int64(perSeries) + int64(j)
			s.Samples[j] = Sample{T: t, V: float64(t%100000) * 3}
		}
	}
}

// warmUp writes one sample to every series, so that the timed loop
// measures steady-state writes rather than series creation.
func warmUp(b *testing.B, db *storage.Database, series []WriteSeries, t int64) {
	batch := make([]storage.Sample, len(series))
	for i, s := range series {
		batch[i] = storage.Sample{ID: s.ID, Shard: s.Shard, T: t, V: 0}
	}
	require.NoError(b, db.WriteBatch(testNS, batch))
}

// reportPerSample reports throughput and allocations per sample (client,
// server and storage together: they share the process).
func reportPerSample(b *testing.B, samples int64, mallocs uint64) {
	b.ReportMetric(float64(samples)/b.Elapsed().Seconds(), "samples/s")
	b.ReportMetric(float64(mallocs)/float64(samples), "allocs/sample")
}

func mallocs() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.Mallocs
}

// BenchmarkWriteBatch writes batches of 5000 samples over loopback gRPC
// into real storage, beside the same batches written directly into storage.
func BenchmarkWriteBatch(b *testing.B) {
	for _, mode := range []commitlog.Mode{commitlog.ModeAsync, commitlog.ModeSync} {
		for _, shape := range benchShapes {
			name := fmt.Sprintf("commitlog=%s/series=%dx%d", mode, shape.series, shape.perSeries)
			b.Run(name+"/rpc", func(b *testing.B) { benchWriteRPC(b, mode, shape.series, shape.perSeries, 1) })
			b.Run(name+"/rpc-parallel4", func(b *testing.B) { benchWriteRPC(b, mode, shape.series, shape.perSeries, 4) })
			b.Run(name+"/direct", func(b *testing.B) { benchWriteDirect(b, mode, shape.series, shape.perSeries) })
		}
	}
}

func benchWriteRPC(b *testing.B, mode commitlog.Mode, series, perSeries, parallel int) {
	db := openStorage(b, mode)
	c := serve(b, db, nil, ServerOptions{}, ClientOptions{})
	ctx := context.Background()
	base := time.Now().Add(-9 * time.Minute).UnixMilli()
	var iter atomic.Int64
	b.SetParallelism(parallel)
	// Each goroutine owns a disjoint set of series, as host queues do.
	goroutines := parallel * runtime.GOMAXPROCS(0)
	ids := benchIDs(series * goroutines)
	warmUp(b, db, ids, base-60_000)
	b.ResetTimer()
	m0 := mallocs()
	if parallel == 1 {
		req := &WriteRequest{Namespace: testNS, Series: ids[:series]}
		for i := 0; i < b.N; i++ {
			benchRequest(req, int64(i), base, perSeries)
			resp, err := c.WriteBatch(ctx, req)
			if err != nil || resp.Written != benchBatch {
				b.Fatalf("write: %v %+v", err, resp)
			}
		}
	} else {
		var g atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			off := int(g.Add(1)-1) % goroutines * series
			req := &WriteRequest{Namespace: testNS, Series: ids[off : off+series]}
			for pb.Next() {
				benchRequest(req, iter.Add(1), base, perSeries)
				resp, err := c.WriteBatch(ctx, req)
				if err != nil || resp.Written != benchBatch {
					b.Errorf("write: %v %+v", err, resp)
					return
				}
			}
		})
	}
	b.StopTimer()
	reportPerSample(b, int64(b.N)*benchBatch, mallocs()-m0)
}

func benchWriteDirect(b *testing.B, mode commitlog.Mode, series, perSeries int) {
	db := openStorage(b, mode)
	base := time.Now().Add(-9 * time.Minute).UnixMilli()
	req := &WriteRequest{Namespace: testNS, Series: benchIDs(series)}
	warmUp(b, db, req.Series, base-60_000)
	batch := make([]storage.Sample, 0, benchBatch)
	b.ResetTimer()
	m0 := mallocs()
	for i := 0; i < b.N; i++ {
		benchRequest(req, int64(i), base, perSeries)
		batch = batch[:0]
		for _, s := range req.Series {
			for _, smp := range s.Samples {
				batch = append(batch, storage.Sample{ID: s.ID, Shard: s.Shard, T: smp.T, V: smp.V})
			}
		}
		require.NoError(b, db.WriteBatch(testNS, batch))
	}
	b.StopTimer()
	reportPerSample(b, int64(b.N)*benchBatch, mallocs()-m0)
}

// BenchmarkCodec measures the wire codec alone on 5000-sample write
// batches: encode into a reused buffer, and decode.
func BenchmarkCodec(b *testing.B) {
	base := time.Now().UnixMilli()
	for _, shape := range benchShapes {
		req := &WriteRequest{Namespace: testNS, Series: benchIDs(shape.series)}
		benchRequest(req, 0, base, shape.perSeries)
		enc := req.MarshalAppend(nil)
		name := fmt.Sprintf("series=%dx%d", shape.series, shape.perSeries)
		b.Run(name+"/encode", func(b *testing.B) {
			buf := make([]byte, 0, len(enc))
			b.SetBytes(int64(len(enc)))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				buf = req.MarshalAppend(buf[:0])
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchBatch), "ns/sample")
			b.ReportMetric(float64(len(enc))/benchBatch, "bytes/sample")
		})
		b.Run(name+"/size+encode", func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				buf := make([]byte, 0, req.Size())
				_ = req.MarshalAppend(buf)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchBatch), "ns/sample")
		})
		b.Run(name+"/decode", func(b *testing.B) {
			b.SetBytes(int64(len(enc)))
			b.ReportAllocs()
			var out WriteRequest
			for i := 0; i < b.N; i++ {
				if err := out.Unmarshal(enc); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchBatch), "ns/sample")
		})
	}
}
