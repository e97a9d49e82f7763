package promapi

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/util/annotations"

	"github.com/tessera-tsdb/tessera/dbnode/rollup"
	tstorage "github.com/tessera-tsdb/tessera/dbnode/storage"
	"github.com/tessera-tsdb/tessera/ident"
)

// Queries of a rollup namespace (?namespace=<rollup>, issue 26,
// docs/rollups.md). A rollup holds per series and window count, sum,
// min, max, first, last and resets, not samples, so the engine cannot
// read it as it reads raw data. rollupParser rewrites, in the parsed
// query, each call a rollup answers exactly (rollupFuncs over a plain
// selector) into a vector selector carrying a marker matcher, as the
// fast path does (rewrite.go); the rollup querier computes the call's
// value at every step from the merged windows of its range
// (rollup.Range, rollup.Rate) and hands the engine one series of step
// values per input series. Everything else (aggregations, binary
// operators, histogram_quantile) is the engine's own over those values.
//
// Every other selector reads the windows' first and last samples as if
// they were raw: a plain selector evaluated at a window end sees exactly
// what it would over raw data (the window's last sample); a range
// function the rollup cannot answer (quantile_over_time, resets,
// irate, ...) gets an approximation, and the response says so in its
// warnings. So does a query whose steps or ranges are not whole windows.

// RollupReader reads the windows of a rollup namespace's series
// (storage.Database.QueryRollup): the backend implements it when it can.
type RollupReader interface {
	QueryRollup(ctx context.Context, namespace string, matchers []*labels.Matcher, start, end int64) ([]tstorage.RollupSeries, error)
}

// rollupFunc is how a rollup answers a function from a range's merged
// window.
type rollupFunc struct {
	rate              bool // rate, increase, delta: rollup.Rate with these flags
	counter, perSec   bool
	keepName          bool // last_over_time keeps the metric name
	float             func(w rollup.Window) float64
	histogramSupports bool // rate, increase and sum_over_time of histograms
}

var rollupFuncs = map[string]rollupFunc{
	"rate":            {rate: true, counter: true, perSec: true, histogramSupports: true},
	"increase":        {rate: true, counter: true, histogramSupports: true},
	"delta":           {rate: true},
	"sum_over_time":   {float: func(w rollup.Window) float64 { return w.Sum }, histogramSupports: true},
	"count_over_time": {float: func(w rollup.Window) float64 { return float64(w.Count) }},
	"avg_over_time":   {float: func(w rollup.Window) float64 { return w.Sum / float64(w.Count) }},
	"min_over_time":   {float: func(w rollup.Window) float64 { return w.Min }},
	"max_over_time":   {float: func(w rollup.Window) float64 { return w.Max }},
	"last_over_time":  {float: func(w rollup.Window) float64 { return w.Last.V }, keepName: true},
}

// rollupPlan is what a rollup marker matcher stands for.
type rollupPlan struct {
	fn       string
	rng      int64 // ms
	matchers []*labels.Matcher
}

var rollupPlans markedPlans[rollupPlan]

// rollupParser is the engine's parser with the rollup rewrite applied.
type rollupParser struct {
	parser.Parser
	marker string
}

func newRollupParser() rollupParser {
	return rollupParser{Parser: parser.NewParser(parser.Options{}), marker: newMarker("__tessera_rollup_")}
}

func (p rollupParser) ParseExpr(input string) (parser.Expr, error) {
	expr, err := p.Parser.ParseExpr(input)
	if err != nil {
		return expr, err
	}
	return p.rewrite(expr), nil
}

// rewrite replaces the calls a rollup answers. Calls under a subquery
// keep their own steps and are left to the approximation.
func (p rollupParser) rewrite(e parser.Expr) parser.Expr {
	switch n := e.(type) {
	case *parser.Call:
		if vs := p.replace(n); vs != nil {
			return vs
		}
		for i, a := range n.Args {
			n.Args[i] = p.rewrite(a)
		}
	case *parser.AggregateExpr:
		n.Expr = p.rewrite(n.Expr)
		if n.Param != nil {
			n.Param = p.rewrite(n.Param)
		}
	case *parser.BinaryExpr:
		n.LHS = p.rewrite(n.LHS)
		n.RHS = p.rewrite(n.RHS)
	case *parser.ParenExpr:
		n.Expr = p.rewrite(n.Expr)
	case *parser.UnaryExpr:
		n.Expr = p.rewrite(n.Expr)
	case *parser.StepInvariantExpr:
		n.Expr = p.rewrite(n.Expr)
	}
	return e
}

