// Package nodeexporter is the node_exporter-like workload that issue 18
// measures query speed on: ~125 series per host (encodingtest's
// node_exporter hosts plus a classic request-duration histogram) scraped
// every 10 s for 30 minutes, and eleven Grafana-style range queries over
// it.
//
// It is an ordinary package rather than part of a _test file so that the
// in-process benchmark (promapi's BenchmarkNodeExporterQueries) and the
// side-by-side comparison over HTTP (`tessera bench --workload
// nodeexporter` and `tessera bench queries`, scripts/query-vs-vm.sh, which
// load the same data into Tessera and VictoriaMetrics) measure the same
// data and the same queries: a figure from one can be checked with the
// other.
package nodeexporter

import (
	"math/rand/v2"
	"time"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/tessera-tsdb/tessera/dbnode/encoding/encodingtest"
	"github.com/tessera-tsdb/tessera/ident"
)

// Span is the history each host gets: 30 minutes, inside one 2 h block
// when started as the benchmark starts it, at Interval (ms) between
// scrapes.
const (
	Span     = 30 * time.Minute
	Interval = 10_000
)

// Samples is how many scrapes each series gets over Span.
const Samples = int(Span / time.Millisecond / Interval)

// Step is the query resolution the queries run at, as a Grafana panel of
// ~120 points over Span would ask.
const Step = 15 * time.Second

// Query is one named PromQL expression.
type Query struct{ Name, Expr string }

// Queries are Grafana-style dashboard queries over node_exporter data
// (the "Node Exporter Full" kind): rates, aggregations, topk, a quantile
// over classic buckets, ratios and regex matchers. Each runs as a range
// query over the whole history at Step.
var Queries = []Query{
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

// End is the end of the range the queries cover for data starting at
// start (ms): the last scrape may be up to one interval (plus jitter)
// after start+Span.
func End(start int64) int64 { return start + Span.Milliseconds() + Interval }

// Hosts generates hosts node_exporter hosts' history from start (ms), with
// Histogram's series added to each, one host at a time, handing fn each
// host's series before generating the next: 800 hosts are ~100,000 series
// and 18 M samples, more than a load generator should hold at once. The
// same hosts and start give the same data.
func Hosts(hosts int, start int64, fn func(host int, series []encodingtest.Series)) {
	cfg := encodingtest.NodeExporterConfig{Hosts: hosts, Samples: Samples,
		Seed: 42, Start: start, Interval: Interval}
	encodingtest.NodeExporterHosts(cfg, func(h int, series []encodingtest.Series) {
		inst := series[0].Labels.Get("instance")
		fn(h, append(series, Histogram(h, series[0].T, inst)...))
	})
}

// Histogram is, for one host, a classic histogram of request durations
// (cumulative _bucket counters, _sum, _count) on the host's scrape
// timestamps ts, which node_exporter itself does not export, so that
// histogram_quantile has something to read.
func Histogram(host int, ts []int64, instance string) []encodingtest.Series {
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
