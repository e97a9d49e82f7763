package promapi

import (
	"github.com/prometheus/common/model"
	"math"
	"slices"
	"strings"

	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/promql/parser/posrange"
	"github.com/tessera-tsdb/tessera/dbnode/query"
)

// The fast path: Prometheus' engine evaluates rate(x[5m]) series by series
// on one goroutine, walking a buffered iterator per step; on a 100,000
// series dashboard query that is most of the query's CPU, and the other
// cores idle. fastParser rewrites, in the parsed query, each call of a
// function fastEval computes (rate, increase, delta, irate, idelta and
// avg/sum/count/min/max_over_time over a plain matrix selector) into a vector selector carrying a marker matcher. The
// querier recognises the marker, computes the function's value at every
// step of the query itself, in parallel over the series, and hands the
// engine one precomputed series per input series, in the order the
// engine would have produced them, with a stale marker where a step has
// no value. The engine then does everything else (aggregation, binary
// operators below the top (fastbinop.go takes the top one), topk,
// histogram_quantile) unchanged, over the same values in
// the same order: answers are bit-identical to the unrewritten query's
// (fastpath_test.go holds them to it).
//
// What is never rewritten, so that the engine's own semantics hold:
// calls under a subquery (their step is not the query's), under any
// function outside safeParents (absent() reads its argument's matchers),
// in an aggregation's parameter; selectors with offset or @. A series
// with native histograms makes the query fall back to the engine
// (errFallback), and so do two outputs of a function that are equal once
// the name is dropped (a selector without a __name__="..." matcher, as
// `rate({job="x"}[5m])`, may select several names: fastSet.load checks
// the outputs' label sets, and the engine refuses or merges such a pair).

// fastFuncs are the functions fastEval computes: rate and its kin with
// the flags of Prometheus' extrapolatedRate, and the *_over_time
// functions of a window's floats whose output drops the metric name
// (last_over_time and first_over_time keep it, so they stay the
// engine's) with the engine's arithmetic (overTimeFuncs).
var fastFuncs = map[string]fastFunc{
	"rate":            {isCounter: true, isRate: true},
	"increase":        {isCounter: true},
	"delta":           {},
	"irate":           {isCounter: true, isRate: true, instant: true},
	"idelta":          {instant: true},
	"avg_over_time":   {over: avgOverTime},
	"sum_over_time":   {over: sumOverTime},
	"count_over_time": {over: countOverTime},
	"min_over_time":   {over: minOverTime},
	"max_over_time":   {over: maxOverTime},
}

// fastFunc is how fastEval computes a function at a step from the
// window's float samples: over, when set, is the whole computation (a
// *_over_time function); otherwise extrapolatedRate or instantRate with
// these flags.
type fastFunc struct {
	isCounter, isRate, instant bool
	over                       func([]promql.FPoint) float64
}

// safeParents are the functions whose argument may be a rewritten call:
// they read only the argument's samples and labels, which the rewrite
// keeps, never the syntax of their argument.
var safeParents = map[string]bool{
	"abs": true, "ceil": true, "floor": true, "round": true, "exp": true,
	"ln": true, "log2": true, "log10": true, "sqrt": true, "sgn": true,
	"clamp": true, "clamp_min": true, "clamp_max": true,
	"sort": true, "sort_desc": true, "sort_by_label": true, "sort_by_label_desc": true,
	"histogram_quantile": true, "label_replace": true, "label_join": true,
}

// fastParser is the engine's parser with the rewrite applied to every
// query it parses. marker is the name of the marker matchers, random per
// API so that no stored series or user query can carry it; a marker
// matcher's value is only an opaque number for error messages and
// traces: what it stands for is the typed plan registered for that
// matcher (plans.go), never text parsed back.
type fastParser struct {
	parser.Parser
	marker string
	// input is the query being rewritten (ParseExpr sets it on its copy),
	// from which each plan keeps its subexpression's text (fastSpec.src).
	input string
}

func newFastParser() fastParser {
	return fastParser{Parser: parser.NewParser(parser.Options{}), marker: newMarker("__tessera_fast_")}
}

// ParseExpr parses input and rewrites the calls the fast path computes.
func (p fastParser) ParseExpr(input string) (parser.Expr, error) {
	expr, err := p.Parser.ParseExpr(input)
	if err != nil {
		return expr, err
	}
	p.input = input
	return p.rewriteBinary(p.rewrite(expr, true)), nil
}

