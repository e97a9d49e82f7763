package promapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"
	"github.com/prometheus/prometheus/promql"
	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/dbnode/httpapi"
	"github.com/tessera-tsdb/tessera/dbnode/httpapi/httpapitest"
	tstorage "github.com/tessera-tsdb/tessera/dbnode/storage"
	"github.com/tessera-tsdb/tessera/dbnode/storage/storagetest"
)

// tesseraNode is one node's HTTP surface over a real database: remote
// write from httpapi, the query API from this package.
type tesseraNode struct {
	srv *httptest.Server
	db  *tstorage.Database
}

// newTesseraNode opens a database whose clock reads now, so that the
// generated history is inside its retention and write windows.
func newTesseraNode(t testing.TB, now time.Time, opts Options) *tesseraNode {
	t.Helper()
	db := storagetest.Open(t, 64, func() time.Time { return now })
	h := httpapitest.New(t, httpapi.Options{Namespace: "default", NumShards: 64, Backend: httpapi.Local{DB: db}})
	newAPI(t, httpapi.Local{DB: db}, opts).Register(h.Mux())
	srv := httptest.NewServer(h.Handler())
	t.Cleanup(func() {
		srv.Close()
		require.NoError(t, db.Close())
	})
	return &tesseraNode{srv: srv, db: db}
}

// remoteWrite sends the data set as Prometheus would: one request per
// five minutes of scrapes, all series in each, snappy-compressed protobuf.
func (n *tesseraNode) remoteWrite(t testing.TB, d *dataset) {
	t.Helper()
	window := (5 * time.Minute).Milliseconds()
	next := make([]int, len(d.series))
	for from := d.start - window; from <= d.end+window; from += window {
		var req prompb.WriteRequest
		for i, s := range d.series {
			var ts prompb.TimeSeries
			for ; next[i] < len(s.samples) && s.samples[next[i]].t < from+window; next[i]++ {
				smp := s.samples[next[i]]
				ts.Samples = append(ts.Samples, prompb.Sample{Timestamp: smp.t, Value: smp.v})
			}
			if len(ts.Samples) == 0 {
				continue
			}
			s.lset.Range(func(l labels.Label) {
				ts.Labels = append(ts.Labels, prompb.Label{Name: l.Name, Value: l.Value})
			})
			req.Timeseries = append(req.Timeseries, ts)
		}
		if len(req.Timeseries) == 0 {
			continue
		}
		raw, err := req.Marshal()
		require.NoError(t, err)
		hreq, err := http.NewRequest(http.MethodPost, n.srv.URL+"/api/v1/prom/remote/write", bytes.NewReader(snappy.Encode(nil, raw)))
		require.NoError(t, err)
		hreq.Header.Set("Content-Encoding", "snappy")
		hreq.Header.Set("Content-Type", "application/x-protobuf")
		hreq.Header.Set("X-Prometheus-Remote-Write-Version", "0.1.0")
		resp, err := http.DefaultClient.Do(hreq)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusNoContent, resp.StatusCode, string(body))
	}
	for i, s := range d.series {
		require.Equal(t, len(s.samples), next[i], "series %s not fully written", s.lset)
	}
}

// apiResponse is Prometheus' JSON envelope.
type apiResponse struct {
	Status    string          `json:"status"`
	Data      json.RawMessage `json:"data"`
	ErrorType string          `json:"errorType"`
	Error     string          `json:"error"`
	Warnings  []string        `json:"warnings"`
	Infos     []string        `json:"infos"`
}

func get(t testing.TB, base, path string, params url.Values) (int, apiResponse) {
	t.Helper()
	resp, err := http.Get(base + path + "?" + params.Encode())
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, "application/json", resp.Header.Get("Content-Type"), string(body))
	var r apiResponse
	require.NoError(t, json.Unmarshal(body, &r), string(body))
	return resp.StatusCode, r
}

// normResult is a query result in a form both sides convert to: series
// keyed by their label string, points with exact float bits (any NaN
// compares equal to any NaN: JSON does not carry payloads).
type normResult struct {
	Type   string
	Series []normSeries
}

type normSeries struct {
	Metric string
	Points []normPoint
	// Hist are native histogram points, each V the histogram as
	// Prometheus' JSON renders it (compacted).
	Hist []normPoint
}

// histJSON renders a histogram point the way the HTTP API does (HPoint's
// JSON, [t, {...}]) and returns the histogram object, compacted.
func histJSON(p promql.HPoint) string {
	b, err := json.Marshal(p)
	if err != nil {
		panic(err)
	}
	var pair [2]json.RawMessage
	if err := json.Unmarshal(b, &pair); err != nil {
		panic(err)
	}
	return compactJSON(pair[1])
}

