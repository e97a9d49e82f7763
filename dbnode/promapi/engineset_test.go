package promapi

import (
	"context"
	"fmt"
	"math"
	"net/http/httptest"
	"net/url"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/dbnode/httpapi"
	"github.com/tessera-tsdb/tessera/dbnode/httpapi/httpapitest"
	"github.com/tessera-tsdb/tessera/dbnode/query"
	tstorage "github.com/tessera-tsdb/tessera/dbnode/storage"
	"github.com/tessera-tsdb/tessera/dbnode/storage/storagetest"
)

// countingReader counts the reads (Query calls) that reach storage.
type countingReader struct {
	query.Reader
	reads atomic.Int64
}

func (c *countingReader) Query(ctx context.Context, ns string, ms []*labels.Matcher, start, end int64) ([]tstorage.SeriesIterator, error) {
	c.reads.Add(1)
	return c.Reader.Query(ctx, ns, ms, start, end)
}

// A selection holding native histograms is decided on before a sample
// is decoded and computed by the engine over that one read: storage is
// read once per selector, the query is never declined and run again
// (which read storage twice), and the answer is the engine's over
// Prometheus' own chunks.
func TestHistogramSelectionIsReadOnce(t *testing.T) {
	start := time.Now().Add(-dsSpan - 10*time.Minute).Truncate(time.Hour).UnixMilli()
	end := start + dsSpan.Milliseconds()
	series := genHistograms(start, end)
	now := time.UnixMilli(end + 30_000)
	db := storagetest.Open(t, 64, func() time.Time { return now })
	h := httpapitest.New(t, httpapi.Options{Namespace: "default", NumShards: 64, Backend: httpapi.Local{DB: db}})
	reader := &countingReader{Reader: httpapi.Local{DB: db}}
	api := newAPI(t, reader, Options{})
	api.Register(h.Mux())
	srv := httptest.NewServer(h.Handler())
	t.Cleanup(func() {
		srv.Close()
		require.NoError(t, db.Close())
	})
	node := &tesseraNode{srv: srv, db: db}
	node.remoteWriteMixed(t, series, start, end)
	ref := &refStorage{}
	for _, s := range series {
		ref.addMixed(t, s)
	}
	engine := promql.NewEngine(testOptions(Options{}).resolved().engineOpts())

	queries := []string{
		`req_latency_seconds`,
		`rate(req_latency_seconds[5m])`,
		`sum by (job) (rate(req_latency_seconds[5m]))`,
		`histogram_quantile(0.9, sum by (job) (rate(req_latency_float_seconds[5m])))`,
		`histogram_quantile(0.99, rate(req_nhcb_seconds[5m]))`,
		`count_over_time(mixed_metric[30m])`,
		`avg(rate(req_latency_seconds[5m]))`,
		`topk(2, req_latency_seconds)`,
	}
	ts, step := start+75*60*1000+4_321, 37*time.Second
	for _, q := range queries {
		t.Run(q, func(t *testing.T) {
			reads, declined, byEngine := reader.reads.Load(), api.fastStats.declined.Load(), api.fastStats.engine.Load()
			qry, err := engine.NewInstantQuery(context.Background(), ref, nil, q, time.UnixMilli(ts))
			require.NoError(t, err)
			compareResult(t, srv.URL, "/api/v1/query", url.Values{"query": {q}, "time": {fmtTime(ts, false)}}, q, qry.Exec(context.Background()))
			qry.Close()
			qry, err = engine.NewRangeQuery(context.Background(), ref, nil, q, time.UnixMilli(start), time.UnixMilli(end), step)
			require.NoError(t, err)
			p := url.Values{"query": {q}, "start": {fmtTime(start, false)}, "end": {fmtTime(end, true)},
				"step": {strconv.FormatFloat(step.Seconds(), 'f', -1, 64)}}
			compareResult(t, srv.URL, "/api/v1/query_range", p, q, qry.Exec(context.Background()))
			qry.Close()
			require.Equal(t, int64(2), reader.reads.Load()-reads, "one read per query (one selector, instant and range)")
			require.Equal(t, declined, api.fastStats.declined.Load(), "no query declined after its read")
			require.Equal(t, int64(2), api.fastStats.engine.Load()-byEngine, "the engine computed the selection over the fast path's read")
		})
	}
}