func (p rollupParser) replace(call *parser.Call) *parser.VectorSelector {
	if _, ok := rollupFuncs[call.Func.Name]; !ok || len(call.Args) != 1 {
		return nil
	}
	ms, ok := call.Args[0].(*parser.MatrixSelector)
	if !ok {
		return nil
	}
	vs, ok := ms.VectorSelector.(*parser.VectorSelector)
	if !ok || !plainSelector(vs) || ms.Range <= 0 {
		return nil
	}
	for _, m := range vs.LabelMatchers {
		if strings.HasPrefix(m.Name, "__tessera_") {
			return nil
		}
	}
	m := rollupPlans.mark(p.marker, &rollupPlan{fn: call.Func.Name, rng: ms.Range.Milliseconds(), matchers: vs.LabelMatchers})
	matchers := append(vs.LabelMatchers[:len(vs.LabelMatchers):len(vs.LabelMatchers)], m)
	return &parser.VectorSelector{LabelMatchers: matchers, PosRange: call.PosRange}
}

func rollupPlanOf(m *labels.Matcher) *rollupPlan { return rollupPlans.of(m) }

// rollupQueryable serves one query of a rollup namespace.
type rollupQueryable struct {
	r      RollupReader
	ns     string
	res    int64 // ms
	marker string
	fr     fastRange // start, end, stp of the query's steps
}

func (q rollupQueryable) Querier(mint, maxt int64) (storage.Querier, error) {
	return &rollupQuerier{q: q, mint: mint, maxt: maxt}, nil
}

type rollupQuerier struct {
	q          rollupQueryable
	mint, maxt int64
}

func (q *rollupQuerier) LabelValues(context.Context, string, *storage.LabelHints, ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	return nil, nil, nil
}

func (q *rollupQuerier) LabelNames(context.Context, *storage.LabelHints, ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	return nil, nil, nil
}

func (q *rollupQuerier) Close() error { return nil }

// aligned reports whether the query's steps fall on window ends.
func (q *rollupQuerier) aligned() bool {
	res := q.q.res
	return q.q.fr.start%res == 0 && (q.q.fr.stp == 0 || q.q.fr.stp%res == 0)
}

func (q *rollupQuerier) Select(ctx context.Context, sorted bool, hints *storage.SelectHints, matchers ...*labels.Matcher) storage.SeriesSet {
	if n := len(matchers); n > 0 && matchers[n-1].Name == q.q.marker {
		pl := rollupPlanOf(matchers[n-1])
		if pl == nil {
			return storage.ErrSeriesSet(fmt.Errorf("rollup: selector %v has a marker without a plan", matchers))
		}
		return q.selectPlan(ctx, sorted, pl)
	}
	start, end := q.mint, q.maxt
	if hints != nil {
		start, end = hints.Start, hints.End
	}
	rs, err := q.q.r.QueryRollup(ctx, q.q.ns, matchers, start, end+q.q.res)
	if err != nil {
		return storage.ErrSeriesSet(err)
	}
	var warns annotations.Annotations
	switch {
	case hints != nil && (hints.Func != "" || hints.Range > 0):
		fn := hints.Func
		if fn == "" {
			fn = "a range selector"
		}
		warns.Add(fmt.Errorf("PromQL function %s over rollup namespace %q is not exact: a rollup keeps per %s window only count, sum, min, max, first, last and resets (docs/rollups.md); answered from each window's first and last samples",
			fn, q.q.ns, time.Duration(q.q.res)*time.Millisecond))
	case !q.aligned():
		warns.Add(fmt.Errorf("rollup namespace %q: steps not on %s window ends read a window's last sample before its end", q.q.ns, time.Duration(q.q.res)*time.Millisecond))
	}
	out := make([]storage.Series, 0, len(rs))
	for _, s := range rs {
		lset, err := ident.Labels(s.ID)
		if err != nil {
			return storage.ErrSeriesSet(err)
		}
		out = append(out, &listSeries{lset: lset, pts: pseudoRaw(s, start, end)})
	}
	return newListSet(out, sorted, warns)
}

