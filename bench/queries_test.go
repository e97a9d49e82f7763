package bench

import (
	"bytes"
	"context"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tessera-tsdb/tessera/bench/nodeexporter"
	"github.com/tessera-tsdb/tessera/config"
	"github.com/tessera-tsdb/tessera/dbnode/encoding/encodingtest"
	"github.com/tessera-tsdb/tessera/dbnode/httpapi"
	"github.com/tessera-tsdb/tessera/dbnode/httpapi/httpapitest"
	"github.com/tessera-tsdb/tessera/dbnode/promapi"
	"github.com/tessera-tsdb/tessera/dbnode/storage/storagetest"
)

// newQueryNode serves a real storage engine's remote write and the
// Prometheus query API on loopback, as a node wires them.
func newQueryNode(t *testing.T) string {
	t.Helper()
	db := storagetest.Open(t, 64, nil)
	api := httpapitest.New(t, httpapi.Options{Namespace: "default", NumShards: 64, Backend: httpapi.Local{DB: db}})
	q := config.Default().Query // the node's defaults, as it fills them
	qa, err := promapi.New(httpapi.Local{DB: db}, promapi.Options{
		Namespace: "default", Timeout: q.Timeout, MaxSamples: q.MaxSamples,
		MaxExpressionBytes: q.MaxExpressionBytes, MaxExpressionDepth: q.MaxExpressionDepth,
		MaxConcurrency: q.MaxConcurrency, LookbackDelta: q.LookbackDelta, EvaluationInterval: q.EvaluationInterval,
	})
	require.NoError(t, err)
	qa.Register(api.Mux())
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	return srv.URL
}

// The node_exporter workload loads into two separate nodes, every sample
// acknowledged, and the queries run against one of them: each query
// returns series, runs --rounds times, and the answers of the two nodes
// agree point for point (the same hosts and start make the same data).
func TestNodeExporterLoadAndQueries(t *testing.T) {
	const hosts = 3
	start := NodeExporterStart(time.Now())
	var wantSamples int64
	nodeexporter.Hosts(hosts, start, func(_ int, series []encodingtest.Series) {
		for _, s := range series {
			wantSamples += int64(len(s.T))
		}
	})
	var urls []string
	for range 2 {
		u := newQueryNode(t)
		urls = append(urls, u)
		o := Options{URL: u, Hosts: hosts, Start: start, Batch: 2000, Concurrency: 3}
		var out bytes.Buffer
		res, err := WriteNodeExporter(context.Background(), o, &out)
		require.NoError(t, err, out.String())
		require.Equal(t, wantSamples, res.Sent)
		require.Zero(t, res.Failed)
		require.Contains(t, out.String(), "write: ")
	}

	var out bytes.Buffer
	timings, err := RunQueries(context.Background(), QueryOptions{URL: urls[0], Start: start, Rounds: 2, Compare: urls[1]}, &out)
	require.NoError(t, err, out.String())
	require.Len(t, timings, len(nodeexporter.Queries))
	for i, q := range timings {
		require.Equal(t, nodeexporter.Queries[i].Name, q.Name)
		require.Len(t, q.Runs, 2)
		require.Positive(t, q.Series, "%s returned no series: it would time nothing", q.Name)
		require.Positive(t, q.Points)
		require.Positive(t, q.Bytes)
	}
	text := out.String()
	require.Contains(t, text, "geomean")
	require.Equal(t, len(nodeexporter.Queries), strings.Count(text, " agree: "), text)
	require.NotContains(t, text, "DIFFER", text)

	// --only picks queries by name.
	out.Reset()
	timings, err = RunQueries(context.Background(), QueryOptions{URL: urls[0], Start: start, Rounds: 1, Only: []string{"count_by"}}, &out)
	require.NoError(t, err)
	require.Len(t, timings, 1)
	require.Equal(t, 3, strings.Count(out.String(), "\n")-1, out.String()) // header, one query, geomean
}

