package promapi

import (
	"context"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/stretchr/testify/require"
)

// markedSpecs are the fast path specs of e's marked selectors, those
// inside a marked binary operator included, in the query's order.
func markedSpecs(t *testing.T, fp fastParser, e parser.Expr) []fastSpec {
	t.Helper()
	var out []fastSpec
	var fromPlan func(p *binPlan)
	fromOperand := func(o binOperand) {
		if o.Bin != nil {
			fromPlan(o.Bin)
		}
		if o.Sel != nil {
			out = append(out, *o.Sel.spec)
		}
	}
	fromPlan = func(p *binPlan) { fromOperand(p.L); fromOperand(p.R) }
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		for _, m := range vs.LabelMatchers {
			if m.Name != fp.marker {
				continue
			}
			pl := planOf(m)
			require.NotNil(t, pl, "a marker matcher without a plan")
			if pl.bin != nil {
				fromPlan(pl.bin)
				continue
			}
			out = append(out, *pl.sel)
		}
		return nil
	})
	return out
}

// binMarked reports whether e is one selector standing for a binary
// operator.
func binMarked(fp fastParser, e parser.Expr) bool {
	vs, ok := e.(*parser.VectorSelector)
	if !ok || len(vs.LabelMatchers) != 1 || vs.LabelMatchers[0].Name != fp.marker {
		return false
	}
	pl := planOf(vs.LabelMatchers[0])
	return pl != nil && pl.bin != nil
}

// TestFastBinaryRewrite pins which binary operators the fast path takes
// as a whole, and how many selectors it computes for them.
func TestFastBinaryRewrite(t *testing.T) {
	fp := newFastParser()
	for q, want := range map[string]struct {
		bin   bool
		specs int
	}{
		`a / b`:                            {true, 2},
		`(a / b)`:                          {true, 2},
		`1 - a`:                            {true, 1},
		`a * 100`:                          {true, 1},
		`a / on (i) b`:                     {true, 2},
		`a / on () b`:                      {true, 2},
		`a / ignoring (j) b`:               {true, 2},
		`a % b`:                            {true, 2},
		`a ^ 2`:                            {true, 1},
		`a atan2 b`:                        {true, 2},
		`100 * (1 - a / b)`:                {true, 2},
		`(a - b) / (a + b)`:                {true, 4},
		`rate(a_total[5m]) / b`:            {true, 2},
		`1 - avg by (i) (rate(x[5m]))`:     {true, 1},
		`sum by (i) (a) / count(b)`:        {true, 2},
		`a > b`:                            {true, 2},
		`a > bool b`:                       {true, 2},
		`a == 1`:                           {true, 1},
		`2 <= bool a`:                      {true, 1},
		`a and b`:                          {false, 2},
		`a or b`:                           {false, 2},
		`a unless b`:                       {false, 2},
		`a / on (i) group_left b`:          {false, 2},
		`a / on (i) group_right (j) b`:     {false, 2},
		`1 + 2`:                            {false, 0},
		`sum(a / b)`:                       {false, 2},
		`abs(a - b)`:                       {false, 2},
		`-a + b`:                           {false, 2},
		`a / b offset 1m`:                  {false, 1},
		`a / scalar(b)`:                    {false, 1},
		`max by (i) (a) / b`:               {true, 2},
		`stddev by (i) (a) / b`:            {false, 2},
		`histogram_quantile(0.9, a) * 2`:   {false, 1},
		`a + (b > 1)`:                      {true, 2},
		`a + on (i) group_left () (b > 1)`: {false, 2},
		`time() - a`:                       {false, 1},
	} {
		e, err := fp.ParseExpr(q)
		require.NoError(t, err, q)
		require.Equal(t, want.bin, binMarked(fp, e), q)
		require.Len(t, markedSpecs(t, fp, e), want.specs, q)
	}
}