// rewrite returns e with its eligible calls replaced; safe says whether
// every ancestor of e lets it be replaced.
func (p fastParser) rewrite(e parser.Expr, safe bool) parser.Expr {
	switch n := e.(type) {
	case *parser.Call:
		if safe {
			if vs := p.replace(n); vs != nil {
				return p.withSource(vs)
			}
		}
		argSafe := safe && safeParents[n.Func.Name]
		for i, a := range n.Args {
			n.Args[i] = p.rewrite(a, argSafe)
		}
	case *parser.AggregateExpr:
		if safe {
			if vs := p.replaceAgg(n); vs != nil {
				return p.withSource(vs)
			}
		}
		n.Expr = p.rewrite(n.Expr, safe)
		if n.Param != nil {
			n.Param = p.rewrite(n.Param, false)
		}
		p.candidates(n)
	case *parser.BinaryExpr:
		n.LHS = p.rewrite(n.LHS, safe)
		n.RHS = p.rewrite(n.RHS, safe)
	case *parser.ParenExpr:
		n.Expr = p.rewrite(n.Expr, safe)
	case *parser.UnaryExpr:
		n.Expr = p.rewrite(n.Expr, safe)
	case *parser.SubqueryExpr:
		n.Expr = p.rewrite(n.Expr, false)
	case *parser.VectorSelector:
		// An instant selector (one inside a matrix selector is never
		// visited): its value at each step, looked back for.
		if safe && plainSelector(n) {
			return p.withSource(p.marked(n, fastSpec{pos: n.PosRange}))
		}
	case *parser.MatrixSelector, *parser.NumberLiteral, *parser.StringLiteral, *parser.StepInvariantExpr:
	}
	return e
}

// plainSelector reports whether vs has no offset, @, anchored or smoothed
// modifier and no marker-like matcher: the fast path answers it at the
// query's own steps.
func plainSelector(vs *parser.VectorSelector) bool {
	if vs.Offset != 0 || vs.OriginalOffset != 0 || vs.Timestamp != nil || vs.StartOrEnd != 0 || vs.Anchored || vs.Smoothed {
		return false
	}
	for _, m := range vs.LabelMatchers {
		if strings.HasPrefix(m.Name, "__tessera_fast_") {
			return false
		}
	}
	return true
}

// marked is vs with a marker matcher standing for spec (its plan, see
// plans.go).
func (p fastParser) marked(vs *parser.VectorSelector, spec fastSpec) *parser.VectorSelector {
	matchers := append(vs.LabelMatchers[:len(vs.LabelMatchers):len(vs.LabelMatchers)],
		p.planMatcher(&plan{sel: &spec}))
	return &parser.VectorSelector{LabelMatchers: matchers, PosRange: spec.pos}
}

// callRange is the range selector of call's one argument, and its
// vector selector, when that is a plain selector over a positive range
// (the only shape the fast path and rollups rewrite), else nil, nil.
func callRange(call *parser.Call) (*parser.MatrixSelector, *parser.VectorSelector) {
	if len(call.Args) != 1 {
		return nil, nil
	}
	ms, ok := call.Args[0].(*parser.MatrixSelector)
	if !ok {
		return nil, nil
	}
	vs, ok := ms.VectorSelector.(*parser.VectorSelector)
	if !ok || !plainSelector(vs) || ms.Range <= 0 {
		return nil, nil
	}
	return ms, vs
}

// replace returns the marked vector selector standing for call, or nil
// when call is not one the fast path computes.
func (p fastParser) replace(call *parser.Call) *parser.VectorSelector {
	if _, ok := fastFuncs[call.Func.Name]; !ok || len(call.Args) != 1 {
		return nil
	}
	ms, vs := callRange(call)
	if vs == nil {
		return nil
	}
	fn, ok := query.FuncByName(call.Func.Name)
	if !ok {
		return nil
	}
	out := p.marked(vs, fastSpec{Pushdown: query.Pushdown{Func: fn, Range: ms.Range}, pos: call.Args[0].PositionRange()})
	out.PosRange = call.PosRange
	return out
}

// fastAggs are the aggregations the fast path computes over the series
// of a marked selector, in the engine's order and with its operations
// (fastSet.aggregate): sum and avg (Kahan, series in the engine's order
// at each step; avg's switch to an incremental mean on overflow), count,
// group, and min and max (the engine's comparison, a NaN replaced by any
// value). Both produce one series per group, a few where the
// input has thousands; the engine would otherwise take every input
// series' step values on its one goroutine only to add them.
var fastAggs = map[parser.ItemType]query.Agg{parser.SUM: query.AggSum, parser.COUNT: query.AggCount, parser.AVG: query.AggAvg,
	parser.GROUP: query.AggGroup, parser.MIN: query.AggMin, parser.MAX: query.AggMax}

