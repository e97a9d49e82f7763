package promapi

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql"
	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/bench/nodeexporter"
	"github.com/tessera-tsdb/tessera/dbnode/encoding/encodingtest"
	tstorage "github.com/tessera-tsdb/tessera/dbnode/storage"
)

// neHosts sizes BenchmarkNodeExporterQueries: 800 hosts are ~100,000
// series (about 125 each). Smaller values make quick profiling runs.
var neHosts = flag.Int("ne.hosts", 800, "node_exporter hosts loaded by BenchmarkNodeExporterQueries")

// neSpan is the history the node_exporter benchmark loads and queries:
// 30 minutes at a 10 s scrape interval, inside one 2 h block.
const (
	neSpan     = nodeexporter.Span
	neInterval = nodeexporter.Interval // ms
)

// neStart is the first scrape; the history lies inside one block and the
// node's clock stands just after its end, as for live data.
var neStart = time.Date(2026, 11, 22, 10, 5, 0, 0, time.UTC).UnixMilli()

// neQueries are the workload's Grafana-style dashboard queries
// (nodeexporter.Queries); each runs as a range query over the whole
// history at a 15 s step.
var neQueries = nodeexporter.Queries

// neLoad generates hosts node_exporter hosts (nodeexporter.Hosts, with
// its request-duration histogram) over neSpan one host at a time, handing
// each host's series to fn.
func neLoad(hosts int, fn func([]encodingtest.Series)) {
	nodeexporter.Hosts(hosts, neStart, func(_ int, series []encodingtest.Series) { fn(series) })
}

// neNode is a node holding hosts' node_exporter history, written host by
// host into its storage (cold writes: the clock stands after the history),
// and the number of series and samples it holds. The history's end is
// neEnd.
func neNode(tb testing.TB, hosts int, each func([]encodingtest.Series)) (node *tesseraNode, numSeries, numSamples int) {
	tb.Helper()
	node = newTesseraNode(tb, time.UnixMilli(neEnd()+30_000), Options{})
	var batch []tstorage.Sample
	neLoad(hosts, func(series []encodingtest.Series) {
		batch = batch[:0]
		for _, s := range series {
			shard := node.db.Shard(s.ID)
			for k := range s.T {
				batch = append(batch, tstorage.Sample{ID: s.ID, Shard: shard, T: s.T[k], V: s.V[k]})
			}
		}
		require.NoError(tb, node.db.WriteBatch("default", batch))
		numSeries += len(series)
		numSamples += len(batch)
		if each != nil {
			each(series)
		}
	})
	return node, numSeries, numSamples
}

// neEnd is the end of the queried range: the last scrape may be up to one
// interval (plus jitter) after neStart+neSpan.
func neEnd() int64 { return nodeexporter.End(neStart) }

// neRange is the range query parameters Grafana sends for the history.
func neRange(q string) url.Values {
	return url.Values{"query": {q}, "start": {strconv.FormatInt(neStart/1000, 10)},
		"end": {strconv.FormatInt(neEnd()/1000, 10)}, "step": {"15s"}}
}

// BenchmarkNodeExporterQueries runs Grafana-style queries over ~100,000
// node_exporter series x 30 minutes (issue 18: query speed), each a range
// query at a 15 s step through the HTTP handler (parameters, engine,
// storage reads, JSON). One sub-benchmark per query:
//
//	go test -run '^$' -bench NodeExporterQueries -benchtime 5x ./dbnode/promapi
//	go test -run '^$' -bench 'NodeExporterQueries/sum_by_mode' -ne.hosts 200 -cpuprofile cpu.out ./dbnode/promapi
func BenchmarkNodeExporterQueries(b *testing.B) {
	t0 := time.Now()
	node, numSeries, numSamples := neNode(b, *neHosts, nil)
	b.Logf("loaded %d hosts: %d series, %d samples in %v", *neHosts, numSeries, numSamples, time.Since(t0).Round(time.Millisecond))
	handler := node.srv.Config.Handler
	for _, nq := range neQueries {
		b.Run(nq.Name, func(b *testing.B) {
			target := "/api/v1/query_range?" + neRange(nq.Expr).Encode()
			run := func() *httptest.ResponseRecorder {
				rec := httptest.NewRecorder()
				handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
				return rec
			}
			rec := run()
			require.Equal(b, http.StatusOK, rec.Code, rec.Body.String())
			b.ReportMetric(float64(rec.Body.Len()), "resp_bytes")
			cpu0 := cpuTime()
			for b.Loop() {
				if rec := run(); rec.Code != http.StatusOK {
					b.Fatal(rec.Body.String())
				}
			}
			b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/op")
			b.ReportMetric(float64(numSeries), "series")
		})
	}
}

// TestNodeExporterQueriesMatchPrometheus holds the benchmark's queries to
// the promql engine over Prometheus' own chunks, on a few hosts of the same
// data, as range and instant queries, so that what the benchmark measures
// is a correct answer.
func TestNodeExporterQueriesMatchPrometheus(t *testing.T) {
	ref := &refStorage{}
	node, numSeries, _ := neNode(t, 12, func(series []encodingtest.Series) {
		for _, s := range series {
			samples := make([]tsample, len(s.T))
			for k := range s.T {
				samples[k] = tsample{s.T[k], s.V[k]}
			}
			ref.add(s.Labels, samples)
		}
	})
	require.Greater(t, numSeries, 12*100)
	engine := promql.NewEngine(testOptions(Options{}).resolved().engineOpts())
	for _, nq := range neQueries {
		t.Run(nq.Name, func(t *testing.T) {
			qry, err := engine.NewRangeQuery(context.Background(), ref, nil, nq.Expr,
				time.UnixMilli(neStart/1000*1000), time.UnixMilli(neEnd()/1000*1000), 15*time.Second)
			require.NoError(t, err)
			want := qry.Exec(context.Background())
			defer qry.Close()
			require.True(t, compareResult(t, node.srv.URL, "/api/v1/query_range", neRange(nq.Expr), nq.Expr, want),
				"%s: empty answer: the benchmark would measure nothing", nq.Expr)
			at := neStart + 17*60*1000 + 123
			iq, err := engine.NewInstantQuery(context.Background(), ref, nil, nq.Expr, time.UnixMilli(at))
			require.NoError(t, err)
			defer iq.Close()
			p := url.Values{"query": {nq.Expr}, "time": {fmt.Sprintf("%d.%03d", at/1000, at%1000)}}
			require.True(t, compareResult(t, node.srv.URL, "/api/v1/query", p, nq.Expr, iq.Exec(context.Background())))
		})
	}
}