// binData is a memBackend for the operator tests, a sample every 15 s
// for 30 minutes from testBase, with values the arithmetic must get
// right (NaN, infinities, zeros of both signs, huge, negative), steps
// without a value on one side or the other (gaps, a stale marker), and
// label sets for each kind of matching:
//
//	a{i,j}, b{i,j}     the same label sets but the name (default matching)
//	c{i,j,side}        one more label (ignoring(side), on(i, j))
//	d{i}               one per i (on(i), ignoring(j) against a{j="0"})
//	e                  one series (on())
//	g{__type__,i,j}    a metadata label the operators drop
//
// a{i="2",j="1"} has no b and b{i="3",j="0"} no a: missing on one side.
func binData() *memBackend {
	b := &memBackend{}
	odd := []float64{1, math.NaN(), 2.5, math.Inf(1), 0, -3, math.Inf(-1), math.Copysign(0, -1), 1e308, 0.1, 7, -1e-300}
	stale := math.Float64frombits(value.StaleNaN)
	series := func(lset labels.Labels, seed int, gap func(k int) bool) {
		var ss []tsample
		for k := range 121 {
			if gap(k) {
				continue
			}
			v := odd[(k*(seed+1)+seed)%len(odd)] * float64(1+seed%3)
			if k == 50+seed {
				v = stale
			}
			ss = append(ss, tsample{testBase + int64(k)*15_000, v})
		}
		b.add(lset, ss...)
	}
	n := 0
	for i := range 4 {
		for j := range 2 {
			is, js := strconv.Itoa(i), strconv.Itoa(j)
			n++
			if !(i == 3 && j == 0) {
				series(labels.FromStrings("__name__", "a", "i", is, "j", js), n, func(k int) bool { return (k/7+n)%5 == 0 })
			}
			if !(i == 2 && j == 1) {
				series(labels.FromStrings("__name__", "b", "i", is, "j", js), n+3, func(k int) bool { return (k/11+n)%4 == 1 })
			}
			series(labels.FromStrings("__name__", "c", "i", is, "j", js, "side", "c"), n+5, func(k int) bool { return k%9 == 4 })
			series(labels.FromStrings("__name__", "g", "__type__", "gauge", "i", is, "j", js), n+7, func(k int) bool { return k > 100 })
		}
		series(labels.FromStrings("__name__", "d", "i", strconv.Itoa(i)), i+11, func(k int) bool { return (k/13+i)%3 == 2 })
	}
	series(labels.FromStrings("__name__", "e"), 13, func(k int) bool { return k/20 == 3 })
	return b
}

// same fails unless both APIs answer p byte for byte the same, the
// order of an instant vector's series included (diff lets it differ, for
// the engine's map-ordered aggregations; a binary operator's order is the
// left side's), and returns the body.
func (p fastPair) same(t *testing.T, path string, params url.Values) string {
	t.Helper()
	q := "?" + params.Encode()
	fc, fb := rawGet(t, p.fast.URL+path+q)
	pc, pb := rawGet(t, p.plain.URL+path+q)
	require.Equal(t, pc, fc, "%s%s", path, q)
	require.Equal(t, pb, fb, "%s%s", path, q)
	return pb
}

// binCases are the requests each operator query is compared on: range
// queries at the scrape interval, across it and longer than the gaps,
// one with a lookback shorter than the step, and instants.
func binCases(q string) []url.Values {
	end := testBase + 30*60_000
	out := []url.Values{
		ranged(q, testBase, end, "15"),
		ranged(q, testBase-60_000, end+10*60_000, "40"),
		ranged(q, testBase+3*60_000+500, testBase+20*60_000, "7"),
	}
	p := ranged(q, testBase, end, "60")
	p.Set("lookback_delta", "10s")
	out = append(out, p)
	for _, ts := range []int64{testBase + 7*60_000, testBase + 12*60_000 + 30_000, end + 4*60_000} {
		out = append(out, instant(q, ts))
	}
	return out
}