// replaceAgg returns the marked vector selector standing for agg, a sum,
// count or avg by (...) (no without: its groups' hash keeps __type__ and
// __unit__, which its labels drop, so two groups may share a label set)
// of a call replace takes or of a plain instant selector; nil otherwise.
func (p fastParser) replaceAgg(agg *parser.AggregateExpr) *parser.VectorSelector {
	name, ok := fastAggs[agg.Op]
	valueLabel := ""
	if agg.Op == parser.COUNT_VALUES {
		// count_values("l", ...): the label a literal the engine accepts
		// (it refuses others when it evaluates the query: let it).
		l, isLit := unparen(agg.Param).(*parser.StringLiteral)
		if !isLit || !model.UTF8Validation.IsValidLabelName(l.Val) {
			return nil
		}
		name, ok, valueLabel = query.AggCountValues, true, l.Val
	} else if agg.Param != nil {
		return nil
	}
	if !ok || agg.Without {
		return nil
	}
	inner := agg.Expr
	for {
		pe, ok := inner.(*parser.ParenExpr)
		if !ok {
			break
		}
		inner = pe.Expr
	}
	var vs *parser.VectorSelector
	switch n := inner.(type) {
	case *parser.Call:
		vs = p.replace(n)
	case *parser.VectorSelector:
		if plainSelector(n) {
			vs = p.marked(n, fastSpec{pos: n.PosRange})
		}
	}
	if vs == nil {
		return nil
	}
	// The marker is the last matcher (marked): its plan gains the
	// aggregation.
	spec := planOf(vs.LabelMatchers[len(vs.LabelMatchers)-1]).sel
	spec.Agg, spec.ValueLabel = name, valueLabel
	// The engine sorts the grouping labels in place before using them.
	spec.Grouping = slices.Clone(agg.Grouping)
	slices.Sort(spec.Grouping)
	vs.PosRange = agg.PosRange
	return vs
}

// withSource keeps in vs's plan the text of the subexpression vs stands
// for, at its place in the query (fastSpec.src).
func (p fastParser) withSource(vs *parser.VectorSelector) *parser.VectorSelector {
	pr := vs.PosRange
	if int(pr.Start) >= 0 && pr.Start <= pr.End && int(pr.End) <= len(p.input) {
		planOf(vs.LabelMatchers[len(vs.LabelMatchers)-1]).sel.src = strings.Repeat(" ", int(pr.Start)) + p.input[pr.Start:pr.End]
	}
	return vs
}

// maxCandidates is the largest k of a topk or bottomk whose candidates
// a replica is asked for (query.Pushdown.K).
const maxCandidates = 10_000

// candidates marks the argument of topk(k, ...) or bottomk(k, ...) by
// (...), k a whole number literal and the argument a selector the
// rewrite marked without an aggregation, as needing only the candidates
// of each group (query.Pushdown.K): a replica computing it answers only
// the values of the series fewer than k others beat at each step, over
// which the engine's topk is the same (a series k others beat is never
// kept, and leaving it out changes no other's fate). On one node the
// evaluator computes every series as before.
func (p fastParser) candidates(agg *parser.AggregateExpr) {
	if (agg.Op != parser.TOPK && agg.Op != parser.BOTTOMK) || agg.Without {
		return
	}
	num, ok := unparen(agg.Param).(*parser.NumberLiteral)
	if !ok || num.Val < 1 || num.Val > maxCandidates || num.Val != math.Trunc(num.Val) {
		return
	}
	vs, ok := unparen(agg.Expr).(*parser.VectorSelector)
	if !ok || len(vs.LabelMatchers) == 0 {
		return
	}
	pl := planOf(vs.LabelMatchers[len(vs.LabelMatchers)-1])
	if pl == nil || pl.sel == nil || pl.sel.Agg != query.AggNone || pl.sel.K != 0 {
		return
	}
	pl.sel.K, pl.sel.Bottom = int(num.Val), agg.Op == parser.BOTTOMK
	pl.sel.Grouping = slices.Clone(agg.Grouping)
	slices.Sort(pl.sel.Grouping)
}

// fastSpec is what a rewritten selector stands for: the typed pushdown
// (function, range, aggregation and its sorted grouping) and the position
// of its argument in the query (for the annotations the engine would
// have attached there).
type fastSpec struct {
	query.Pushdown
	pos posrange.PositionRange
	// src is the text of the subexpression the selector stands for,
	// preceded by as many spaces as it stood from the query's start, so
	// that the engine parsing it places its annotations where the
	// query's own parse would have: a selection holding native
	// histograms is evaluated by the engine from it (engineSet), over
	// the series already read. Empty: such a selection is declined.
	src string
}
