package promapi

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/ident"
	"github.com/tessera-tsdb/tessera/limits"
	"github.com/tessera-tsdb/tessera/limits/limitstest"
)

// chainExpr is `term + term + ...` of n terms: a left-nested tree n-1
// operators deep.
func chainExpr(term string, n int) string {
	var b strings.Builder
	b.Grow(n * (len(term) + 3))
	for i := range n {
		if i > 0 {
			b.WriteString(" + ")
		}
		b.WriteString(term)
	}
	return b.String()
}

// treeDepth is the depth of e's parsed tree, for exprDepth to bound.
func treeDepth(e parser.Expr) int {
	d := 0
	for _, c := range parser.Children(e) {
		if ce, ok := c.(parser.Expr); ok {
			d = max(d, treeDepth(ce)+1)
		}
	}
	return d
}

func TestExprDepth(t *testing.T) {
	for _, tc := range []struct {
		q    string
		want int
	}{
		{"x", 0},
		{"1 + 1", 1},
		{chainExpr("x", 1000), 999},
		{"(1 + 1)", 2},
		{"-x", 1},
		{"rate(x[5m])", 2},
		{`sum by (a, b) (x{c=",(+", d!~"-"})`, 1},
		{"clamp(a + b + c, d, e)", 3},
		{"topk(5, a + b)", 2},
		{"a * b + c * d", 3}, // the tree is 2 deep: an upper bound
		{"max_over_time((a + b)[5m:1m])", 4},
		{`a + on (x, y) group_left (z) b`, 2},
		{"(((x", 3},    // unclosed: still counted
		{"x)) + y", 0}, // unbalanced: the lexer stops
		{`x{a="`, 0},   // a lexing error ends the count
	} {
		require.Equal(t, tc.want, exprDepth(tc.q), tc.q)
		if e, err := parser.NewParser(parser.Options{}).ParseExpr(tc.q); err == nil {
			require.LessOrEqual(t, treeDepth(e), tc.want, "exprDepth bounds the tree of %s", tc.q)
		}
	}
}

func postQuery(t testing.TB, base, path string, params url.Values) (int, apiResponse) {
	t.Helper()
	resp, err := http.PostForm(base+path, params)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var r apiResponse
	require.NoError(t, json.Unmarshal(body, &r), string(body))
	return resp.StatusCode, r
}

// TestExpressionLimits: an expression too long or too deep is refused
// with a 400 naming its limit before it is parsed (a 1 MB chain used to
// hold a core for minutes, past the query timeout); one at the limits
// is answered.
func TestExpressionLimits(t *testing.T) {
	now := time.Now().Truncate(time.Second)
	n := newLimitedNode(t, now, limits.Config{}, Options{})
	n.store(t, ident.FromLabels(labels.FromStrings("__name__", "canary")), now.UnixMilli())
	at := unixParam(now)

	deepest := defaultQuery.MaxExpressionDepth + 1 // terms
	code, r := postQuery(t, n.srv.URL, "/api/v1/query", url.Values{"query": {chainExpr("1", deepest)}, "time": {at}})
	require.Equal(t, http.StatusOK, code, r.Error)
	require.JSONEq(t, `{"resultType":"scalar","result":[`+at+`,"`+strconv.Itoa(deepest)+`"]}`, string(r.Data))

	// canary's one sample is 0: the chain adds up to 0, on the fast path.
	code, r = postQuery(t, n.srv.URL, "/api/v1/query", url.Values{"query": {chainExpr("canary", deepest)}, "time": {at}})
	require.Equal(t, http.StatusOK, code, r.Error)
	require.JSONEq(t, `{"resultType":"vector","result":[{"metric":{},"value":[`+at+`,"0"]}]}`, string(r.Data))

	rangeQ := func(q string) url.Values {
		return url.Values{"query": {q}, "start": {unixParam(now.Add(-time.Minute))}, "end": {at}, "step": {"15"}}
	}
	for _, tc := range []struct {
		name, path string
		params     url.Values
		limit      string
		want       string
	}{
		{"depth", "/api/v1/query", url.Values{"query": {chainExpr("1", deepest+1)}, "time": {at}},
			limits.QueryExpressionDepth, "query expression nests 1001 deep"},
		{"depth, selectors", "/api/v1/query", url.Values{"query": {chainExpr("canary", 5000)}, "time": {at}},
			limits.QueryExpressionDepth, "nests 4999 deep"},
		{"depth, brackets", "/api/v1/query", url.Values{"query": {strings.Repeat("(", 1001) + "1" + strings.Repeat(")", 1001)}, "time": {at}},
			limits.QueryExpressionDepth, "nests 1001 deep"},
		{"depth, range", "/api/v1/query_range", rangeQ(chainExpr("1", 8000)),
			limits.QueryExpressionDepth, "nests 7999 deep"},
		{"depth, exemplars", "/api/v1/query_exemplars", url.Values{"query": {chainExpr("canary", 2000)}},
			limits.QueryExpressionDepth, "nests 1999 deep"},
		{"bytes", "/api/v1/query", url.Values{"query": {`canary{x=~"` + strings.Repeat("a|", defaultQuery.MaxExpressionBytes/2) + `"}`}, "time": {at}},
			limits.QueryExpressionBytes, "query expression of 65549 bytes exceeds query.maxExpressionBytes=65536"},
		{"bytes, 1 MB chain", "/api/v1/query_range", rangeQ(chainExpr("1", 250_000)),
			limits.QueryExpressionBytes, "query.maxExpressionBytes=65536"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := limitstest.Refused(n.scope, tc.limit)
			code, r := postQuery(t, n.srv.URL, tc.path, tc.params)
			require.Equal(t, http.StatusBadRequest, code, r.Error)
			require.Equal(t, "bad_data", r.ErrorType)
			require.Contains(t, r.Error, tc.want)
			require.Contains(t, r.Error, tc.limit)
			require.Equal(t, before+1, limitstest.Refused(n.scope, tc.limit))
		})
	}
}

