package index

import (
	"cmp"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"
)

var cpuModes = []string{"user", "system", "idle", "iowait", "irq", "softirq", "steal", "nice"}

// benchIDs returns n distinct node_exporter-like series IDs: per instance,
// 128 node_cpu_seconds_total series (16 cpus x 8 modes) and then histogram
// buckets of metric_<k>, with __name__, instance, job, region and cpu/mode or
// le labels (~90 bytes per ID).
func benchIDs(n int) [][]byte {
	instances := 100
	if n > 200_000 {
		instances = 1000
	}
	perInstance := (n + instances - 1) / instances
	ids := make([][]byte, 0, n)
	for k := 0; len(ids) < n; k++ {
		for h := 0; h < instances && len(ids) < n; h++ {
			kv := []string{"instance", fmt.Sprintf("host-%d:9100", h), "job", "node", "region", fmt.Sprintf("r%d", h%4)}
			if k < 128 && k < perInstance {
				kv = append(kv, "__name__", "node_cpu_seconds_total", "cpu", fmt.Sprint(k/8), "mode", cpuModes[k%8])
			} else {
				kv = append(kv, "__name__", fmt.Sprintf("metric_%d_bucket", (k-128)/8), "le", fmt.Sprint((k-128)%8))
			}
			ids = append(ids, sid(kv...))
		}
	}
	return ids
}

func filledIndex(b *testing.B, ids [][]byte, block int64) *Index {
	ix := New(2 * 3600 * 1000)
	for _, id := range ids {
		require.NoError(b, ix.Insert(id, block))
	}
	return ix
}

func BenchmarkInsertNew(b *testing.B) {
	ids := benchIDs(b.N)
	ix := New(2 * 3600 * 1000)
	b.ReportAllocs()
	b.ResetTimer()
	cpu := startCPU()
	for i := range b.N {
		if err := ix.Insert(ids[i], 0); err != nil {
			b.Fatal(err)
		}
	}
	cpu.report(b, b.N)
}

// BenchmarkInsertExisting is the write path: the series is already in the
// block. With 1k series everything is in cache; with 100k the ID -> ref
// lookup misses cache, as it does in production.
func BenchmarkInsertExisting(b *testing.B) {
	for _, n := range []int{1_000, 100_000} {
		b.Run(fmt.Sprintf("series=%d", n), func(b *testing.B) {
			ids := benchIDs(n)
			ix := filledIndex(b, ids, 0)
			b.ReportAllocs()
			b.ResetTimer()
			cpu := startCPU()
			for i := range b.N {
				if err := ix.Insert(ids[i%len(ids)], 0); err != nil {
					b.Fatal(err)
				}
			}
			cpu.report(b, b.N)
		})
	}
}