// pseudoRaw is the windows' first and last samples in [start, end], with
// a stale marker at the end of a window whose series ended in it.
func pseudoRaw(s tstorage.RollupSeries, start, end int64) []point {
	var pts []point
	add := func(p point) {
		if p.t >= start && p.t <= end && (len(pts) == 0 || pts[len(pts)-1].t < p.t) {
			pts = append(pts, p)
		}
	}
	i, j := 0, 0
	for i < len(s.Windows) || j < len(s.HWindows) {
		if j >= len(s.HWindows) || (i < len(s.Windows) && s.Windows[i].End <= s.HWindows[j].End) {
			w := s.Windows[i]
			i++
			if w.Count > 0 {
				add(point{t: w.First.T, f: w.First.V})
				add(point{t: w.Last.T, f: w.Last.V})
			}
			if w.Stale {
				add(point{t: w.End, f: math.Float64frombits(value.StaleNaN)})
			}
			continue
		}
		w := s.HWindows[j]
		j++
		if w.Count > 0 {
			add(point{t: w.First.T, h: w.First.H})
			add(point{t: w.Last.T, h: w.Last.H})
		}
		if w.Stale {
			add(point{t: w.End, f: math.Float64frombits(value.StaleNaN)})
		}
	}
	return pts
}

// selectPlan computes a rewritten call at every step of the query.
func (q *rollupQuerier) selectPlan(ctx context.Context, sorted bool, pl *rollupPlan) storage.SeriesSet {
	fr := q.q.fr
	stp := fr.stp
	if stp == 0 {
		stp = 1
	}
	rs, err := q.q.r.QueryRollup(ctx, q.q.ns, pl.matchers, fr.start-pl.rng, fr.end)
	if err != nil {
		return storage.ErrSeriesSet(err)
	}
	var warns annotations.Annotations
	if !q.aligned() || pl.rng%q.q.res != 0 {
		warns.Add(fmt.Errorf("%s over rollup namespace %q is not exact: its range or steps are not whole %s windows, so it reads the whole windows ending in each range",
			pl.fn, q.q.ns, time.Duration(q.q.res)*time.Millisecond))
	}
	f := rollupFuncs[pl.fn]
	out := make([]storage.Series, 0, len(rs))
	for _, s := range rs {
		lset, err := ident.Labels(s.ID)
		if err != nil {
			return storage.ErrSeriesSet(err)
		}
		if !f.keepName {
			lset = lset.DropMetricName()
		}
		if len(s.HWindows) > 0 && !f.histogramSupports {
			warns.Add(fmt.Errorf("%s of native histograms over rollup namespace %q has no value: a rollup keeps only the histograms' sum, first, last and resets", pl.fn, q.q.ns))
		}
		var pts []point
		any := false
		for t := fr.start; t <= fr.end; t += stp {
			p := point{t: t, f: math.Float64frombits(value.StaleNaN)}
			v, h, ok, err := evalRollup(f, s, t-pl.rng, t)
			if err != nil {
				return storage.ErrSeriesSet(fmt.Errorf("%s of series %q: %w", pl.fn, s.ID, err))
			}
			if ok {
				p.f, p.h, any = v, h, true
			}
			pts = append(pts, p)
		}
		if any {
			out = append(out, &listSeries{lset: lset, pts: pts})
		}
	}
	return newListSet(out, sorted, warns)
}

// evalRollup is a rollup function over the windows ending in (start, end].
func evalRollup(f rollupFunc, s tstorage.RollupSeries, start, end int64) (float64, *histogram.FloatHistogram, bool, error) {
	if w, ok, err := rollup.Range(inRange(s.Windows, start, end), start, end); err != nil {
		return 0, nil, false, err
	} else if ok && w.Count > 0 {
		if f.rate {
			v, ok := rollup.Rate(w, start, end, f.counter, f.perSec)
			return v, nil, ok, nil
		}
		return f.float(w), nil, true, nil
	}
	if !f.histogramSupports || len(s.HWindows) == 0 {
		return 0, nil, false, nil
	}
	w, ok, err := rollup.RangeHistograms(inRangeH(s.HWindows, start, end), start, end)
	if err != nil || !ok || w.Count == 0 {
		return 0, nil, false, err
	}
	if f.rate {
		h, ok, err := rollup.RateHistograms(w, start, end, f.perSec)
		return 0, h, ok, err
	}
	return 0, w.Sum.Copy(), true, nil
}