// TestLongSelectorChainWithoutDepthLimit: with the depth limit off, a
// chain of 5,002 selectors is the engine's (the fast path declines past
// maxBinDepth before reading data), answered as Prometheus answers it.
// It used to answer 422 "fast path marker: ... exceeded max depth": the
// fast path's plan nested past encoding/json's 10,000 levels.
func TestLongSelectorChainWithoutDepthLimit(t *testing.T) {
	if raceEnabled {
		t.Skip("the engine's cost of a 5,000-deep chain is quadratic; seconds under the race detector")
	}
	now := time.Now().Truncate(time.Second)
	n := newLimitedNode(t, now, limits.Config{}, Options{MaxExpressionDepth: -1})
	n.store(t, ident.FromLabels(labels.FromStrings("__name__", "canary")), now.UnixMilli())
	at := unixParam(now)
	code, r := postQuery(t, n.srv.URL, "/api/v1/query", url.Values{"query": {chainExpr("canary", 5002)}, "time": {at}})
	require.Equal(t, http.StatusOK, code, r.Error)
	require.JSONEq(t, `{"resultType":"vector","result":[{"metric":{},"value":[`+at+`,"0"]}]}`, string(r.Data))
}

// TestFastPathDeclinesDeepPlans: past maxBinDepth operators the fast path
// leaves the chain to the engine at parse time; up to it, the chain is one
// selector standing for a registered binary plan.
func TestFastPathDeclinesDeepPlans(t *testing.T) {
	p := newFastParser()
	e, err := p.ParseExpr(chainExpr("canary", maxBinDepth+1))
	require.NoError(t, err)
	vs, ok := e.(*parser.VectorSelector)
	require.True(t, ok, "a chain of %d operators is planned", maxBinDepth)
	pl := planOf(vs.LabelMatchers[len(vs.LabelMatchers)-1])
	require.True(t, pl != nil && pl.bin != nil, "the selector stands for a binary plan")

	e, err = p.ParseExpr(chainExpr("canary", maxBinDepth+2))
	require.NoError(t, err)
	_, ok = e.(*parser.BinaryExpr)
	require.True(t, ok, "a chain of %d operators is the engine's, got %T", maxBinDepth+1, e)
}