// keepCandidates keeps, per group and step, the values fewer than K
// others beat (ties at the k-th all kept; a NaN below every number), and
// topk over the parts' candidates is the planner's contract: the rewrite
// asks for them only for topk/bottomk by (...) with a whole literal k of
// a selection computed without an aggregation.
func TestTopkCandidates(t *testing.T) {
	nan := math.NaN()
	mk := func(g string, vals ...float64) fastSeries {
		return fastSeries{lset: labels.FromStrings("g", g, "i", strconv.Itoa(len(vals))+fmt.Sprint(vals)), vals: vals}
	}
	out := []fastSeries{
		mk("a", 5, nan, 1, staleNaN),
		mk("a", 3, 2, 1, 4),
		mk("a", 4, nan, 0, 1),
		mk("a", 1, 1, 2, 2),
		mk("b", 0, 0, 0, 0), // alone in its group: always a candidate
	}
	keepCandidates(out, query.Pushdown{K: 2, Grouping: []string{"g"}}, 4)
	got := func(i int) []string {
		var s []string
		for _, v := range out[i].vals {
			s = append(s, strconv.FormatFloat(v, 'g', -1, 64))
		}
		return s
	}
	stale := strconv.FormatFloat(staleNaN, 'g', -1, 64)
	require.Equal(t, []string{"5", "NaN", "1", stale}, got(0), "step 2: a three-way tie at the 2nd value keeps all three")
	require.Equal(t, []string{stale, "2", "1", "4"}, got(1))
	require.Equal(t, []string{"4", stale, stale, stale}, got(2), "step 1: two numbers beat a NaN")
	require.Equal(t, []string{stale, "1", "2", "2"}, got(3))
	require.Equal(t, []string{"0", "0", "0", "0"}, got(4))

	fp := newFastParser()
	for q, want := range map[string]int{
		`topk(3, rate(x_total[5m]))`:            3,
		`bottomk by (job) (2, x)`:               2,
		`topk(2.5, x)`:                          0,
		`topk(scalar(y), x)`:                    0,
		`topk without (job) (2, x)`:             0,
		`topk(2, sum by (job) (rate(x[5m])))`:   0,
		`sort_desc(topk(1, rate(x_total[1m])))`: 1,
	} {
		e, err := fp.ParseExpr(q)
		require.NoError(t, err, q)
		k := 0
		for _, s := range markedSpecs(t, fp, e) {
			k = max(k, s.K)
		}
		require.Equal(t, want, k, q)
	}
}

// declineNode is one node holding series, its API (with o) over a Reader
// that counts the reads reaching storage, and a reference engine with the
// same limits over Prometheus' own chunks of the same data.
func declineNode(t *testing.T, series []mseries, start, end int64, o Options) (string, *countingReader, *API, *refStorage, *promql.Engine) {
	t.Helper()
	now := time.UnixMilli(end + 30_000)
	db := storagetest.Open(t, 64, func() time.Time { return now })
	h := httpapitest.New(t, httpapi.Options{Namespace: "default", NumShards: 64, Backend: httpapi.Local{DB: db}})
	reader := &countingReader{Reader: httpapi.Local{DB: db}}
	api := newAPI(t, reader, o)
	api.Register(h.Mux())
	srv := httptest.NewServer(h.Handler())
	t.Cleanup(func() {
		srv.Close()
		require.NoError(t, db.Close())
	})
	(&tesseraNode{srv: srv, db: db}).remoteWriteMixed(t, series, start, end)
	ref := &refStorage{}
	for _, s := range series {
		ref.addMixed(t, s)
	}
	return srv.URL, reader, api, ref, promql.NewEngine(testOptions(o).resolved().engineOpts())
}

