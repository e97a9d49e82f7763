package repair

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/tessera-tsdb/tessera/client"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
	"github.com/tessera-tsdb/tessera/dbnode/storage/storagetest"
	"github.com/tessera-tsdb/tessera/ident"
	"github.com/tessera-tsdb/tessera/placement"
)

// The cost benchmarks compare one node with one peer over real storage
// engines in one process, so the CPU they report is both sides of the
// exchange: the node's own digests and the peer's answers. With RF 3 a
// node compares each shard with two peers and answers two peers' passes,
// so its CPU per pass is about twice the benchmark's.
//
// The data: benchSeries series of benchSamples samples (one every 10s, an
// hour), 4096 shards as a default placement has, in a block both sides
// flushed to filesets.
const (
	benchShards  = 4096
	benchSeries  = 10_000
	benchSamples = 360
)

type benchSetup struct {
	local, peer *storage.Database
	r           *Repairer
	clk         *clock
	ids         [][]byte
	p           *dbPeer
}

func newBenchSetup(b *testing.B, compareOnly bool) *benchSetup {
	b.Helper()
	clk := &clock{t: time.Date(2026, 11, 20, 13, 0, 0, 0, time.UTC)}
	s := &benchSetup{clk: clk,
		local: storagetest.Open(b, benchShards, clk.Now),
		peer:  storagetest.Open(b, benchShards, clk.Now)}
	s.p = &dbPeer{db: s.peer, pageSeries: 10_000}
	from := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC).UnixMilli()
	var batch []storage.Sample
	for i := 0; i < benchSeries; i++ {
		id := ident.FromLabels(labels.FromStrings("__name__", "bench_metric", "instance", fmt.Sprintf("host-%05d", i)))
		s.ids = append(s.ids, id)
		sh := ident.Shard(id, benchShards)
		for k := 0; k < benchSamples; k++ {
			batch = append(batch, storage.Sample{ID: id, Shard: sh, T: from + int64(k)*10_000, V: float64(i*k%977) + 0.25})
		}
		if len(batch) >= 50_000 || i == benchSeries-1 {
			for _, db := range []*storage.Database{s.local, s.peer} {
				if err := db.WriteBatch(testNS, append([]storage.Sample(nil), batch...)); err != nil {
					b.Fatal(err)
				}
			}
			batch = batch[:0]
		}
	}
	for _, db := range []*storage.Database{s.local, s.peer} {
		if err := db.Tick(); err != nil {
			b.Fatal(err)
		}
	}
	p := placement.Placement{NumShards: benchShards, ReplicaFactor: 2, IsSharded: true}
	for _, id := range []string{"a", "b"} {
		in := placement.Instance{ID: id, IsolationGroup: id, Weight: 1, Endpoint: id}
		for sh := uint32(0); sh < benchShards; sh++ {
			in.Shards = append(in.Shards, placement.Shard{ID: sh, State: placement.Available})
		}
		p.Instances = append(p.Instances, in)
	}
	m := client.NewMap(p)
	r, err := New(Options{InstanceID: "a", DB: s.local,
		Dial:      func(string) (Peer, error) { return s.p, nil },
		Placement: func() *client.Map { return m }, Every: time.Hour, CompareOnly: compareOnly,
		SettleMargin: time.Minute, SeriesPerFetch: 256, StateDir: b.TempDir(), Now: clk.Now})
	if err != nil {
		b.Fatal(err)
	}
	s.r = r
	return s
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// report adds the per-shard and per-series figures and, for agreeing
// replicas, the share of one core that repair at the default interval
// (config: repair.every 1h) costs a node with two peers.
func report(b *testing.B, cpu time.Duration, passes []Pass) {
	var t Tally
	for _, p := range passes {
		t.add(p.Tally)
	}
	n := float64(len(passes))
	cpuPerPass := cpu.Seconds() / n
	b.ReportMetric(cpuPerPass, "cpu-s/pass")
	b.ReportMetric(float64(t.Bytes)/n/benchShards, "bytes/shard")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n/benchShards, "ns/shard")
	b.ReportMetric(cpu.Seconds()*1e9/(n*benchSeries), "cpu-ns/series")
	b.ReportMetric(float64(t.SeriesRepaired)/n, "series-repaired/pass")
	b.ReportMetric(2*cpuPerPass/time.Hour.Seconds()*100, "%core@1h,2peers")
}

// BenchmarkPassAgree: replicas hold the same 3.6M samples; a pass is one
// digest exchange per shard.
func BenchmarkPassAgree(b *testing.B) {
	s := newBenchSetup(b, false)
	var passes []Pass
	b.ResetTimer()
	cpu0 := cpuTime()
	for i := 0; i < b.N; i++ {
		p, err := s.r.RunPass(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		if p.BlocksDiffering != 0 || p.SeriesCompared != 0 {
			b.Fatalf("replicas should agree: %+v", p.Tally)
		}
		passes = append(passes, p)
	}
	cpu := cpuTime() - cpu0
	b.StopTimer()
	report(b, cpu, passes)
}

// BenchmarkPassDiffer: before each pass the peer gets one new sample in
// 1% of the series (100 series, spread over the shards); the pass
// narrows those blocks and pulls and merges exactly those series.
func BenchmarkPassDiffer(b *testing.B) {
	s := newBenchSetup(b, false)
	base := time.Date(2026, 11, 20, 11, 0, 0, 0, time.UTC).UnixMilli()
	var passes []Pass
	var cpu time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		var batch []storage.Sample
		for k := 0; k < benchSeries; k += 100 {
			id := s.ids[(k+i)%benchSeries]
			batch = append(batch, storage.Sample{ID: id, Shard: ident.Shard(id, benchShards), T: base + int64(i)*7 + 1, V: 1})
		}
		if err := s.peer.WriteBatch(testNS, batch); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		cpu0 := cpuTime()
		p, err := s.r.RunPass(context.Background())
		cpu += cpuTime() - cpu0
		if err != nil {
			b.Fatal(err)
		}
		if p.SeriesRepaired != int64(len(batch)) || p.Errors != 0 {
			b.Fatalf("want %d series repaired: %+v", len(batch), p.Tally)
		}
		passes = append(passes, p)
	}
	b.StopTimer()
	report(b, cpu, passes)
}