// inRange is the part of ws (in End order) ending in (start, end].
func inRange(ws []rollup.Window, start, end int64) []rollup.Window {
	lo := sort.Search(len(ws), func(i int) bool { return ws[i].End > start })
	hi := sort.Search(len(ws), func(i int) bool { return ws[i].End > end })
	return ws[lo:hi]
}

// inRangeH is inRange for histogram windows.
func inRangeH(ws []rollup.HWindow, start, end int64) []rollup.HWindow {
	lo := sort.Search(len(ws), func(i int) bool { return ws[i].End > start })
	hi := sort.Search(len(ws), func(i int) bool { return ws[i].End > end })
	return ws[lo:hi]
}

// point is one sample of a listSeries: a float, or a histogram when h is
// set.
type point struct {
	t int64
	f float64
	h *histogram.FloatHistogram
}

type listSeries struct {
	lset labels.Labels
	pts  []point
}

func (s *listSeries) Labels() labels.Labels { return s.lset }

func (s *listSeries) Iterator(chunkenc.Iterator) chunkenc.Iterator {
	return &listIterator{pts: s.pts, i: -1}
}

type listIterator struct {
	pts []point
	i   int
}

func (it *listIterator) typ() chunkenc.ValueType {
	if it.i >= len(it.pts) {
		return chunkenc.ValNone
	}
	if it.pts[it.i].h != nil {
		return chunkenc.ValFloatHistogram
	}
	return chunkenc.ValFloat
}

func (it *listIterator) Next() chunkenc.ValueType {
	if it.i < len(it.pts) {
		it.i++
	}
	return it.typ()
}

func (it *listIterator) Seek(t int64) chunkenc.ValueType {
	if it.i < 0 {
		it.i = 0
	}
	for it.i < len(it.pts) && it.pts[it.i].t < t {
		it.i++
	}
	return it.typ()
}

func (it *listIterator) At() (int64, float64) { return it.pts[it.i].t, it.pts[it.i].f }
func (it *listIterator) AtHistogram(*histogram.Histogram) (int64, *histogram.Histogram) {
	return it.pts[it.i].t, nil
}

func (it *listIterator) AtFloatHistogram(fh *histogram.FloatHistogram) (int64, *histogram.FloatHistogram) {
	p := it.pts[it.i]
	if fh == nil {
		return p.t, p.h.Copy()
	}
	p.h.CopyTo(fh)
	return p.t, fh
}
func (it *listIterator) AtT() int64  { return it.pts[it.i].t }
func (it *listIterator) AtST() int64 { return 0 }
func (it *listIterator) Err() error  { return nil }

type listSet struct {
	ss    []storage.Series
	i     int
	warns annotations.Annotations
}

func newListSet(ss []storage.Series, sorted bool, warns annotations.Annotations) *listSet {
	if sorted {
		sort.Slice(ss, func(i, j int) bool { return labels.Compare(ss[i].Labels(), ss[j].Labels()) < 0 })
	}
	return &listSet{ss: ss, i: -1, warns: warns}
}

func (s *listSet) Next() bool {
	if s.i < len(s.ss) {
		s.i++
	}
	return s.i < len(s.ss)
}
func (s *listSet) At() storage.Series                { return s.ss[s.i] }
func (s *listSet) Err() error                        { return nil }
func (s *listSet) Warnings() annotations.Annotations { return s.warns }

// execRollup runs a query of rollup namespace ns (resolution res) with
// the rollup engine.
func (a *API) execRollup(ctx context.Context, r *http.Request, qs string, limit int, fr fastRange, ns string, res time.Duration,
	newQuery func(*promql.Engine, storage.Queryable) (promql.Query, error)) result {
	rr := a.opts.RollupReader
	if rr == nil {
		rr, _ = a.b.(RollupReader)
	}
	if rr == nil {
		return result{err: &apiError{errorBadData, fmt.Errorf("namespace %q is a rollup, which this node's backend cannot read yet (docs/rollups.md)", ns)}}
	}
	qry, err := newQuery(a.rollup, rollupQueryable{r: rr, ns: ns, res: res.Milliseconds(), marker: a.rollupMarker, fr: fr})
	if err != nil {
		return result{err: constructionError(err)}
	}
	return a.run(ctx, r, qry, qs, limit)
}