// The fast path's declines are decided from the series list a read
// returns, before a sample is decoded, and the read is handed over to
// the engine's run of the query: a declined query reads storage once per
// selector, as the plain engine does, never twice. Each case is one the
// fast path declined after decoding before: a binary operator with a
// histogram operand, rate outputs that collide once the name and
// __type__ are dropped, outputs past half the samples limit.
func TestDeclinesReadOnce(t *testing.T) {
	start := time.Now().Add(-dsSpan - 10*time.Minute).Truncate(time.Hour).UnixMilli()
	end := start + dsSpan.Milliseconds()
	counter := func(lset labels.Labels, from, to int64) mseries {
		s := mseries{lset: lset}
		v := 0.0
		for ts := from; ts < to; ts += dsScrape.Milliseconds() {
			v += float64(ts%7) + 1
			s.samples = append(s.samples, msample{t: ts, f: v})
		}
		return s
	}
	series := genHistograms(start, end)
	// Equal once the name and __type__ are dropped; one after the other,
	// so that the engine merges them into one output series.
	series = append(series,
		counter(labels.FromStrings("__name__", "col_total", "__type__", "counter", "a", "1"), start-10*60_000, start+90*60_000),
		counter(labels.FromStrings("__name__", "col_total", "a", "1"), start+100*60_000, end))
	for i := range 20 {
		series = append(series, counter(labels.FromStrings("__name__", "wide_total", "i", strconv.Itoa(i)), start-10*60_000, end))
	}
	ts, step := start+75*60*1000+4_321, 37*time.Second
	steps := int((end-start)/step.Milliseconds()) + 1
	// 20 series x steps outputs are past half of this limit, which the
	// engine itself stays within.
	limited := Options{MaxSamples: 20*steps + 2000}
	require.Greater(t, 20*steps, limited.MaxSamples/2)

	for _, c := range []struct {
		opts      Options
		queries   map[string]int // query: its selectors
		declRange bool           // whether only the range query is declined
	}{
		{Options{}, map[string]int{
			`rate(req_latency_seconds[5m]) / 2`: 1,
			`sum by (job) (rate(req_latency_seconds[5m])) + sum by (job) (rate(req_latency_float_seconds[5m]))`: 2,
			`rate(col_total[5m])`: 1,
		}, false},
		{limited, map[string]int{`rate(wide_total[5m])`: 1}, true},
	} {
		url_, reader, api, ref, engine := declineNode(t, series, start, end, c.opts)
		for q, sels := range c.queries {
			t.Run(q, func(t *testing.T) {
				reads, declined := reader.reads.Load(), api.fastStats.declined.Load()
				qry, err := engine.NewInstantQuery(context.Background(), ref, nil, q, time.UnixMilli(ts))
				require.NoError(t, err)
				require.True(t, compareResult(t, url_, "/api/v1/query", url.Values{"query": {q}, "time": {fmtTime(ts, false)}}, q, qry.Exec(context.Background())), "an answer to compare")
				qry.Close()
				qry, err = engine.NewRangeQuery(context.Background(), ref, nil, q, time.UnixMilli(start), time.UnixMilli(end), step)
				require.NoError(t, err)
				p := url.Values{"query": {q}, "start": {fmtTime(start, false)}, "end": {fmtTime(end, true)},
					"step": {strconv.FormatFloat(step.Seconds(), 'f', -1, 64)}}
				compareResult(t, url_, "/api/v1/query_range", p, q, qry.Exec(context.Background()))
				qry.Close()
				require.Equal(t, int64(2*sels), reader.reads.Load()-reads, "one read per selector and query (instant and range)")
				want := int64(2)
				if c.declRange {
					want = 1
				}
				require.Equal(t, want, api.fastStats.declined.Load()-declined, "declined (before decoding, reading nothing again)")
			})
		}
	}
}

// BenchmarkKeepCandidates: a replica's topk(5, ...) candidates over 700
// series (a third of topk's in the query table) at 121 steps.
func BenchmarkKeepCandidates(b *testing.B) {
	const n, steps = 700, 121
	src := make([][]float64, n)
	for i := range src {
		src[i] = make([]float64, steps)
		for k := range src[i] {
			src[i][k] = float64((i*7919+k*104729)%100003) / 7
		}
	}
	out := make([]fastSeries, n)
	b.ReportAllocs()
	for b.Loop() {
		for i := range out {
			out[i] = fastSeries{lset: labels.FromStrings("i", strconv.Itoa(i)), vals: append([]float64(nil), src[i]...)}
		}
		keepCandidates(out, query.Pushdown{K: 5}, steps)
	}
}