// TestFastBinaryMatchesEngine holds every operator the fast path takes,
// with every kind of matching it takes, to the engine: byte-identical
// answers (values to the last bit, labels, order, warnings), computed by
// the fast path (binops counted); and the operators it must leave to the
// engine (duplicate matches, equal result labels) to answer as the
// engine does, errors included.
func TestFastBinaryMatchesEngine(t *testing.T) {
	pair := newBackendPair(t, binData(), Options{Parallelism: 2})
	var fast []string
	for _, op := range []string{"+", "-", "*", "/", "%", "^", "atan2"} {
		for _, m := range []string{"", " on (i, j)", " ignoring (side)"} {
			rhs := "b"
			if m == " ignoring (side)" {
				rhs = "c"
			}
			fast = append(fast, fmt.Sprintf("a %s%s %s", op, m, rhs))
		}
		fast = append(fast,
			fmt.Sprintf("a{j=\"0\"} %s on (i) d", op),
			fmt.Sprintf("a{j=\"0\"} %s ignoring (j) d", op),
			fmt.Sprintf("e %s on () d{i=\"2\"}", op),
			fmt.Sprintf("a{i=\"1\",j=\"1\"} %s on () e", op),
			fmt.Sprintf("a %s 2", op),
			fmt.Sprintf("2 %s a", op),
			fmt.Sprintf("a %s -0.5", op),
			fmt.Sprintf("0 %s b", op),
			fmt.Sprintf("a %s NaN", op),
			fmt.Sprintf("Inf %s b", op),
			fmt.Sprintf("g %s 3", op),
			fmt.Sprintf("g %s on (i, j) a", op),
			fmt.Sprintf("g %s a", op), // the signature leaves out __type__
			fmt.Sprintf("b %s ignoring (__type__) g", op),
		)
	}
	for _, op := range []string{"==", "!=", ">", "<", ">=", "<="} {
		for _, b := range []string{"", " bool"} {
			op := op + b
			fast = append(fast,
				fmt.Sprintf("a %s b", op),
				fmt.Sprintf("a %s on (i, j) b", op),
				fmt.Sprintf("c %s ignoring (side) a", op),
				fmt.Sprintf("a{j=\"1\"} %s on (i) d", op),
				fmt.Sprintf("a %s 2.5", op),
				fmt.Sprintf("0 %s b", op),
				fmt.Sprintf("a %s NaN", op),
				fmt.Sprintf("-Inf %s a", op),
				fmt.Sprintf("g %s 0", op),
				fmt.Sprintf("g %s ignoring (__type__) a", op),
			)
		}
	}
	fast = append(fast,
		`a > 0 < 5`,
		`(a - b) > bool 0`,
		`(a > 1) * 10`,
		`100 * (1 - a / b) >= 50`,
		`1 - a / b`,
		`100 * (1 - a / on (i, j) c)`,
		`(a - b) / (a + b)`,
		`(a * 2) - ignoring (side) c`,
		`1 - avg by (i) (rate(a[2m]))`,
		`sum by (i) (a) / count by (i) (b)`,
		`rate(a[1m]) * 2`,
		`increase(b[2m]) / on (i, j) irate(a[1m])`,
		`max_over_time(a[2m]) - min_over_time(a[2m])`,
		`sum(a) / sum(b)`,
		`(((a)) + ((b)))`,
		`a / {__name__="b", j="1"}`,
	)
	// The engine's errors and merges: the fast path declines them.
	declined := []string{
		`{__name__=~"a|b"} > ignoring (side) c`, // two lefts with one signature
		`{__name__=~"a|b"} > bool 0`,            // equal labels once bool drops the name
		`a / on (i) d`,                          // many-to-one without group_left
		`d / on (i) a`,                          // many on the right
		`a + on () e`,                           // many to one on ()
		`{__name__=~"a|b"} * 2`,                 // equal labels once the name goes
		`{__name__=~"a|b"} - ignoring (side) c`,
	}
	// Left to the engine from the start (not rewritten): a sample.
	engine := []string{`a and b`, `a or b`, `a unless b`, `a / on (i) group_left d`, `-a + b`, `sum(a / b)`, `sum(a > b)`}
	var seen strings.Builder
	for _, q := range fast {
		before := pair.api.fastStats.binops.Load()
		declinedBefore := pair.api.fastStats.declined.Load()
		nonEmpty := 0
		for _, p := range binCases(q) {
			path := "/api/v1/query_range"
			if p.Has("time") {
				path = "/api/v1/query"
			}
			body := pair.same(t, path, p)
			seen.WriteString(body)
			if !strings.Contains(body, `"result":[]`) {
				nonEmpty++
			}
		}
		// A filter by NaN or -Inf may hold nowhere.
		special := strings.Contains(q, "NaN") || strings.Contains(q, "Inf")
		if _, filter := binCmps[binOpOf(t, q)]; !special || !filter || strings.Contains(q, "bool") {
			require.Greater(t, nonEmpty, 0, "%s: nothing to compare", q)
		}
		require.Equal(t, declinedBefore, pair.api.fastStats.declined.Load(), "%s: must stay on the fast path", q)
		require.Greater(t, pair.api.fastStats.binops.Load(), before, "%s: computed by the fast path", q)
	}
	for _, v := range []string{`"NaN"`, `"+Inf"`, `"-Inf"`, `"0"`, `"-0"`} {
		require.Contains(t, seen.String(), v, "the operators' answers must hold %s", v)
	}
	for _, q := range declined {
		before := pair.api.fastStats.declined.Load()
		for _, p := range binCases(q) {
			path := "/api/v1/query_range"
			if p.Has("time") {
				path = "/api/v1/query"
			}
			pair.same(t, path, p)
		}
		require.Greater(t, pair.api.fastStats.declined.Load(), before, "%s: must be the engine's", q)
	}
	before := pair.api.fastStats.binops.Load()
	for _, q := range engine {
		for _, p := range binCases(q) {
			path := "/api/v1/query_range"
			if p.Has("time") {
				path = "/api/v1/query"
			}
			pair.same(t, path, p)
		}
	}
	require.Equal(t, before, pair.api.fastStats.binops.Load(), "not the fast path's operators")
}

