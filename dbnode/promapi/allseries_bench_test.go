package promapi

import (
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/bench"
	tstorage "github.com/tessera-tsdb/tessera/dbnode/storage"
	"github.com/tessera-tsdb/tessera/ident"
)

// allSeries sizes BenchmarkAllSeriesQueries: `tessera bench`'s series,
// 4 samples each, as scripts/mem-per-series.sh loads them.
var allSeries = flag.Int("all.series", 200_000, "series loaded by BenchmarkAllSeriesQueries")

// allSeriesQueries are scripts/mem-per-series.sh's queries over every
// series (issue 30): a dashboard overview's count and a rate summed by
// instance, with no metric name.
var allSeriesQueries = []struct{ name, expr string }{
	{"count_by_job", `count by (job) ({job="bench"})`},
	{"sum_by_instance_rate", `sum by (instance) (rate({job="bench"}[5m]))`},
}

// BenchmarkAllSeriesQueries runs the instant queries of
// scripts/mem-per-series.sh over -all.series series of `tessera bench`
// (its labels and values, 4 samples 1 s apart, in memory as after the
// bench) through the HTTP handler, at the last sample's time, reporting
// the process' CPU time per query (the engine, the reads and the fast
// path's workers alike):
//
//	go test -run '^$' -bench AllSeriesQueries -benchtime 5x ./dbnode/promapi
//	go test -run '^$' -bench AllSeriesQueries -all.series 1000000 -cpuprofile cpu.out ./dbnode/promapi
func BenchmarkAllSeriesQueries(b *testing.B) {
	const samples = 4
	start := time.Date(2026, 11, 28, 3, 0, 0, 0, time.UTC).UnixMilli()
	last := start + (samples-1)*1000
	node := newTesseraNode(b, time.UnixMilli(last+10_000), Options{})
	o := bench.Options{Metric: "tessera_bench", Series: *allSeries}
	var batch []tstorage.Sample
	for lo := 0; lo < o.Series; lo += 10_000 {
		batch = batch[:0]
		for i := lo; i < min(lo+10_000, o.Series); i++ {
			var lb labels.ScratchBuilder
			for _, l := range bench.Labels(o, i) {
				lb.Add(l.Name, l.Value)
			}
			id := ident.FromLabels(lb.Labels())
			shard := node.db.Shard(id)
			for j := range samples {
				batch = append(batch, tstorage.Sample{ID: id, Shard: shard, T: start + int64(j)*1000, V: bench.Value(i, j)})
			}
		}
		require.NoError(b, node.db.WriteBatch("default", batch))
	}
	handler := node.srv.Config.Handler
	at := fmt.Sprintf("%d.%03d", last/1000, last%1000)
	for _, q := range allSeriesQueries {
		b.Run(q.name, func(b *testing.B) {
			target := "/api/v1/query?" + url.Values{"query": {q.expr}, "time": {at}}.Encode()
			run := func() *httptest.ResponseRecorder {
				rec := httptest.NewRecorder()
				handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
				return rec
			}
			rec := run()
			require.Equal(b, http.StatusOK, rec.Code, rec.Body.String())
			cpu0 := cpuTime()
			for b.Loop() {
				if rec := run(); rec.Code != http.StatusOK {
					b.Fatal(rec.Body.String())
				}
			}
			b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/op")
			b.ReportMetric(float64(o.Series), "series")
		})
	}
}
