package promapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/util/kahansum"
	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/dbnode/httpapi"
	"github.com/tessera-tsdb/tessera/dbnode/query"
	tstorage "github.com/tessera-tsdb/tessera/dbnode/storage"
	"github.com/tessera-tsdb/tessera/ident"
)

// fastQueries add, to compareQueries, the cases the fast path must get
// right or leave alone: gaps (windows shorter than two scrapes, so a
// series has steps without a value: stale markers in the precomputed
// series), counter resets, staleness markers in the data, non-counter
// names (an info annotation), offset, @, subqueries, absent, selectors
// without a metric name, native histograms (fall back), and operators
// around the rewritten calls.
func fastQueries(start int64) []string {
	at := (start + 90*60*1000) / 1000
	return []string{
		`rate(http_requests_total[5m])`,
		`rate(http_requests_total[20s])`,
		`count by (job) (rate(http_requests_total[20s]))`,
		`sum by (job) (increase(http_requests_total[25s]))`,
		`increase(jobs_done_total[5m])`,
		`rate(stale_metric[5m])`,
		`rate(stale_metric[1m])`,
		`rate(sparse_metric[5m])`,
		`rate(sparse_metric[1m])`,
		`rate(odd_values[5m])`,
		`delta(node_temp[5m])`,
		`delta(node_temp[40s])`,
		`irate(http_requests_total[5m])`,
		`irate(http_requests_total[20s])`,
		`sum by (job) (irate(http_requests_total[1m]))`,
		`irate(stale_metric[1m])`,
		`idelta(node_temp[5m])`,
		`idelta(odd_values[1m])`,
		`irate(req_latency_seconds[5m])`,
		`rate(node_temp[5m])`,
		`sum(rate(node_temp[5m]))`,
		`sum without (instance) (increase(http_requests_total[10m]))`,
		`avg by (job) (rate(http_requests_total[5m]))`,
		`max by (code) (rate(http_requests_total[5m])) - min by (code) (rate(http_requests_total[5m]))`,
		`topk(3, rate(http_requests_total[1m]))`,
		`bottomk by (job) (2, rate(http_requests_total[1m]))`,
		`quantile(0.9, rate(http_requests_total[5m]))`,
		`count_values("v", round(rate(http_requests_total[5m])))`,
		`-rate(http_requests_total{job="db"}[5m])`,
		`abs(delta(node_temp[5m])) > 0.5`,
		`rate(http_requests_total[5m]) / on (job, instance, method, code) rate(http_requests_total[10m])`,
		`rate(http_requests_total[5m]) > bool 5`,
		`histogram_quantile(0.5, rate(request_duration_seconds_bucket[5m]))`,
		`histogram_quantile(0.9, sum by (le) (rate(request_duration_seconds_bucket[2m])))`,
		`label_replace(rate(http_requests_total{job="api"}[5m]), "x", "$1", "instance", "i(.*)")`,
		`sort_desc(sum by (instance) (rate(http_requests_total[5m])))`,
		`rate(http_requests_total[5m] offset 10m)`,
		fmt.Sprintf(`rate(http_requests_total[5m] @ %d)`, at),
		fmt.Sprintf(`sum(rate(http_requests_total[5m])) - sum(rate(http_requests_total[5m] @ %d))`, at),
		`max_over_time(sum(rate(http_requests_total[5m]))[30m:1m])`,
		`absent(rate(nonexistent_total[5m]))`,
		`absent(rate(http_requests_total{job="nope"}[5m]))`,
		`absent(rate(http_requests_total[5m]))`,
		`timestamp(rate(http_requests_total{job="db"}[5m]))`,
		`rate({__name__=~"http_requests_total|jobs_done_total"}[5m])`,
		`rate({__name__="http_requests_total", job="web"}[3m])`,
		`rate(req_latency_seconds[5m])`,
		`sum by (job) (rate(req_latency_float_seconds[5m]))`,
		`rate(mixed_metric[5m])`,
		`increase(hist_stale[5m])`,
		// Aggregations the fast path computes itself (fastSet.aggregate):
		// groups appearing and ending, NaN and infinities in sums, a
		// grouping label some series lack, parentheses, inside operators.
		`count by (instance) (stale_metric)`,
		`sum by (instance) (stale_metric)`,
		`sum(odd_values)`,
		`count(odd_values)`,
		`sum by (kind) (odd_values * 1)`,
		`count(sparse_metric)`,
		`sum by (job) (sparse_metric)`,
		`sum by (job, code) (http_requests_total)`,
		`count by (nope) (rate(http_requests_total[1m]))`,
		`sum by (job, __name__) (http_requests_total)`,
		`sum by (instance) ((rate(stale_metric[1m])))`,
		`count by (instance) (irate(stale_metric[1m]))`,
		`sum by (job) (rate(http_requests_total[5m])) / count by (job) (http_requests_total)`,
		`sum(increase(jobs_done_total[5m])) + count(node_temp)`,
		`sum by (le) (rate(req_latency_seconds[5m]))`,
		`count(mixed_metric)`,
		`group by (instance) (stale_metric)`,
		`group(odd_values)`,
		`group by (job) (rate(http_requests_total[5m]))`,
		`avg by (instance) (stale_metric)`,
		`avg(odd_values)`,
		`avg by (job, instance) (irate(http_requests_total[1m]))`,
		`1 - avg by (instance) (rate(stale_metric[2m]))`,
		// The *_over_time functions the fast path computes: windows
		// shorter than a scrape (steps without a value), stale markers,
		// NaN and infinities (odd_values: the incremental mean, NaN in
		// min and max), gauges and counters, aggregated and inside
		// operators; last_over_time keeps the name and stays the engine's.
		`avg_over_time(node_temp[5m])`,
		`avg_over_time(odd_values[5m])`,
		`avg_over_time(odd_values[20s])`,
		`avg_over_time(stale_metric[1m])`,
		`avg_over_time(sparse_metric[5m])`,
		`avg_over_time(http_requests_total[10m])`,
		`sum_over_time(odd_values[3m])`,
		`sum_over_time(http_requests_total[5m])`,
		`sum_over_time(stale_metric[20s])`,
		`count_over_time(stale_metric[1m])`,
		`count_over_time(sparse_metric[5m])`,
		`count_over_time(mixed_metric[5m])`,
		`min_over_time(odd_values[5m])`,
		`max_over_time(odd_values[5m])`,
		`max_over_time(odd_values[20s])`,
		`min_over_time(node_temp[1m])`,
		`max_over_time(stale_metric[2m])`,
		`max_over_time(req_latency_seconds[5m])`,
		`sum by (job) (avg_over_time(http_requests_total[5m]))`,
		`avg by (instance) (max_over_time(node_temp[2m]))`,
		`count(count_over_time(stale_metric[30s]))`,
		`avg_over_time(node_temp[5m]) - min_over_time(node_temp[5m])`,
		`avg_over_time({__name__=~"node_temp|odd_values"}[5m])`,
		`avg_over_time(node_temp[5m] offset 5m)`,
		`last_over_time(node_temp[5m])`,
		// Arithmetic operators the fast path computes (fastbinop.go):
		// staleness, scrape intervals that differ, series longer apart
		// than the lookback, special values, escaped labels; native
		// histograms in an operand (fall back).
		`stale_metric / on (instance) node_temp`,
		`node_temp - on (instance) avg by (instance) (node_temp)`,
		`1 - sparse_metric / 100`,
		`odd_values % 3`,
		`odd_values ^ odd_values`,
		`100 * (1 - stale_metric / ignoring (instance) stale_metric)`,
		`jobs_done_total / jobs_done_total`,
		`request_duration_seconds_sum / request_duration_seconds_count`,
		`rate(request_duration_seconds_sum[5m]) / on (job, instance) rate(request_duration_seconds_count[5m])`,
		`mixed_metric * 2`,
		`mixed_metric / on (instance) node_temp`,
	}
}

