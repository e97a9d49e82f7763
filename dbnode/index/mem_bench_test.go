package index

import (
	"fmt"
	"runtime"
	"strconv"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/tessera-tsdb/tessera/ident"
)

// benchShapedIDs returns the IDs `tessera bench` writes for n series:
// __name__ over 4 names, group i/100, instance over 50 hosts, job and a
// series label whose every value is unique (as pod or container IDs are).
func benchShapedIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = string(ident.FromLabels(labels.FromStrings(
			"__name__", "bench_metric_"+strconv.Itoa(i%4),
			"group", strconv.Itoa(i/100),
			"instance", "host-"+strconv.Itoa(i%50)+":9100",
			"job", "bench",
			"series", strconv.Itoa(i),
		)))
	}
	return ids
}

// BenchmarkIndexBytesPerSeries reports the live heap the index adds per
// series (after a GC) beyond the IDs, which the caller (storage) owns and
// the index shares through InsertString: what the index costs a node per
// active series. Run with -benchtime=1x.
func BenchmarkIndexBytesPerSeries(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprintf("series=%d", n), func(b *testing.B) {
			ids := benchShapedIDs(n)
			for b.Loop() {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				cpu := startCPU()
				ix := New(2 * 3600 * 1000)
				for _, id := range ids {
					if err := ix.InsertString(id, 0); err != nil {
						b.Fatal(err)
					}
				}
				cpu.report(b, n)
				runtime.GC()
				runtime.ReadMemStats(&after)
				b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/float64(n), "B/series")
				runtime.KeepAlive(ix)
			}
		})
	}
}

// BenchmarkQueryUniqueLabel runs the queries that read every value of a
// label whose values are all unique (its value table then holds no
// strings: each value is read back from its series' ID), on 100k series
// shaped as `tessera bench` writes them.
func BenchmarkQueryUniqueLabel(b *testing.B) {
	ids := benchShapedIDs(100_000)
	ix := New(2 * 3600 * 1000)
	for _, id := range ids {
		if err := ix.InsertString(id, 0); err != nil {
			b.Fatal(err)
		}
	}
	benchQueries(b, ix, []benchQuery{
		{"regex_all_values", []*labels.Matcher{mt(b, "series", "=~", "1234.*")}},
		{"name_and_regex", []*labels.Matcher{mt(b, "__name__", "=", "bench_metric_1"), mt(b, "series", "=~", ".*99")}},
		{"eq_unique", []*labels.Matcher{mt(b, "series", "=", "77777")}},
		{"set_unique", []*labels.Matcher{mt(b, "series", "=~", "1|22|333|4444|55555")}},
		{"not_eq_unique", []*labels.Matcher{mt(b, "group", "=", "7"), mt(b, "series", "!=", "777")}},
	})
	b.Run("label_values_series", func(b *testing.B) {
		cpu := startCPU()
		for b.Loop() {
			if _, err := ix.LabelValues("series", nil, 0, 1000); err != nil {
				b.Fatal(err)
			}
		}
		cpu.report(b, b.N)
	})
}
