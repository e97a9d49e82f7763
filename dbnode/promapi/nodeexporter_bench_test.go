package promapi

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/dbnode/encoding/encodingtest"
	tstorage "github.com/tessera-tsdb/tessera/dbnode/storage"
	"github.com/tessera-tsdb/tessera/ident"
)

// neHosts sizes BenchmarkNodeExporterQueries: 800 hosts are ~100,000
// series (about 125 each). Smaller values make quick profiling runs.
var neHosts = flag.Int("ne.hosts", 800, "node_exporter hosts loaded by BenchmarkNodeExporterQueries")

// neSpan is the history the node_exporter benchmark loads and queries:
// 30 minutes at a 10 s scrape interval, inside one 2 h block.
const (
	neSpan     = 30 * time.Minute
	neInterval = 10_000 // ms
)

// neStart is the first scrape; the history lies inside one block and the
// node's clock stands just after its end, as for live data.
var neStart = time.Date(2026, 11, 22, 10, 5, 0, 0, time.UTC).UnixMilli()

// neQueries are Grafana-style dashboard queries over node_exporter data
// (the "Node Exporter Full" kind): rates, aggregations, topk, a quantile
// over classic buckets, ratios and regex matchers. Each runs as a range
// query over the whole history at a 15 s step.
var neQueries = []struct{ name, q string }{
	{"rate", `rate(node_network_receive_bytes_total{device="eth0"}[5m])`},
	{"sum_by_mode_rate", `sum by (mode) (rate(node_cpu_seconds_total[5m]))`},
	{"cpu_busy", `1 - avg by (instance) (rate(node_cpu_seconds_total{mode="idle"}[5m]))`},
	{"topk", `topk(5, rate(node_disk_written_bytes_total[5m]))`},
	{"histogram_quantile", `histogram_quantile(0.9, sum by (le) (rate(prometheus_http_request_duration_seconds_bucket[5m])))`},
	{"count_by", `count by (mode) (node_cpu_seconds_total)`},
	{"avg_over_time", `avg_over_time(node_load1[5m])`},
	{"regex", `rate(node_cpu_seconds_total{instance=~"10\\.0\\.0\\.1.*",mode!~"idle|iowait"}[5m])`},
	{"fs_used_ratio", `1 - node_filesystem_avail_bytes{fstype!="tmpfs",mountpoint=~"/|/var/.*"} / node_filesystem_size_bytes{fstype!="tmpfs"}`},
	{"mem_ratio", `node_memory_MemAvailable_bytes / node_memory_MemTotal_bytes`},
	{"sum_rate_all", `sum(rate(node_context_switches_total[5m]))`},
}

// neHistogram adds, to one host's series, a classic histogram of request
// durations (cumulative _bucket counters, _sum, _count) on the host's
// scrape timestamps, which node_exporter itself does not export.
func neHistogram(host int, ts []int64, instance string) []encodingtest.Series {
	rng := rand.New(rand.NewPCG(uint64(host), 0x415))
	les := []string{"0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1", "+Inf"}
	bounds := []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1}
	mk := func(name string, kv ...string) encodingtest.Series {
		ls := labels.FromStrings(append([]string{"__name__", name, "handler", "/api/v1/query",
			"instance", instance, "job", "node"}, kv...)...)
		return encodingtest.Series{ID: ident.FromLabels(ls), Labels: ls, Kind: "histogram",
			T: ts, V: make([]float64, len(ts))}
	}
	out := make([]encodingtest.Series, 0, len(les)+2)
	for _, le := range les {
		out = append(out, mk("prometheus_http_request_duration_seconds_bucket", "le", le))
	}
	out = append(out, mk("prometheus_http_request_duration_seconds_sum"), mk("prometheus_http_request_duration_seconds_count"))
	counts := make([]float64, len(les))
	sum := 0.0
	scale := 0.01 + 0.1*rng.Float64()
	for k := range ts {
		for range rng.IntN(40) {
			obs := rng.ExpFloat64() * scale
			sum += obs
			for i := range les {
				if i == len(bounds) || obs <= bounds[i] {
					counts[i]++
				}
			}
		}
		for i := range les {
			out[i].V[k] = counts[i]
		}
		out[len(les)].V[k] = sum
		out[len(les)+1].V[k] = counts[len(les)-1]
	}
	return out
}

// neLoad generates hosts node_exporter hosts (plus neHistogram's series)
// over neSpan one host at a time, handing each host's series to fn.
func neLoad(hosts int, fn func([]encodingtest.Series)) {
	cfg := encodingtest.NodeExporterConfig{Hosts: hosts, Samples: int(neSpan.Milliseconds() / neInterval),
		Seed: 42, Start: neStart, Interval: neInterval}
	encodingtest.NodeExporterHosts(cfg, func(h int, series []encodingtest.Series) {
		inst := series[0].Labels.Get("instance")
		fn(append(series, neHistogram(h, series[0].T, inst)...))
	})
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
func neEnd() int64 { return neStart + neSpan.Milliseconds() + neInterval }

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
		b.Run(nq.name, func(b *testing.B) {
			target := "/api/v1/query_range?" + neRange(nq.q).Encode()
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
	engine := promql.NewEngine(Options{}.withDefaults().engineOpts())
	for _, nq := range neQueries {
		t.Run(nq.name, func(t *testing.T) {
			qry, err := engine.NewRangeQuery(context.Background(), ref, nil, nq.q,
				time.UnixMilli(neStart/1000*1000), time.UnixMilli(neEnd()/1000*1000), 15*time.Second)
			require.NoError(t, err)
			want := qry.Exec(context.Background())
			defer qry.Close()
			require.True(t, compareResult(t, node.srv.URL, "/api/v1/query_range", neRange(nq.q), nq.q, want),
				"%s: empty answer: the benchmark would measure nothing", nq.q)
			at := neStart + 17*60*1000 + 123
			iq, err := engine.NewInstantQuery(context.Background(), ref, nil, nq.q, time.UnixMilli(at))
			require.NoError(t, err)
			defer iq.Close()
			p := url.Values{"query": {nq.q}, "time": {fmt.Sprintf("%d.%03d", at/1000, at%1000)}}
			require.True(t, compareResult(t, node.srv.URL, "/api/v1/query", p, nq.q, iq.Exec(context.Background())))
		})
	}
}