// TestFastBinaryComparisonCatchesErrors shows the comparison above fails
// when an operator computes the wrong thing: one ulp off, its operands
// swapped, or NaN where the engine has a number; and passes with the
// right one, computed by the fast path.
func TestFastBinaryComparisonCatchesErrors(t *testing.T) {
	pair := newBackendPair(t, binData(), Options{})
	for name, c := range map[string]struct {
		query  string
		op     parser.ItemType
		broken func(l, r float64) float64
	}{
		"div one ulp":   {`a / b`, parser.DIV, func(l, r float64) float64 { return l / r * (1 + 0x1p-52) }},
		"sub swapped":   {`1 - a`, parser.SUB, func(l, r float64) float64 { return r - l }},
		"atan2 swapped": {`a atan2 on (i, j) c`, parser.ATAN2, func(l, r float64) float64 { return math.Atan2(r, l) }},
		"pow NaN for 0": {`a ^ 2`, parser.POW, func(l, r float64) float64 {
			if l == 0 {
				return math.NaN()
			}
			return math.Pow(l, r)
		}},
		"mod as remainder": {`a % b`, parser.MOD, math.Remainder},
	} {
		t.Run(name, func(t *testing.T) { breakOperator(t, pair, c.query, binOps, c.op, c.broken) })
	}
	for name, c := range map[string]struct {
		query  string
		op     parser.ItemType
		broken func(l, r float64) bool
	}{
		"> as >=":        {`a > 2.5`, parser.GTR, func(l, r float64) bool { return l >= r }},
		"!= true of NaN": {`a != bool b`, parser.NEQ, func(l, r float64) bool { return l != r && !math.IsNaN(l) }},
		"< swapped":      {`a < on (i, j) c`, parser.LSS, func(l, r float64) bool { return r < l }},
	} {
		t.Run(name, func(t *testing.T) { breakOperator(t, pair, c.query, binCmps, c.op, c.broken) })
	}
}

// breakOperator checks that query agrees with the engine on the fast
// path, then replaces op's function in table (binOps or binCmps) with
// broken, for the rest of the test, and checks that the comparison now
// fails.
func breakOperator[F any](t *testing.T, pair fastPair, query string, table map[parser.ItemType]F, op parser.ItemType, broken F) {
	t.Helper()
	p := ranged(query, testBase, testBase+30*60_000, "15")
	before := pair.api.fastStats.binops.Load()
	msg, _ := pair.diff(t, "/api/v1/query_range", p)
	require.Empty(t, msg)
	require.Greater(t, pair.api.fastStats.binops.Load(), before)
	right := table[op]
	table[op] = broken
	t.Cleanup(func() { table[op] = right })
	msg, _ = pair.diff(t, "/api/v1/query_range", p)
	require.NotEmpty(t, msg, "a wrong operator must not pass the comparison")
}