func BenchmarkInsertParallel(b *testing.B) {
	b.Run("existing", func(b *testing.B) {
		ids := benchIDs(100_000)
		ix := filledIndex(b, ids, 0)
		var worker atomic.Int64
		b.ReportAllocs()
		b.ResetTimer()
		cpu := startCPU()
		defer cpu.report(b, b.N)
		b.RunParallel(func(pb *testing.PB) {
			i := int(worker.Add(1)) * 7919
			for pb.Next() {
				if err := ix.Insert(ids[i%len(ids)], 0); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	})
	b.Run("new", func(b *testing.B) {
		ids := benchIDs(b.N)
		ix := New(2 * 3600 * 1000)
		var next atomic.Int64
		b.ReportAllocs()
		b.ResetTimer()
		cpu := startCPU()
		defer cpu.report(b, b.N)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := ix.Insert(ids[next.Add(1)-1], 0); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
}

func BenchmarkQuery(b *testing.B) {
	ix := filledIndex(b, benchIDs(100_000), 0)
	benchQueries(b, ix, []benchQuery{
		{"eq_and_set", []*labels.Matcher{mt(b, "__name__", "=", "node_cpu_seconds_total"), mt(b, "mode", "=~", "user|system")}},
		{"eq_and_regex", []*labels.Matcher{mt(b, "__name__", "=", "node_cpu_seconds_total"), mt(b, "instance", "=~", "host-4.*"), mt(b, "mode", "!=", "idle")}},
		{"regex_name", []*labels.Matcher{mt(b, "__name__", "=~", "metric_1[0-9]_bucket"), mt(b, "le", "=~", "[0-3]")}},
		{"negative_only", []*labels.Matcher{mt(b, "job", "!=", "api"), mt(b, "region", "!~", "r[12]")}},
	})
	b.Run("label_values_instance", func(b *testing.B) {
		ms := []*labels.Matcher{mt(b, "__name__", "=", "node_cpu_seconds_total"), mt(b, "mode", "=", "user")}
		for b.Loop() {
			if _, err := ix.LabelValues("instance", ms, 0, 1000); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkRebuild1M inserts 1M new series into one block, as the start-up
// rebuild does, and reports throughput and retained heap per series (the
// index's own copy of each ID included). Run with -benchtime=1x.
func BenchmarkRebuild1M(b *testing.B) {
	const n = 1_000_000
	ids := benchIDs(n)
	var idBytes int
	for _, id := range ids {
		idBytes += len(id)
	}
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		start, cpu := time.Now(), processCPU()
		ix := New(2 * 3600 * 1000)
		for _, id := range ids {
			if err := ix.Insert(id, 0); err != nil {
				b.Fatal(err)
			}
		}
		elapsed, cpuTime := time.Since(start), processCPU()-cpu
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(n/elapsed.Seconds(), "series/s")
		b.ReportMetric(n/cpuTime.Seconds(), "series/cpu-s")
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "B/series")
		b.ReportMetric(float64(idBytes)/n, "IDbytes/series")
		runtime.KeepAlive(ix)
	}
}

// benchQuery is a named index query of a benchmark.
type benchQuery struct {
	name string
	ms   []*labels.Matcher
}

// benchQueries runs each query as a sub-benchmark, reporting its CPU and
// how many series it found.
func benchQueries(b *testing.B, ix *Index, qs []benchQuery) {
	for _, q := range qs {
		b.Run(q.name, func(b *testing.B) {
			var n int
			b.ReportAllocs()
			cpu := startCPU()
			for b.Loop() {
				got, err := ix.Query(q.ms, 0, 1000)
				if err != nil {
					b.Fatal(err)
				}
				n = len(got)
			}
			cpu.report(b, b.N)
			b.ReportMetric(float64(n), "series")
		})
	}
}

// BenchmarkRestartIndex: a block of n series shaped like `tessera bench`'s
// (five labels: a few metric names, a group of 100, 50 instances, one job,
// a unique series number) indexed one by one, into an empty index: either
// by Insert (a lookup under the read lock, then under the write lock) or
// by InsertNewString (one lookup, under the write lock), as the replay
// does; cpu-ns/op is per series, the GC included.
func BenchmarkRestartIndex(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		ids := make([]string, n)
		for i := range ids {
			ids[i] = string(sid("__name__", "bench_metric_"+strconv.Itoa(i%4), "group", strconv.Itoa(i/100),
				"instance", "host-"+strconv.Itoa(i%50)+":9100", "job", "bench", "series", strconv.Itoa(i)))
		}
		b.Run(fmt.Sprintf("series=%d/insert", n), func(b *testing.B) {
			c := startCPU()
			for range b.N {
				ix := New(10)
				for _, id := range ids {
					if err := ix.InsertString(id, 0); err != nil {
						b.Fatal(err)
					}
				}
			}
			c.report(b, b.N*n)
		})
		b.Run(fmt.Sprintf("series=%d/insertnew", n), func(b *testing.B) {
			c := startCPU()
			for range b.N {
				ix := New(10)
				for _, id := range ids {
					if err := ix.InsertNewString(id, 0); err != nil {
						b.Fatal(err)
					}
				}
			}
			c.report(b, b.N*n)
		})
		// prepared: the snapshot restart's way (PrepareNewTagged on the
		// loaders, AddPreparedBatch on the index stage), in batches of
		// 1024 as the replayer hands them over, the series in the order
		// they were created (a version 2 snapshot's); the preparing is
		// timed too. shuffled: the same in the order of a hash of their
		// IDs, as a version 1 snapshot's sections (shards) handed them
		// over, each ID a new string as the loaders make them: the
		// series of one group get refs far apart, and each group's
		// bitmap a container per series (B/series: the index's heap).
		perm := make([]int, n)
		for i := range perm {
			perm[i] = i
		}
		slices.SortFunc(perm, func(a, c int) int { return cmp.Compare(xxhash.Sum64String(ids[a]), xxhash.Sum64String(ids[c])) })
		shuffled := make([]string, n)
		for i, j := range perm {
			shuffled[i] = strings.Clone(ids[j])
		}
		for _, order := range []struct {
			name string
			ids  []string
		}{{"prepared", ids}, {"prepared-shuffled", shuffled}} {
			ids := order.ids
			b.Run(fmt.Sprintf("series=%d/%s", n, order.name), func(b *testing.B) {
				c := startCPU()
				var pb PreparedBatch
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				var ix *Index
				for range b.N {
					ix = New(10)
					ix.ReserveSeries(n)
					for lo := 0; lo < n; lo += 1024 {
						for i, id := range ids[lo:min(lo+1024, n)] {
							if err := ix.PrepareNewTagged(&pb, id, 0, uint32(lo+i)); err != nil {
								b.Fatal(err)
							}
						}
						if err := ix.AddPreparedBatch(&pb); err != nil {
							b.Fatal(err)
						}
						pb.Reset()
					}
				}
				c.report(b, b.N*n)
				runtime.GC()
				runtime.ReadMemStats(&after)
				b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(n), "B/series")
				runtime.KeepAlive(ix)
			})
		}
	}
}