// A query the API refuses fails the run, naming the query and the answer.
func TestRunQueriesReportsErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnprocessableEntity)
		_, _ = io.WriteString(w, `{"status":"error","errorType":"execution","error":"too many samples"}`)
	}))
	t.Cleanup(srv.Close)
	_, err := RunQueries(context.Background(), QueryOptions{URL: srv.URL, Start: 1_700_000_000_000, Rounds: 1}, io.Discard)
	require.ErrorContains(t, err, "rate (round 1): HTTP 422")
	require.ErrorContains(t, err, "too many samples")
}

func TestQueryOptionsValidate(t *testing.T) {
	ok := QueryOptions{URL: "http://x:1", Start: 1, Rounds: 1}
	require.NoError(t, ok.Validate())
	for name, mut := range map[string]func(*QueryOptions){
		"url":     func(o *QueryOptions) { o.URL = "" },
		"scheme":  func(o *QueryOptions) { o.URL = "127.0.0.1:8428" },
		"compare": func(o *QueryOptions) { o.Compare = "ftp://x" },
		"start":   func(o *QueryOptions) { o.Start = 0 },
		"rounds":  func(o *QueryOptions) { o.Rounds = 0 },
		"only":    func(o *QueryOptions) { o.Only = []string{"nope"} },
	} {
		o := ok
		mut(&o)
		require.Error(t, o.Validate(), name)
	}
}

// The query range covers the data and lies on the step, so that every
// store evaluates the same steps.
func TestQueryRange(t *testing.T) {
	start := int64(1_795_674_843_210)
	from, to := QueryRange(start)
	step := int64(nodeexporter.Step / time.Second)
	require.Zero(t, from%step)
	require.Zero(t, to%step)
	require.LessOrEqual(t, from*1000, start)
	require.GreaterOrEqual(t, to*1000, nodeexporter.End(start))
	require.Less(t, to*1000-nodeexporter.End(start), nodeexporter.Step.Milliseconds())
}

func TestCompareResults(t *testing.T) {
	a := Matrix{`{a="1"}`: {1000: 1, 2000: 2}, `{a="2"}`: {1000: math.NaN()}}
	same := Matrix{`{a="1"}`: {1000: 1, 2000: 2 * (1 + 1e-12)}, `{a="2"}`: {1000: math.NaN()}}
	require.Equal(t, "agree: 2 series, 3 points", CompareResults(a, same, 0))

	off := Matrix{`{a="1"}`: {1000: 1, 2000: 2.5}, `{a="2"}`: {1000: math.NaN()}}
	got := CompareResults(a, off, 1500)
	require.Contains(t, got, "1 differ (max rel 0.2; after the warm-up 1 of 1, max rel 0.2)")
	require.Contains(t, got, `first: {a="1"} t=2000: 2 in a, 2.5 in b`)

	missing := Matrix{`{a="1"}`: {1000: 1}, `{a="3"}`: {1000: 0}}
	got = CompareResults(a, missing, 0)
	require.Contains(t, got, "2 vs 2 series (1 only in a, 1 only in b)")
	require.Contains(t, got, "1 only in a, 0 only in b; first:")

	named := Matrix{`{__name__="m",a="1"}`: {1000: 1, 2000: 2}, `{__name__="m",a="2"}`: {1000: math.NaN()}}
	require.Contains(t, CompareResults(a, named, 0), "agree: 2 series, 3 points (series matched with __name__ dropped")
}

// Remote writes go to Tessera's path below a base URL, and to a URL that
// already names a write endpoint (VictoriaMetrics') as given.
func TestWriteURL(t *testing.T) {
	for url, want := range map[string]string{
		"http://127.0.0.1:7201":                      "http://127.0.0.1:7201/api/v1/prom/remote/write",
		"http://127.0.0.1:7201/":                     "http://127.0.0.1:7201/api/v1/prom/remote/write",
		"http://127.0.0.1:8428/api/v1/write":         "http://127.0.0.1:8428/api/v1/write",
		"https://vm.example/prometheus/api/v1/write": "https://vm.example/prometheus/api/v1/write",
	} {
		require.Equal(t, want, Options{URL: url}.writeURL(), url)
	}
}