// TestFastBinaryLimits: an operator's results count against the samples
// limit with its operands' (the engine copies them into its matrix):
// when they could pass half the limit (known from the operands' series
// lists: at most one value a series and step) the fast path declines
// before computing anything and the engine answers, as for a marked
// selector.
func TestFastBinaryLimits(t *testing.T) {
	q := ranged(`a * 2`, testBase, testBase+30*60_000, "15")
	// n: the points of a (and of a * 2) at the query's steps.
	_, body := rawGet(t, newBackendPair(t, binData(), Options{}).plain.URL+"/api/v1/query_range?"+q.Encode())
	n := strings.Count(body, "],[") + strings.Count(body, `"values":[[`)
	require.Greater(t, n, 500)
	for _, tc := range []struct {
		maxSamples int
		declined   bool
	}{
		{100 * n, false},
		// a's step values (n and the gaps' StaleNaNs, under 1.5n) fit
		// under half the limit; with the results' n they pass it.
		{3 * n, true},
	} {
		pair := newBackendPair(t, binData(), Options{MaxSamples: tc.maxSamples})
		require.Equal(t, body, pair.same(t, "/api/v1/query_range", q), "maxSamples %d", tc.maxSamples)
		// Declined from the series list, before the operand is computed.
		require.Equal(t, !tc.declined, pair.api.fastStats.computed.Load() > 0, "maxSamples %d: the operand is the fast path's unless declined", tc.maxSamples)
		require.Equal(t, tc.declined, pair.api.fastStats.declined.Load() > 0, "maxSamples %d", tc.maxSamples)
		require.Equal(t, !tc.declined, pair.api.fastStats.binops.Load() > 0, "maxSamples %d", tc.maxSamples)
	}

	// Nested, each operator's results count: a's step values l, a * 2's
	// l and (a * 2) * 2's l pass half of 5l, the operand and the last
	// results alone would not.
	fp := newFastParser()
	e, err := fp.ParseExpr(`a`)
	require.NoError(t, err)
	qa := queryable{b: binData(), ns: "default",
		fast: &fastRange{marker: fp.marker, start: testBase, end: testBase + 30*60_000, stp: 15_000,
			lookback: 300_000, parallelism: 2, maxSamples: 1 << 30}}
	qr, err := qa.Querier(testBase, testBase+30*60_000)
	require.NoError(t, err)
	set := qr.Select(context.Background(), false, nil, e.(*parser.VectorSelector).LabelMatchers...)
	l := 0
	for set.Next() {
		l += len(set.At().(*precomputed).vals)
	}
	require.NoError(t, set.Err())
	q = ranged(`(a * 2) * 2`, testBase, testBase+30*60_000, "15")
	pair := newBackendPair(t, binData(), Options{MaxSamples: 5 * l})
	require.NotContains(t, pair.same(t, "/api/v1/query_range", q), `"error"`)
	require.Positive(t, pair.api.fastStats.declined.Load())
	require.Zero(t, pair.api.fastStats.binops.Load())
}

// binOpOf is the operator of query q, a binary operator.
func binOpOf(t *testing.T, q string) parser.ItemType {
	e, err := parser.NewParser(parser.Options{}).ParseExpr(q)
	require.NoError(t, err, q)
	be, ok := unparen(e).(*parser.BinaryExpr)
	require.True(t, ok, q)
	return be.Op
}

// TestFastBinarySetSorted: a marked operator asked for sorted series (the
// engine asks unsorted) answers them sorted, as the plain series set
// does; unsorted, in the left side's order (memBackend's: newest series
// first).
func TestFastBinarySetSorted(t *testing.T) {
	fp := newFastParser()
	e, err := fp.ParseExpr(`a / b`)
	require.NoError(t, err)
	vs := e.(*parser.VectorSelector)
	qa := queryable{b: binData(), ns: "default",
		fast: &fastRange{marker: fp.marker, start: testBase, end: testBase + 30*60_000, stp: 15_000,
			lookback: 300_000, parallelism: 2, maxSamples: 1 << 30}}
	q, err := qa.Querier(testBase, testBase+30*60_000)
	require.NoError(t, err)
	for _, sorted := range []bool{true, false} {
		set := q.Select(context.Background(), sorted, nil, vs.LabelMatchers...)
		var got []labels.Labels
		for set.Next() {
			got = append(got, set.At().Labels())
		}
		require.NoError(t, set.Err())
		require.Len(t, got, 6, "a and b share 6 label sets")
		require.Equal(t, sorted, slices.IsSortedFunc(got, labels.Compare), "sorted %v", sorted)
		require.Empty(t, got[0].Get(labels.MetricName), "arithmetic drops the name")
	}
}
