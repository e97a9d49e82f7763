package hints

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
)

// BenchmarkAppend: what hinting costs a write while a replica is down,
// one 1000-sample share per append, appenders in parallel sharing fsyncs.
func BenchmarkAppend(b *testing.B) {
	q, batch := benchQueue(b, 1000)
	b.SetBytes(int64(len(appendRecordBytes(batch))))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := q.Append("default", batch); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func appendRecordBytes(batch []storage.Sample) []byte {
	return appendRecord(nil, time.Now(), "default", batch)
}

// BenchmarkReplayRead: reading hints back, coalesced as a replay does.
func BenchmarkReplayRead(b *testing.B) {
	q, batch := benchQueue(b, 100)
	b.SetBytes(int64(len(appendRecordBytes(batch))))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%1000 == 0 {
			b.StopTimer()
			for k := 0; k < 1000; k++ {
				if err := q.Append("default", batch); err != nil {
					b.Fatal(err)
				}
			}
			b.StartTimer()
		}
		rec, ok, err := q.Next()
		if err != nil || !ok {
			b.Fatal(ok, err)
		}
		q.Ack(rec)
	}
}

// benchQueue opens a queue and makes a batch of n samples of n series.
func benchQueue(b *testing.B, n int) (*Queue, []storage.Sample) {
	s, err := Open(b.TempDir(), Options{MaxBytes: 1 << 30, MaxAge: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	q, err := s.Queue("node3")
	if err != nil {
		b.Fatal(err)
	}
	batch := make([]storage.Sample, n)
	for i := range batch {
		batch[i] = storage.Sample{ID: []byte(fmt.Sprintf("__name__=metric,instance=host-%04d", i)), Shard: uint32(i), T: 1_700_000_000_000, V: float64(i)}
	}
	return q, batch
}

// BenchmarkAppendHistograms: BenchmarkAppend for a 100-sample share of
// native histograms (one per series, 8 buckets each): the batch record
// encodes each as a one-sample stream.
func BenchmarkAppendHistograms(b *testing.B) {
	q, _ := benchQueue(b, 0)
	batch := make([]storage.HistogramSample, 100)
	for i := range batch {
		h := &histogram.Histogram{Schema: 3, Count: uint64(8 * (i + 1)), Sum: float64(i), PositiveSpans: []histogram.Span{{Length: 8}},
			PositiveBuckets: []int64{int64(i + 1), 0, 0, 0, 0, 0, 0, 0}}
		batch[i] = storage.HistogramSample{ID: []byte(fmt.Sprintf("__name__=latency,instance=host-%04d", i)), Shard: uint32(i), T: 1_700_000_000_000, H: h}
	}
	rec, err := appendBatchRecord(nil, time.Now(), "default", storage.Batch{Histograms: batch})
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(rec)))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := q.AppendBatch("default", storage.Batch{Histograms: batch}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(len(rec))/float64(len(batch)), "bytes/histogram")
}