func compactJSON(raw json.RawMessage) string {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		panic(err)
	}
	return buf.String()
}

type normPoint struct {
	T int64
	V string // canonical: strconv 'g' of the value, or "NaN"
}

func canon(v float64) string {
	if math.IsNaN(v) {
		return "NaN"
	}
	if v == 0 && math.Signbit(v) {
		return "-0"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

func normFromEngine(v promql.Result) normResult {
	var out normResult
	switch v := v.Value.(type) {
	case promql.Matrix:
		out.Type = "matrix"
		for _, s := range v {
			ns := normSeries{Metric: s.Metric.String()}
			for _, p := range s.Floats {
				ns.Points = append(ns.Points, normPoint{p.T, canon(p.F)})
			}
			for _, p := range s.Histograms {
				ns.Hist = append(ns.Hist, normPoint{p.T, histJSON(p)})
			}
			out.Series = append(out.Series, ns)
		}
	case promql.Vector:
		out.Type = "vector"
		for _, s := range v {
			if s.H != nil {
				out.Series = append(out.Series, normSeries{Metric: s.Metric.String(), Hist: []normPoint{{s.T, histJSON(promql.HPoint{T: s.T, H: s.H})}}})
				continue
			}
			out.Series = append(out.Series, normSeries{Metric: s.Metric.String(), Points: []normPoint{{s.T, canon(s.F)}}})
		}
	case promql.Scalar:
		out.Type = "scalar"
		out.Series = []normSeries{{Points: []normPoint{{v.T, canon(v.V)}}}}
	case promql.String:
		out.Type = "string"
		out.Series = []normSeries{{Points: []normPoint{{v.T, v.V}}}}
	}
	return out
}

func parseTS(t testing.TB, n json.Number) int64 {
	f, err := strconv.ParseFloat(string(n), 64)
	require.NoError(t, err)
	return int64(math.Round(f * 1000))
}

func parseVal(t testing.TB, s string) string {
	f, err := strconv.ParseFloat(s, 64)
	require.NoError(t, err, "value %q", s)
	return canon(f)
}

func labelString(m map[string]string) string {
	return labels.FromMap(m).String()
}

func normFromJSON(t testing.TB, data json.RawMessage) normResult {
	var qd struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	require.NoError(t, json.Unmarshal(data, &qd))
	dec := func(v any) {
		d := json.NewDecoder(bytes.NewReader(qd.Result))
		d.UseNumber()
		require.NoError(t, d.Decode(v))
	}
	out := normResult{Type: qd.ResultType}
	switch qd.ResultType {
	case "matrix":
		var m []struct {
			Metric     map[string]string    `json:"metric"`
			Values     [][2]any             `json:"values"`
			Histograms [][2]json.RawMessage `json:"histograms"`
		}
		dec(&m)
		for _, s := range m {
			ns := normSeries{Metric: labelString(s.Metric)}
			for _, p := range s.Values {
				ns.Points = append(ns.Points, normPoint{parseTS(t, p[0].(json.Number)), parseVal(t, p[1].(string))})
			}
			for _, p := range s.Histograms {
				ns.Hist = append(ns.Hist, normPoint{parseTS(t, json.Number(p[0])), compactJSON(p[1])})
			}
			out.Series = append(out.Series, ns)
		}
	case "vector":
		var v []struct {
			Metric    map[string]string  `json:"metric"`
			Value     [2]any             `json:"value"`
			Histogram [2]json.RawMessage `json:"histogram"`
		}
		dec(&v)
		for _, s := range v {
			if s.Histogram[0] != nil {
				out.Series = append(out.Series, normSeries{Metric: labelString(s.Metric),
					Hist: []normPoint{{parseTS(t, json.Number(s.Histogram[0])), compactJSON(s.Histogram[1])}}})
				continue
			}
			out.Series = append(out.Series, normSeries{Metric: labelString(s.Metric),
				Points: []normPoint{{parseTS(t, s.Value[0].(json.Number)), parseVal(t, s.Value[1].(string))}}})
		}
	case "scalar", "string":
		var p [2]any
		dec(&p)
		v := p[1].(string)
		if qd.ResultType == "scalar" {
			v = parseVal(t, v)
		}
		out.Series = []normSeries{{Points: []normPoint{{parseTS(t, p[0].(json.Number)), v}}}}
	default:
		t.Fatalf("unknown result type %q", qd.ResultType)
	}
	return out
}

// fmtTime renders a ms timestamp as a request parameter, alternating
// between the two formats Prometheus accepts.
func fmtTime(ms int64, rfc bool) string {
	if rfc {
		return time.UnixMilli(ms).UTC().Format(time.RFC3339Nano)
	}
	return strconv.FormatFloat(float64(ms)/1000, 'f', -1, 64)
}

// compareQueries is the table every query of the comparison runs through.
var compareQueries = []string{
	`http_requests_total`,
	`http_requests_total{job="api"}`,
	`http_requests_total{job=~"a.*|d.*", code!="500"}`,
	`http_requests_total{instance!~"i[01]", method=~"P.*"}`,
	`{__name__=~"http_requests_.*", job="web", code="500"}`,
	`rate(http_requests_total[5m])`,
	`irate(http_requests_total{job="db"}[1m])`,
	`increase(http_requests_total{job="db", instance="i1"}[10m])`,
	`resets(http_requests_total{job="db"}[30m])`,
	`sum by (job) (rate(http_requests_total[5m]))`,
	`sum without (instance, method) (rate(http_requests_total{code="200"}[5m]))`,
	`sum by (job) (rate(http_requests_total[5m])) > 40`,
	`rate(http_requests_total{code="500"}[5m]) / ignoring(code) rate(http_requests_total{code="200"}[5m])`,
	`histogram_quantile(0.9, sum by (le, job) (rate(request_duration_seconds_bucket[5m])))`,
	`histogram_quantile(0.5, rate(request_duration_seconds_bucket{job="api"}[10m]))`,
	`rate(request_duration_seconds_sum[5m]) / rate(request_duration_seconds_count[5m])`,
	`topk(3, rate(http_requests_total[5m]))`,
	`bottomk(2, node_temp)`,
	`topk by (job) (1, sum by (job, instance) (rate(http_requests_total[5m])))`,
	`http_requests_total{job="web"} offset 30m`,
	`rate(http_requests_total{job="api"}[5m] offset 1h)`,
	`node_temp offset -10m`,
	`max_over_time(rate(http_requests_total{job="db"}[5m])[30m:1m])`,
	`avg_over_time(node_temp[10m:])`,
	`min_over_time(sum by (job) (rate(http_requests_total[2m]))[20m:90s] offset 5m)`,
	`absent(nonexistent_metric)`,
	`absent(http_requests_total{job="nope"})`,
	`absent(http_requests_total)`,
	`absent_over_time(stale_metric{instance="i0"}[5m])`,
	`stale_metric`,
	`count_over_time(stale_metric[10m])`,
	`last_over_time(stale_metric[10m])`,
	`sparse_metric`,
	`count_over_time(sparse_metric[30m])`,
	`odd_values`,
	`odd_values * 2`,
	`jobs_done_total`,
	`increase(jobs_done_total[15m])`,
	`node_temp * 2 + 1`,
	`scalar(sum(node_temp))`,
	`time()`,
	`vector(1)`,
	`1.5`,
	`count by (__name__) ({__name__=~"http_.*|node_.*"})`,
	`label_replace(node_temp, "host", "$1", "instance", "i(.*)")`,
	`sort_desc(sum by (instance) (node_temp))`,
	`quantile_over_time(0.9, node_temp[15m])`,
	`deriv(node_temp[10m])`,
	`predict_linear(node_temp[10m], 600)`,
	`changes(node_temp[20m])`,
	`timestamp(node_temp)`,
	`delta(node_temp[10m])`,
	`stddev by (job) (rate(http_requests_total[5m]))`,
	`count_values("value", round(node_temp))`,
	`node_temp and on (instance) stale_metric`,
	`node_temp unless on (instance) stale_metric`,
	`group by (job) (http_requests_total) or vector(0)`,
}

// loadedNode returns a node holding the generated data set, written
// through remote write, and the reference storage holding the same
// samples. The history ends about now (so it would pass the retention and
// future checks of a real clock too); the node's clock is fixed 30 s after
// the last sample.
func loadedNode(t *testing.T) (*tesseraNode, *refStorage, *dataset) {
	t.Helper()
	d := genDataset(time.Now().Add(-dsSpan - 10*time.Minute).Truncate(time.Hour).UnixMilli())
	node := newTesseraNode(t, time.UnixMilli(d.end+30_000), Options{})
	node.remoteWrite(t, d)
	ref := &refStorage{}
	for _, s := range d.series {
		ref.add(s.lset, s.samples)
	}
	return node, ref, d
}

// TestQueriesMatchPrometheus evaluates every query of the table, instant
// and range, through Tessera's HTTP API and through the promql engine over
// Prometheus' own chunk storage, and requires identical answers.
func TestQueriesMatchPrometheus(t *testing.T) {
	node, ref, d := loadedNode(t)
	start := d.start
	engine := promql.NewEngine(testOptions(Options{}).resolved().engineOpts())

	instants := []int64{
		start - 10*60*1000,                      // before any data
		start + 60*60*1000,                      // on the hour: stale_metric i0 ends 7 ms later
		start + 62*60*1000,                      // i0 ended by its marker, inside the lookback
		start + 92*60*1000,                      // i2 stopped without a marker: still looked back to
		start + 2*3600*1000 + 7*60*1000 + 7_123, // inside i1's pause
		start + 100*60*1000 + 333,
		d.end,
		d.end + 4*60*1000, // after the last sample, inside the lookback
	}
	type rng struct {
		start, end int64
		step       time.Duration
	}
	ranges := []rng{
		{start, d.end, time.Minute},
		{start + 47*60*1000 + 13_000, start + 153*60*1000, 37 * time.Second},
		{start + 50*60*1000, start + 50*60*1000, 15 * time.Second}, // one step
	}

	total, nonEmpty := 0, 0
	count := func(ok bool) {
		total++
		if ok {
			nonEmpty++
		}
	}
	for qi, q := range compareQueries {
		t.Run(q, func(t *testing.T) {
			for i, ts := range instants {
				p := url.Values{"query": {q}, "time": {fmtTime(ts, (qi+i)%2 == 0)}}
				qry, err := engine.NewInstantQuery(context.Background(), ref, nil, q, time.UnixMilli(ts))
				require.NoError(t, err)
				want := qry.Exec(context.Background())
				count(compareResult(t, node.srv.URL, "/api/v1/query", p, q, want))
				qry.Close()
			}
			if strings.HasPrefix(q, `"`) {
				return // strings have no range form
			}
			for i, r := range ranges {
				p := url.Values{"query": {q}, "start": {fmtTime(r.start, i%2 == 0)}, "end": {fmtTime(r.end, i%2 == 1)},
					"step": {[]string{r.step.String(), strconv.FormatFloat(r.step.Seconds(), 'f', -1, 64)}[qi%2]}}
				qry, err := engine.NewRangeQuery(context.Background(), ref, nil, q, time.UnixMilli(r.start), time.UnixMilli(r.end), r.step)
				require.NoError(t, err)
				want := qry.Exec(context.Background())
				count(compareResult(t, node.srv.URL, "/api/v1/query_range", p, q, want))
				qry.Close()
			}
		})
	}
	t.Logf("%d comparisons, %d with a non-empty result", total, nonEmpty)
	require.Greater(t, nonEmpty, total*3/4, "the comparison must mostly compare data, not empty answers")
}

// compareResult asks the node and checks it answers what the reference
// engine answered: the same series, points, warnings and infos. Vectors
// are compared as sets unless the query orders them.
func compareResult(t *testing.T, base, path string, p url.Values, q string, want *promql.Result) (nonEmpty bool) {
	t.Helper()
	// Half the requests are form POSTs.
	var (
		code int
		got  apiResponse
	)
	if len(q)%2 == 0 {
		code, got = get(t, base, path, p)
	} else {
		code, got = postForm(t, base+path, p)
	}
	ctx := fmt.Sprintf("%s %v", path, p)
	require.NoError(t, want.Err, ctx)
	require.Equal(t, http.StatusOK, code, "%s: %+v", ctx, got)
	require.Equal(t, "success", got.Status, ctx)
	w := normFromEngine(*want)
	g := normFromJSON(t, got.Data)
	if w.Type == "vector" && !strings.HasPrefix(q, "sort") {
		byMetric := func(a, b normSeries) int { return strings.Compare(a.Metric, b.Metric) }
		slices.SortFunc(w.Series, byMetric)
		slices.SortFunc(g.Series, byMetric)
	}
	require.Equal(t, w, g, ctx)
	wantWarn, wantInfo := want.Warnings.AsStrings(q, 10, 10)
	require.ElementsMatch(t, wantWarn, got.Warnings, ctx)
	require.ElementsMatch(t, wantInfo, got.Infos, ctx)
	return len(g.Series) > 0
}

func postForm(t testing.TB, u string, p url.Values) (int, apiResponse) {
	t.Helper()
	resp, err := http.PostForm(u, p)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var r apiResponse
	require.NoError(t, json.Unmarshal(body, &r), string(body))
	return resp.StatusCode, r
}
