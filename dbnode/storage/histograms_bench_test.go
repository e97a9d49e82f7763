package storage

import (
	"context"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/tessera-tsdb/tessera/dbnode/commitlog"
	"github.com/tessera-tsdb/tessera/dbnode/encoding/encodingtest"
)

// BenchmarkHistogramStorageSize reports what native histograms cost in
// this engine, per sample, against Prometheus' chunks on the same data
// (encodingtest.LatencyHistograms: 50 series at schema 3, one 2 h block at
// 15 s = 480 samples each): memory (the buckets' streams), the fileset's
// payloads and its whole size on disk (payloads in zstd pages, index,
// IDs, checksums), and chunkenc's histogram chunks cut at 120 samples as
// the head cuts them (Prometheus' chunks are stored as they are).
//
//	go test -run '^$' -bench HistogramStorageSize -benchtime 1x ./dbnode/storage/
func BenchmarkHistogramStorageSize(b *testing.B) {
	for _, float := range []bool{false, true} {
		name := "int"
		if float {
			name = "float"
		}
		b.Run(name, func(b *testing.B) {
			for range b.N {
				histogramSizes(b, float)
			}
		})
	}
}

func histogramSizes(b *testing.B, float bool) {
	clk := &clock{t: t0.Add(30 * time.Minute)}
	opts := testOpts(b.TempDir(), clk)
	opts.Namespaces[0].BufferFuture = 3 * time.Hour
	db, err := Open(opts)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	cfg := encodingtest.LatencyConfig{Series: 50, Samples: 480, Seed: 2, Start: ms(t0)}
	data := encodingtest.LatencyHistograms(cfg)
	n := 0
	promBytes := 0
	for i, s := range data {
		id := sid("latency_seconds", "s", strconv.Itoa(i))
		batch := make([]HistogramSample, len(s.T))
		for j := range s.T {
			batch[j] = HistogramSample{ID: id, Shard: db.Shard(id), T: s.T[j]}
			if float {
				batch[j].FH = s.H[j].ToFloat(nil)
			} else {
				batch[j].H = s.H[j]
			}
		}
		if err := db.WriteHistograms("default", batch); err != nil {
			b.Fatal(err)
		}
		n += len(batch)
		promBytes += promChunkBytes(b, batch)
	}
	mem := 0
	for _, ns := range db.nsList {
		for _, sh := range ns.allShards() {
			for _, s := range sh.snapshotSeries() {
				s.stats(func(_ int64, _, bytes int) { mem += bytes })
			}
		}
	}
	clk.Add(3 * time.Hour)
	if err := db.Tick(); err != nil {
		b.Fatal(err)
	}
	var disk int64
	payload := 0
	for _, ns := range db.nsList {
		for _, sh := range ns.allShards() {
			for _, bs := range sh.blockStarts() {
				r := sh.reader(bs)
				disk += r.DiskSize()
				if err := r.RangeData(func(_, data []byte) error { payload += len(data); return nil }); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	b.ReportMetric(float64(mem)/float64(n), "B/sample-memory")
	b.ReportMetric(float64(payload)/float64(n), "B/sample-payload")
	b.ReportMetric(float64(disk)/float64(n), "B/sample-disk")
	b.ReportMetric(float64(promBytes)/float64(n), "B/sample-prometheus-chunks")
}

// promChunkBytes encodes samples in chunkenc histogram chunks as the
// head does: cut at 120 samples, and where the appender cuts.
func promChunkBytes(b *testing.B, batch []HistogramSample) int {
	total := 0
	var c chunkenc.Chunk
	var app chunkenc.Appender
	for i, s := range batch {
		if i%120 == 0 {
			if c != nil {
				total += len(c.Bytes())
			}
			if s.FH != nil {
				c = chunkenc.NewFloatHistogramChunk()
			} else {
				c = chunkenc.NewHistogramChunk()
			}
			var err error
			if app, err = c.Appender(); err != nil {
				b.Fatal(err)
			}
		}
		var (
			nc      chunkenc.Chunk
			recoded bool
			err     error
		)
		if s.FH != nil {
			nc, recoded, app, err = app.AppendFloatHistogram(nil, 0, s.T, s.FH.Copy(), false)
		} else {
			nc, recoded, app, err = app.AppendHistogram(nil, 0, s.T, s.H.Copy(), false)
		}
		if err != nil {
			b.Fatal(err)
		}
		if nc != nil {
			if !recoded {
				total += len(c.Bytes())
			}
			c = nc
		}
	}
	if c != nil {
		total += len(c.Bytes())
	}
	return total
}

// BenchmarkWriteHistograms measures WriteHistograms (validation, commit
// log record, memory) per histogram sample, async commit log, batches of
// 500 samples of 50 series: encodingtest's latency histograms (schema 3,
// ~19 buckets). It reports process CPU per sample beside wall time.
//
//	go test -run '^$' -bench WriteHistograms ./dbnode/storage/
func BenchmarkWriteHistograms(b *testing.B) {
	clk := &clock{t: t0.Add(30 * time.Minute)}
	opts := testOpts(b.TempDir(), clk)
	opts.CommitLogMode = commitlog.ModeAsync
	opts.Namespaces[0].BufferFuture = 400 * time.Hour
	opts.Namespaces[0].Retention = 400 * time.Hour
	db, err := Open(opts)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	data := encodingtest.LatencyHistograms(encodingtest.LatencyConfig{Series: 50, Samples: 480, Seed: 2, Start: ms(t0)})
	ids := make([][]byte, len(data))
	for i := range ids {
		ids[i] = sid("latency_seconds", "s", strconv.Itoa(i))
	}
	batch := make([]HistogramSample, 0, 500)
	b.ReportAllocs()
	cpu0 := benchCPU()
	b.ResetTimer()
	n := 0
	for i := 0; i < b.N; i++ {
		batch = batch[:0]
		for k := 0; k < 10; k++ { // 10 scrapes of 50 series
			j := (i*10 + k) % 480
			round := int64((i*10 + k) / 480)
			for s := range data {
				batch = append(batch, HistogramSample{ID: ids[s], Shard: db.Shard(ids[s]), T: data[s].T[j] + round*480*15_000, H: data[s].H[j]})
			}
		}
		if err := db.WriteHistograms("default", batch); err != nil {
			b.Fatal(err)
		}
		n += len(batch)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/sample")
	// Process CPU (the commit log's flusher included): on a shared,
	// loaded machine wall time mostly measures the neighbours.
	b.ReportMetric(float64((benchCPU()-cpu0).Nanoseconds())/float64(n), "cpu-ns/sample")
}

func benchCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkDeclineHistograms: the cost of QueryOptions.DeclineHistograms'
// look-up before the read (prepass) next to the read it may spare, over
// 20,000 float series of a namespace that has taken a histogram (the
// look-up runs only there), with and without the option.
func BenchmarkDeclineHistograms(b *testing.B) {
	clk := &clock{t: t0.Add(30 * time.Minute)}
	db, err := Open(testOpts(b.TempDir(), clk))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	base := ms(t0)
	var batch []Sample
	for i := range 20000 {
		id := sid("fl", "i", strconv.Itoa(i))
		for k := range 10 {
			batch = append(batch, Sample{ID: id, Shard: db.Shard(id), T: base + int64(k)*1000, V: float64(k)})
		}
	}
	if err := db.WriteBatch("default", batch); err != nil {
		b.Fatal(err)
	}
	h := sid("other_hist")
	if err := db.WriteHistograms("default", mixedSamples(db, h, base, 3)); err != nil {
		b.Fatal(err)
	}
	ms := []*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, "__name__", "fl")}
	ns, _ := db.namespace("default")
	ids, _ := ns.index.Query(ms, base, base+100_000)
	b.Run("prepass", func(b *testing.B) {
		for b.Loop() {
			if db.holdsHistograms(ns, ids, base, base+100_000, nil) {
				b.Fatal("holds")
			}
		}
	})
	for _, c := range []struct {
		name string
		qo   QueryOptions
	}{{"plain", QueryOptions{}}, {"decline", QueryOptions{DeclineHistograms: true}}, {"plain2", QueryOptions{}}, {"decline2", QueryOptions{DeclineHistograms: true}}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				its, err := db.Query(context.Background(), "default", ms, base, base+100_000, c.qo)
				if err != nil || len(its) != 20000 {
					b.Fatal(err, len(its))
				}
			}
		})
	}
}