// TestTimeNotANumber: a time that is NaN, an infinity or past the
// representable range is a 400 naming the parameter, as any other time
// that does not parse (time=NaN used to be answered 200 at an arbitrary
// instant, -9223372036.854 on amd64).
func TestTimeNotANumber(t *testing.T) {
	now := time.Now().Truncate(time.Second)
	n := newLimitedNode(t, now, limits.Config{}, Options{})
	for _, tc := range []struct {
		path, param string
		params      url.Values
	}{
		{"/api/v1/query", "time", url.Values{"time": {"NaN"}}},
		{"/api/v1/query", "time", url.Values{"time": {"Inf"}}},
		{"/api/v1/query", "time", url.Values{"time": {"-Inf"}}},
		{"/api/v1/query", "time", url.Values{"time": {"1e300"}}},
		{"/api/v1/query_range", "start", url.Values{"start": {"NaN"}, "end": {"10"}, "step": {"1"}}},
		{"/api/v1/query_range", "start", url.Values{"start": {"-Inf"}, "end": {"Inf"}, "step": {"1"}}},
		{"/api/v1/query_range", "end", url.Values{"start": {"0"}, "end": {"NaN"}, "step": {"1"}}},
		{"/api/v1/query_range", "step", url.Values{"start": {"0"}, "end": {"10"}, "step": {"NaN"}}},
		{"/api/v1/series", "start", url.Values{"match[]": {"up"}, "start": {"NaN"}}},
		{"/api/v1/labels", "end", url.Values{"end": {"+Inf"}}},
	} {
		tc.params.Set("query", "1")
		code, r := get(t, n.srv.URL, tc.path, tc.params)
		require.Equal(t, http.StatusBadRequest, code, "%s %v: %s", tc.path, tc.params, r.Error)
		require.Equal(t, "bad_data", r.ErrorType)
		require.Contains(t, r.Error, `invalid parameter "`+tc.param+`"`, "%s %v", tc.path, tc.params)
	}
	// The edges of the range still parse (Prometheus' open range).
	code, r := get(t, n.srv.URL, "/api/v1/series", url.Values{"match[]": {"up"},
		"start": {strconv.FormatInt(minTime.Unix(), 10)}, "end": {strconv.FormatInt(maxTime.Unix(), 10)}})
	require.Equal(t, http.StatusOK, code, r.Error)
}

// FuzzExprDepth: exprDepth bounds the depth of every tree the parser
// builds, whatever the input.
func FuzzExprDepth(f *testing.F) {
	for _, s := range []string{"x", "1 + 1", "(1 + 1)", "-x", "rate(x[5m])", "clamp(a + b + c, d, e)",
		"max_over_time((a + b)[5m:1m])", "sum by (a) (x)[5m:]", "a + on (x) group_left (z) b",
		"-(-(1)) ^ 2 * 3", `x{a="("} offset 5m`, "x @ start()", "rate(x[5m])[10m:1m] offset 1m"} {
		f.Add(s)
	}
	p := parser.NewParser(parser.Options{})
	f.Fuzz(func(t *testing.T, q string) {
		e, err := p.ParseExpr(q)
		d := exprDepth(q)
		if err == nil && treeDepth(e) > d {
			t.Fatalf("%q: tree %d deep, exprDepth %d", q, treeDepth(e), d)
		}
	})
}

// BenchmarkExpressionChain is `1 + 1 + ...` through the query handler:
// answered at 1,000 terms (the engine's cost, quadratic in the depth),
// refused past the depth limit in time linear in its bytes (2,000 and
// 8,000 terms took 0.8 s and 9 s before the limit).
//
//	go test -run '^$' -bench ExpressionChain ./dbnode/promapi
func BenchmarkExpressionChain(b *testing.B) {
	api := newAPI(b, &memBackend{}, Options{})
	for _, terms := range []int{1000, 2000, 8000} {
		form := url.Values{"query": {chainExpr("1", terms)}, "time": {"0"}}
		want := http.StatusOK
		if terms > defaultQuery.MaxExpressionDepth+1 {
			want = http.StatusBadRequest
		}
		b.Run("terms="+strconv.Itoa(terms), func(b *testing.B) {
			// The process' CPU time: wall time swings tenfold on a
			// loaded machine.
			cpu0 := cpuTime()
			defer func() { b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-us/op") }()
			for b.Loop() {
				r := &http.Request{Method: http.MethodPost, Form: form}
				if res := api.query(r); (res.err == nil) != (want == http.StatusOK) {
					b.Fatalf("%d terms: %v, want status %d", terms, res.err, want)
				}
			}
		})
	}
}

// BenchmarkFastPlanChain is the fast path's plan of a chain of selectors
// (already rewritten: the walk and the plan alone). Linear in the terms;
// it was quadratic (parser.Expr.Type at every level).
//
//	go test -run '^$' -bench FastPlanChain ./dbnode/promapi
func BenchmarkFastPlanChain(b *testing.B) {
	p := newFastParser()
	for _, terms := range []int{250, 1000} {
		e, err := p.Parser.ParseExpr(chainExpr("canary", terms))
		require.NoError(b, err)
		e = p.rewrite(e, true)
		b.Run("terms="+strconv.Itoa(terms), func(b *testing.B) {
			// The process' CPU time: wall time swings tenfold on a
			// loaded machine.
			cpu0 := cpuTime()
			defer func() { b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-us/op") }()
			for b.Loop() {
				if _, ok := p.rewriteBinary(e).(*parser.VectorSelector); !ok {
					b.Fatal("not planned")
				}
			}
		})
	}
}