// fastPair is one database answered by two query APIs: the fast path
// (the default) and Prometheus' engine alone.
type fastPair struct {
	fast, plain *httptest.Server
	api         *API
}

func newFastPair(t *testing.T, node *tesseraNode, opts Options) fastPair {
	t.Helper()
	now := func() time.Time { return time.Now() }
	opts.Now = now
	fastAPI := newAPI(t, httpapi.Local{DB: node.db}, opts)
	opts.DisableFastPath = true
	plainAPI := newAPI(t, httpapi.Local{DB: node.db}, opts)
	serve := func(a *API) *httptest.Server {
		mux := http.NewServeMux()
		a.Register(mux)
		srv := httptest.NewServer(mux)
		t.Cleanup(srv.Close)
		return srv
	}
	return fastPair{fast: serve(fastAPI), plain: serve(plainAPI), api: fastAPI}
}

func rawGet(t testing.TB, u string) (int, string) {
	t.Helper()
	resp, err := http.Get(u)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

// diff asks both APIs and returns "" when they answer the same, else a
// description of the difference, and the plain engine's body. The same is
// byte for byte (values to the last bit, series order, warnings and
// infos), except that the series of an instant vector may come in another
// order: the engine's own order is Go map order for some aggregations
// (count_values).
func (p fastPair) diff(t testing.TB, path string, params url.Values) (msg, plainBody string) {
	t.Helper()
	q := "?" + params.Encode()
	fc, fb := rawGet(t, p.fast.URL+path+q)
	pc, pb := rawGet(t, p.plain.URL+path+q)
	if fc == pc && fb == pb {
		return "", pb
	}
	msg = fmt.Sprintf("%s%s:\nfast  %d %.2000s\nplain %d %.2000s", path, q, fc, fb, pc, pb)
	var fr, pr apiResponse
	if fc != http.StatusOK || pc != http.StatusOK || json.Unmarshal([]byte(fb), &fr) != nil || json.Unmarshal([]byte(pb), &pr) != nil {
		return msg, pb
	}
	fn, pn := normFromJSON(t, fr.Data), normFromJSON(t, pr.Data)
	if fn.Type != "vector" {
		return msg, pb
	}
	byMetric := func(a, b normSeries) int { return strings.Compare(a.Metric, b.Metric) }
	slices.SortFunc(fn.Series, byMetric)
	slices.SortFunc(pn.Series, byMetric)
	slices.Sort(fr.Warnings)
	slices.Sort(pr.Warnings)
	slices.Sort(fr.Infos)
	slices.Sort(pr.Infos)
	if !reflect.DeepEqual(fn, pn) || !slices.Equal(fr.Warnings, pr.Warnings) || !slices.Equal(fr.Infos, pr.Infos) {
		return msg, pb
	}
	return "", pb
}

// fastCases are the requests the fast path is compared on: every query
// of fastQueries and compareQueries, instant and range, at the data's
// edges, with steps shorter and longer than the windows, and with a
// lookback shorter than the step.
func fastCases(d *dataset) []url.Values {
	start := d.start
	type rng struct {
		start, end int64
		step       string
	}
	ranges := []rng{
		{start - 10*60*1000, d.end + 10*60*1000, "60"},
		{start + 47*60*1000 + 13_000, start + 153*60*1000, "37s"},
		{start + 50*60*1000, start + 50*60*1000, "15s"},
		{start, d.end, "7m"},
		{start + 59*60*1000, start + 95*60*1000, "5s"},
	}
	instants := []int64{start - 60_000, start + 60*60*1000 + 7, start + 100*60*1000 + 333, d.end, d.end + 4*60*1000}
	var out []url.Values
	for _, q := range append(fastQueries(start), compareQueries...) {
		for _, ts := range instants {
			out = append(out, url.Values{"query": {q}, "time": {fmtTime(ts, false)}})
		}
		for i, r := range ranges {
			p := url.Values{"query": {q}, "start": {fmtTime(r.start, false)}, "end": {fmtTime(r.end, false)}, "step": {r.step}}
			if i == 1 {
				p.Set("lookback_delta", "10s")
			}
			out = append(out, p)
		}
	}
	return out
}

// TestFastPathMatchesEngine holds the fast path to Prometheus' engine
// over the same storage: every answer byte-identical. It also checks
// that the fast path did run (most of the table is rewritten) and fell
// back for the native histogram series.
func TestFastPathMatchesEngine(t *testing.T) {
	node, _, d := loadedNode(t)
	node.remoteWriteMixed(t, genHistograms(d.start, d.end), d.start, d.end)
	pair := newFastPair(t, node, Options{Parallelism: 3})
	cases := fastCases(d)
	minComputed, minDeclined := int64(300), int64(10)
	if raceEnabled {
		// Every 7th request: still every kind of query, in a tenth of
		// the time the race detector would take over all of them.
		var sample []url.Values
		for i := 0; i < len(cases); i += 7 {
			sample = append(sample, cases[i])
		}
		cases, minComputed, minDeclined = sample, 40, 2
	}
	nonEmpty := 0
	for _, p := range cases {
		path := "/api/v1/query_range"
		if p.Has("time") {
			path = "/api/v1/query"
		}
		msg, body := pair.diff(t, path, p)
		if msg != "" {
			t.Fatal(msg)
		}
		if !strings.Contains(body, `"result":[]`) {
			nonEmpty++
		}
	}
	computed, declined := pair.api.fastStats.computed.Load(), pair.api.fastStats.declined.Load()
	t.Logf("%d requests, %d non-empty; fast path computed %d selectors, declined %d queries", len(cases), nonEmpty, computed, declined)
	require.Greater(t, computed, minComputed, "the fast path must actually run")
	require.Positive(t, pair.api.fastStats.binops.Load(), "binary operators too")
	require.Greater(t, declined, minDeclined, "native histograms must go the engine's way")
	require.Greater(t, nonEmpty, len(cases)*2/3)
}

// TestFastPathComparisonCatchesErrors shows the comparison above fails
// when the fast path is wrong: with rate's counter-reset correction
// dropped, or a value off by one ulp, the answers differ.
func TestFastPathComparisonCatchesErrors(t *testing.T) {
	node, _, d := loadedNode(t)
	pair := newFastPair(t, node, Options{})
	p := url.Values{"query": {`sum by (job) (rate(http_requests_total[5m]))`}, "start": {fmtTime(d.start, false)},
		"end": {fmtTime(d.end, false)}, "step": {"60"}}
	msg, _ := pair.diff(t, "/api/v1/query_range", p)
	require.Empty(t, msg)
	for name, broken := range map[string]func(pts []promql.FPoint, rangeStart, rangeEnd int64, rangeSecs float64, isCounter, resets, isRate bool) (float64, bool){
		"no reset correction": func(pts []promql.FPoint, rs, re int64, secs float64, isCounter, _, isRate bool) (float64, bool) {
			return extrapolatedRate(pts, rs, re, secs, isCounter, false, isRate)
		},
		"no zero point": func(pts []promql.FPoint, rs, re int64, secs float64, _, resets, isRate bool) (float64, bool) {
			return extrapolatedRate(pts, rs, re, secs, false, resets, isRate)
		},
		"one ulp": func(pts []promql.FPoint, rs, re int64, secs float64, isCounter, resets, isRate bool) (float64, bool) {
			v, ok := extrapolatedRate(pts, rs, re, secs, isCounter, resets, isRate)
			return v * (1 + 0x1p-52), ok
		},
	} {
		t.Run(name, func(t *testing.T) {
			rateFunc = broken
			t.Cleanup(func() { rateFunc = extrapolatedRate })
			msg, _ := pair.diff(t, "/api/v1/query_range", p)
			require.NotEmpty(t, msg, "a wrong fast path must not pass the comparison")
		})
	}
	// The sum is the fast path's own (fastSet.aggregate): a sum that is
	// not the engine's Kahan sum in its order is caught too.
	for name, broken := range map[string]func(inc, sum, c float64) (float64, float64){
		"no compensation": func(inc, sum, c float64) (float64, float64) { return sum + inc, c },
		"one ulp": func(inc, sum, c float64) (float64, float64) {
			s, c := kahansum.Inc(inc, sum, c)
			return s * (1 + 0x1p-52), c
		},
	} {
		t.Run("sum "+name, func(t *testing.T) {
			sumInc = broken
			t.Cleanup(func() { sumInc = kahansum.Inc })
			msg, _ := pair.diff(t, "/api/v1/query_range", p)
			require.NotEmpty(t, msg, "a wrong fast path must not pass the comparison")
		})
	}
	// The *_over_time functions are the fast path's own too: a mean one
	// ulp off, a max that keeps a NaN the engine replaces, or a count off
	// by one fails the comparison, and the right ones pass it, computed
	// by the fast path.
	for name, c := range map[string]struct {
		query, fn string
		broken    func([]promql.FPoint) float64
	}{
		"avg one ulp": {`avg_over_time(node_temp[5m])`, "avg_over_time",
			func(pts []promql.FPoint) float64 { return avgOverTime(pts) * (1 + 0x1p-52) }},
		"max keeps NaN": {`max_over_time(odd_values[5m])`, "max_over_time", func(pts []promql.FPoint) float64 {
			m := pts[0].F
			for _, f := range pts {
				m = max(m, f.F)
			}
			return m
		}},
		"count off by one": {`count_over_time(stale_metric[1m])`, "count_over_time",
			func(pts []promql.FPoint) float64 { return float64(len(pts) + 1) }},
	} {
		t.Run(name, func(t *testing.T) {
			p := url.Values{"query": {c.query}, "start": {fmtTime(d.start, false)},
				"end": {fmtTime(d.end, false)}, "step": {"60"}}
			before := pair.api.fastStats.computed.Load()
			msg, _ := pair.diff(t, "/api/v1/query_range", p)
			require.Empty(t, msg)
			require.Greater(t, pair.api.fastStats.computed.Load(), before, "the fast path must compute %s", c.fn)
			right := fastFuncs[c.fn]
			fastFuncs[c.fn] = fastFunc{over: c.broken}
			t.Cleanup(func() { fastFuncs[c.fn] = right })
			msg, _ = pair.diff(t, "/api/v1/query_range", p)
			require.NotEmpty(t, msg, "a wrong fast path must not pass the comparison")
		})
	}
}

// TestFastPathAggregates: sum and count by (...) of a fast path call
// or instant selector are computed by the fast path (one marked
// selector standing for the aggregation), and answer as the engine does.
func TestFastPathAggregates(t *testing.T) {
	fp := newFastParser()
	for q, want := range map[string]string{
		`sum by (mode, instance) (rate(x_total[5m]))`: "sum",
		`count by (mode) (x)`:                         "count",
		`sum((x))`:                                    "sum",
		`sum without (mode) (x)`:                      "",
		`avg by (mode) (x)`:                           "avg",
		`group by (mode) (x)`:                         "group",
		`max by (mode) (x)`:                           "max",
		`min by (mode) (rate(x_total[5m]))`:           "min",
		`stddev by (mode) (x)`:                        "",
		`count_values by (mode) ("v", rate(x[5m]))`:   "count_values",
		`count_values without (mode) ("v", x)`:        "",
		`sum by (mode) (x offset 1m)`:                 "",
		`sum by (mode) (x * 2)`:                       "",
	} {
		e, err := fp.ParseExpr(q)
		require.NoError(t, err, q)
		got := markedSpecs(t, fp, e)
		if want == "" {
			for _, s := range got {
				require.Equal(t, query.AggNone, s.Agg, q)
			}
			continue
		}
		require.Len(t, got, 1, q)
		require.Equal(t, want, got[0].Agg.String(), q)
	}

	node, _, d := loadedNode(t)
	pair := newFastPair(t, node, Options{})
	p := url.Values{"query": {`sum by (job) (rate(http_requests_total[5m])) + count(http_requests_total)`},
		"start": {fmtTime(d.start, false)}, "end": {fmtTime(d.end, false)}, "step": {"60"}}
	msg, _ := pair.diff(t, "/api/v1/query_range", p)
	require.Empty(t, msg)
	require.EqualValues(t, 2, pair.api.fastStats.aggregated.Load())
}

// TestFastPathLimits: when its outputs could pass half the samples limit
// the fast path hands the query to the engine, which answers or refuses
// it as it would alone.
func TestFastPathLimits(t *testing.T) {
	node, _, d := loadedNode(t)
	q := `sum(rate(http_requests_total[5m])) / sum(rate(http_requests_total[10m]))`
	p := url.Values{"query": {q}, "start": {fmtTime(d.start, false)}, "end": {fmtTime(d.end, false)}, "step": {"60s"}}
	// 48 series x 181 steps: ~8,700 step values per selector.
	for _, tc := range []struct {
		maxSamples     int
		code           int
		fast, fellBack bool
	}{
		{100_000, http.StatusOK, true, false},
		// The selections' series times the steps (a bound known from the
		// series list, before a sample is decoded) pass half: declined
		// before anything is computed.
		{25_000, http.StatusOK, false, true},
		{2000, http.StatusUnprocessableEntity, false, true},
	} {
		pair := newFastPair(t, node, Options{MaxSamples: tc.maxSamples})
		msg, _ := pair.diff(t, "/api/v1/query_range", p)
		require.Empty(t, msg, "maxSamples %d", tc.maxSamples)
		code, body := rawGet(t, pair.fast.URL+"/api/v1/query_range?"+p.Encode())
		require.Equal(t, tc.code, code, body)
		if code != http.StatusOK {
			require.Contains(t, body, fmt.Sprintf("query.maxSamples=%d", tc.maxSamples))
		}
		require.Equal(t, tc.fast, pair.api.fastStats.computed.Load() > 0, "maxSamples %d", tc.maxSamples)
		require.Equal(t, tc.fellBack, pair.api.fastStats.declined.Load() > 0, "maxSamples %d", tc.maxSamples)
	}
}

// TestFastRewrite pins which calls are rewritten.
func TestFastRewrite(t *testing.T) {
	fp := newFastParser()
	for q, want := range map[string]int{
		`rate(x_total[5m])`: 1,
		`sum by (a) (rate(x_total[5m])) / sum(increase(y[1m]))`:     2,
		`histogram_quantile(0.9, sum by (le) (rate(x_bucket[5m])))`: 1,
		`topk(5, delta(x[5m]))`:                                     1,
		`rate(x_total[5m] offset 1m)`:                               0,
		`rate(x_total[5m] @ 100)`:                                   0,
		`rate({__name__=~"x.*"}[5m])`:                               1, // equal outputs checked when computed
		`sum by (job) (rate({job="a"}[5m]))`:                        1,
		`max_over_time(rate(x_total[5m])[10m:1m])`:                  0,
		`absent(rate(x_total[5m]))`:                                 0,
		`timestamp(rate(x_total[5m]))`:                              0,
		`irate(x_total[5m])`:                                        1,
		`idelta(x[5m])`:                                             1,
		`rate(x_total[5m] anchored)`:                                0,
		`topk(scalar(sum(rate(x_total[5m]))), y)`:                   1, // y only
		`-rate(x_total[5m]) + 1`:                                    1,
	} {
		e, err := fp.ParseExpr(q)
		if err != nil && strings.Contains(q, "anchored") {
			continue // the parser does not take anchored without its feature flag
		}
		require.NoError(t, err, q)
		require.Equal(t, want, len(markedSpecs(t, fp, e)), q)
	}
}

// TestFastSetSorted: a marked selector asked for sorted series (the
// engine asks unsorted, other callers may not) answers them sorted, as
// the plain series set does.
func TestFastSetSorted(t *testing.T) {
	node, _, d := loadedNode(t)
	fp := newFastParser()
	e, err := fp.ParseExpr(`rate(http_requests_total[5m])`)
	require.NoError(t, err)
	vs := e.(*parser.VectorSelector)
	qa := queryable{b: httpapi.Local{DB: node.db}, ns: "default",
		fast: &fastRange{marker: fp.marker, start: d.start + 3600_000, end: d.start + 7200_000, stp: 60_000,
			lookback: 300_000, parallelism: 2, maxSamples: 1 << 30}}
	q, err := qa.Querier(d.start, d.end)
	require.NoError(t, err)
	set := q.Select(context.Background(), true, nil, vs.LabelMatchers...)
	var got []labels.Labels
	for set.Next() {
		got = append(got, set.At().Labels())
	}
	require.NoError(t, set.Err())
	require.Greater(t, len(got), 10)
	require.True(t, slices.IsSortedFunc(got, labels.Compare), "sorted")
	require.Empty(t, got[0].Get(labels.MetricName), "rate drops the name")
}

// TestFastPathMetadataLabels: series told apart only by __type__ become
// equal once rate drops the metadata labels; the engine refuses that
// with an error, and the fast path hands such a query to it.
func TestFastPathMetadataLabels(t *testing.T) {
	node, _, d := loadedNode(t)
	for _, typ := range []string{"counter", "gauge"} {
		id := ident.FromLabels(labels.FromStrings("__name__", "typed_total", "__type__", typ, "a", "1"))
		batch := []tstorage.Sample{}
		for k := range 20 {
			batch = append(batch, tstorage.Sample{ID: id, Shard: node.db.Shard(id), T: d.start + int64(k)*15_000, V: float64(k)})
		}
		require.NoError(t, node.db.WriteBatch("default", batch))
	}
	pair := newFastPair(t, node, Options{})
	p := url.Values{"query": {`rate(typed_total[1m])`}, "start": {fmtTime(d.start, false)},
		"end": {fmtTime(d.start+5*60_000, false)}, "step": {"15s"}}
	msg, body := pair.diff(t, "/api/v1/query_range", p)
	require.Empty(t, msg)
	require.Contains(t, body, "same labelset")
	require.Positive(t, pair.api.fastStats.declined.Load())
}

// TestFastPathMetadataLabelsNoTwin: series with __type__ that stay
// distinct once rate drops the metadata labels keep the fast path, and
// answer as the engine does.
func TestFastPathMetadataLabelsNoTwin(t *testing.T) {
	b := &memBackend{}
	for _, job := range []string{"a", "b"} {
		var ss []tsample
		for i := range 240 {
			ss = append(ss, tsample{testBase + int64(i)*15_000, float64(i)})
		}
		b.add(labels.FromStrings("__name__", "x_total", "__type__", "counter", "job", job), ss...)
	}
	pair := newBackendPair(t, b, Options{})
	p := url.Values{"query": {`rate(x_total[1m])`}, "start": {msParam(testBase + 5*60_000)},
		"end": {msParam(testBase + 30*60_000)}, "step": {"60"}}
	msg, _ := pair.diff(t, "/api/v1/query_range", p)
	require.Empty(t, msg)
	require.Zero(t, pair.api.fastStats.declined.Load(), "no twin: no fallback")
	require.Positive(t, pair.api.fastStats.computed.Load())
}

// TestFastPathAggregatesAtTheEdges: sums and means of values near the
// float64 limit (avg switches to an incremental mean where the sum would
// overflow, at some steps and not others), infinities, NaN and values of
// very different magnitudes (where the Kahan compensation matters), over
// groups that appear and vanish, answer bit for bit as the engine does.
func TestFastPathAggregatesAtTheEdges(t *testing.T) {
	b := &memBackend{}
	vals := [][]float64{
		{1e308, 1.5e308, -1e308, 1, 3},
		{1.7e308, 1e308, 1e-300, math.Inf(1), 2},
		{1e16, 1, -1e16, math.NaN(), 1e-3},
		{0.1, 0.2, 0.3, 1e308, 7},
	}
	for i, vs := range vals {
		var ss []tsample
		for k := range 120 {
			if (k/10+i)%4 == 3 {
				continue // a gap: the group loses this series for a while
			}
			ss = append(ss, tsample{testBase + int64(k)*15_000, vs[k%len(vs)] * float64(1+k%3)})
		}
		b.add(labels.FromStrings("__name__", "edge", "g", strconv.Itoa(i%2), "i", strconv.Itoa(i)), ss...)
	}
	pair := newBackendPair(t, b, Options{})
	for _, q := range []string{`avg(edge)`, `sum(edge)`, `count(edge)`, `avg by (g) (edge)`, `sum by (g) (edge)`,
		`avg(delta(edge[1m]))`, `sum by (g) (idelta(edge[1m]))`} {
		for _, step := range []string{"15", "40"} {
			p := url.Values{"query": {q}, "start": {msParam(testBase)}, "end": {msParam(testBase + 30*60_000)}, "step": {step}}
			msg, _ := pair.diff(t, "/api/v1/query_range", p)
			require.Empty(t, msg)
		}
		p := url.Values{"query": {q}, "time": {msParam(testBase + 7*60_000)}}
		msg, _ := pair.diff(t, "/api/v1/query", p)
		require.Empty(t, msg)
	}
	require.Positive(t, pair.api.fastStats.aggregated.Load())
	require.Zero(t, pair.api.fastStats.declined.Load())
}

// TestFastPathOverTimeOverflow: avg_over_time and sum_over_time of values
// whose sum overflows float64 (avg's switch to the incremental mean, sum's
// infinity without the compensation) answer as the engine does. The
// generated data set's finite values are too small to overflow.
func TestFastPathOverTimeOverflow(t *testing.T) {
	start := time.Now().Add(-time.Hour).Truncate(time.Minute).UnixMilli()
	d := &dataset{start: start, end: start + 30*60*1000}
	huge := []float64{1.7e308, 1.6e308, -1.75e308, 9e307, 1.79e308, 1.2e308, -1e308, 1.5e308, 3, 1.78e308}
	for s := range 3 {
		var ss []tsample
		for i, t := 0, start; t <= d.end; i, t = i+1, t+15_000 {
			ss = append(ss, tsample{t, huge[(i+s)%len(huge)] / float64(1+s%2)})
		}
		d.series = append(d.series, memSeries{lset: labels.FromStrings("__name__", "huge", "s", strconv.Itoa(s)), samples: ss})
	}
	node := newTesseraNode(t, time.UnixMilli(d.end+30_000), Options{})
	node.remoteWrite(t, d)
	pair := newFastPair(t, node, Options{})
	for _, q := range []string{`avg_over_time(huge[1m])`, `avg_over_time(huge[5m])`, `sum_over_time(huge[2m])`,
		`max_over_time(huge[1m])`, `sum by (s) (avg_over_time(huge[3m]))`} {
		p := url.Values{"query": {q}, "start": {fmtTime(d.start, false)}, "end": {fmtTime(d.end, false)}, "step": {"15"}}
		msg, body := pair.diff(t, "/api/v1/query_range", p)
		require.Empty(t, msg)
		require.NotContains(t, body, `"result":[]`, q)
	}
	require.Positive(t, pair.api.fastStats.computed.Load())
}

// TestFastPathNamelessSelector: a function over a selector without a
// metric name (scripts/mem-per-series.sh's `sum by (instance)
// (rate({job="bench"}[5m]))`) selects several names; their outputs, named
// no more, stay distinct here, so the fast path computes it, as the
// engine does, with the annotation of each name that is no counter's.
func TestFastPathNamelessSelector(t *testing.T) {
	b := &memBackend{}
	for i := range 40 {
		var ss []tsample
		for k := range 240 {
			ss = append(ss, tsample{testBase + int64(k)*15_000, float64(k * (i%7 + 1))})
		}
		// One name that is no counter's: two infos would come in the
		// order of a map, the engine's as the fast path's.
		name := []string{"a_total", "b", "c_total", "d_total"}[i%4]
		b.add(labels.FromStrings("__name__", name, "job", "bench", "instance", strconv.Itoa(i%5), "series", strconv.Itoa(i)), ss...)
	}
	pair := newBackendPair(t, b, Options{})
	for _, p := range []url.Values{
		instant(`sum by (instance) (rate({job="bench"}[5m]))`, testBase+30*60_000),
		instant(`count by (job) (rate({job="bench"}[5m]))`, testBase+30*60_000),
		instant(`rate({job="bench"}[5m])`, testBase+30*60_000),
		ranged(`sum by (instance) (increase({job="bench"}[2m]))`, testBase, testBase+60*60_000, "60"),
		ranged(`avg_over_time({job="bench"}[2m])`, testBase, testBase+60*60_000, "300"),
	} {
		path := "/api/v1/query"
		if p.Has("step") {
			path += "_range"
		}
		msg, _ := pair.diff(t, path, p)
		require.Empty(t, msg, p.Get("query"))
	}
	require.Zero(t, pair.api.fastStats.declined.Load(), "distinct outputs: no fallback")
	require.Positive(t, pair.api.fastStats.computed.Load())
}

// TestFastPathNamelessTwins: two series that differ only in their name
// are one label set once rate drops it; the engine refuses (overlap) or
// merges (a range query, no overlap) them, and the fast path hands such
// a query to it.
func TestFastPathNamelessTwins(t *testing.T) {
	b := &memBackend{}
	var before, after []tsample
	for i := range 240 {
		ts := testBase + int64(i)*15_000
		if i < 140 {
			before = append(before, tsample{ts, float64(i)})
		}
		if i >= 100 {
			after = append(after, tsample{ts, float64(i)})
		}
	}
	b.add(labels.FromStrings("__name__", "x_total", "job", "a"), before...)
	b.add(labels.FromStrings("__name__", "y_total", "job", "a"), after...)
	b.add(labels.FromStrings("__name__", "y_total", "job", "b"), after...)
	pair := newBackendPair(t, b, Options{})
	for _, p := range []url.Values{
		instant(`rate({job="a"}[5m])`, testBase+30*60*1000),
		instant(`sum(rate({job=~"a|b"}[5m]))`, testBase+30*60*1000),
		ranged(`rate({job="a"}[1m])`, testBase, testBase+60*60*1000, "300"),
	} {
		path := "/api/v1/query"
		if p.Has("step") {
			path += "_range"
		}
		msg, _ := pair.diff(t, path, p)
		require.Empty(t, msg, p.Get("query"))
	}
	require.Positive(t, pair.api.fastStats.declined.Load(), "twins: the engine decides")
}
