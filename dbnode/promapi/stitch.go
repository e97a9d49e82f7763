package promapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/util/annotations"
	"github.com/tessera-tsdb/tessera/internal/xtime"
)

// Transparent selection (issue 26, docs/rollups.md): a range query that
// names no namespace and reaches back past what the raw namespace still
// holds is answered from the coarsest rollup whose resolution divides
// the step for the steps raw can no longer answer, and from raw for the
// others. The boundary is a step: every step before it from the rollup,
// every step from it on from raw, so no step is counted twice or left
// out. Before the boundary the calls a rollup answers exactly come from
// its windows; every other selector (a function the rollup cannot
// answer exactly, such as quantile_over_time or changes) reads raw
// samples from rawFrom on, where raw surely still holds them, and each
// window's first and last samples before it, and the response says so
// in its warnings. A query the stitch cannot place (a subquery, an
// offset or @) stays on raw and, when it reads before rawFrom, says that
// it did not read rollups there.

// Rollup describes a rollup namespace to the query API.
type Rollup struct {
	Resolution time.Duration
	// Raw is the raw namespace at the root of its chain.
	Raw string
}

// stitchPlan is a range query split between a rollup and raw.
type stitchPlan struct {
	rollup   string
	res      time.Duration
	boundary time.Time // first step answered from raw
	// rawFrom (Unix ms) is where raw surely still holds data: selectors
	// the rollup cannot answer exactly read raw from it on.
	rawFrom int64
}

// planStitch decides whether and where to split a range query (step 0:
// an instant query at start, answered from the rollup when raw may no
// longer hold what it reads).
func (a *API) planStitch(r *http.Request, qs string, start, end time.Time, step time.Duration) (stitchPlan, bool) {
	if r.FormValue("namespace") != "" || r.FormValue("stats") != "" || len(a.opts.Rollups) == 0 || a.opts.RawRetention <= 0 {
		return stitchPlan{}, false
	}
	expr, err := a.parser.ParseExpr(qs)
	if err != nil {
		return stitchPlan{}, false
	}
	sel, ok := stitchSelectors(expr)
	if !ok {
		return stitchPlan{}, false
	}
	rawFrom, ok := a.rawFrom()
	if !ok {
		return stitchPlan{}, false
	}
	lookback := a.lookback(r)
	need := rawFrom + sel.maxRange.Milliseconds() + lookback.Milliseconds()
	s, stp := start.UnixMilli(), step.Milliseconds()
	if s >= need {
		return stitchPlan{}, false // raw holds all of it
	}
	var best stitchPlan
	for name, ru := range a.opts.Rollups {
		res := ru.Resolution.Milliseconds()
		if ru.Raw != a.opts.Namespace || res <= 0 || (stp > 0 && stp%res != 0) || s%res != 0 || !sel.whole(res) {
			continue
		}
		if ru.Resolution > best.res || (ru.Resolution == best.res && name < best.rollup) {
			best = stitchPlan{rollup: name, res: ru.Resolution}
		}
	}
	if best.rollup == "" {
		return stitchPlan{}, false
	}
	best.rawFrom = rawFrom
	if stp == 0 { // an instant query: all from the rollup
		best.boundary = time.UnixMilli(s + 1)
		return best, true
	}
	k := (need - s + stp - 1) / stp
	best.boundary = time.UnixMilli(s + k*stp)
	return best, true
}

// rawFrom is where raw surely still holds data (Unix ms): raw expires
// whole blocks, so everything from the block after the one holding
// now-retention is there. False when the API knows no retention or
// block size, or has no rollups to stitch with.
func (a *API) rawFrom() (int64, bool) {
	bs := a.opts.BlockSize
	if len(a.opts.Rollups) == 0 || a.opts.RawRetention <= 0 || bs <= 0 {
		return 0, false
	}
	return xtime.BlockStart(a.opts.Now().UnixMilli()-a.opts.RawRetention.Milliseconds(), bs) + bs, true
}

func (a *API) lookback(r *http.Request) time.Duration {
	if o, _ := queryOpts(r); o != nil && o.LookbackDelta() > 0 {
		return o.LookbackDelta()
	}
	return a.opts.LookbackDelta
}

// stitchSel is what the stitch needs of a query's selectors.
type stitchSel struct {
	maxRange time.Duration   // the longest range of any range selector
	exact    []time.Duration // the ranges of the calls a rollup answers exactly
}

// whole reports whether every exactly answered range is whole windows
// of res ms (the others are approximations wherever they read a rollup).
func (s stitchSel) whole(res int64) bool {
	for _, r := range s.exact {
		if r.Milliseconds()%res != 0 {
			return false
		}
	}
	return true
}

// stitchSelectors walks expr's selectors: false when one cannot be
// placed on a boundary (a subquery, an offset, @).
func stitchSelectors(expr parser.Expr) (stitchSel, bool) {
	var sel stitchSel
	ok := true
	var walk func(e parser.Node, parentFn string)
	walk = func(e parser.Node, parentFn string) {
		switch n := e.(type) {
		case *parser.SubqueryExpr:
			ok = false
			return
		case *parser.MatrixSelector:
			if _, exact := rollupFuncs[parentFn]; exact {
				sel.exact = append(sel.exact, n.Range)
			}
			sel.maxRange = max(sel.maxRange, n.Range)
		case *parser.VectorSelector:
			if !plainSelector(n) {
				ok = false
			}
		case *parser.Call:
			for _, c := range n.Args {
				walk(c, n.Func.Name)
			}
			return
		}
		for _, c := range parser.Children(e) {
			walk(c, "")
		}
	}
	walk(expr, "")
	return sel, ok
}

// unstitchedWarning is the warning of a query that reads before rawFrom
// but stays on raw because the stitch cannot place it: where raw has
// expired its answer has no data, and the user should know why.
func (a *API) unstitchedWarning(r *http.Request, qs string, start time.Time) error {
	if r.FormValue("namespace") != "" {
		return nil
	}
	rawFrom, ok := a.rawFrom()
	if !ok || start.UnixMilli() >= rawFrom+a.lookback(r).Milliseconds() {
		return nil
	}
	expr, err := a.parser.ParseExpr(qs)
	if err != nil {
		return nil
	}
	sel, _ := stitchSelectors(expr)
	if start.UnixMilli() >= rawFrom+sel.maxRange.Milliseconds()+a.lookback(r).Milliseconds() {
		return nil // raw holds all it reads
	}
	return fmt.Errorf("the query reads before %s, where the raw namespace %q may have expired, and was not answered from rollups there (a subquery, offset or @, a stats request, or a step or range no rollup's resolution divides): pin a rollup with ?namespace= to read it",
		time.UnixMilli(rawFrom).UTC().Format(time.RFC3339), a.opts.Namespace)
}

// execStitched runs the two halves of a stitched range query and joins
// their matrices series by series.
func (a *API) execStitched(ctx context.Context, r *http.Request, qs string, limit int, pl stitchPlan, start, end time.Time, step time.Duration, opts promql.QueryOpts) result {
	if aerr := a.checkExpression(qs); aerr != nil {
		return result{err: aerr}
	}
	rr := a.opts.RollupReader
	if rr == nil {
		rr, _ = a.b.(RollupReader)
	}
	if rr == nil {
		return result{err: &apiError{errorBadData, errors.New("rollups are configured but this node's backend cannot read them")}}
	}
	a.stitched.Add(1)
	var (
		series   = map[uint64]*promql.Series{}
		warnings annotations.Annotations
	)
	run := func(e *promql.Engine, q storage.Queryable, from, to time.Time) *apiError {
		qry, err := e.NewRangeQuery(ctx, q, opts, qs, from, to, step)
		if err != nil {
			return constructionError(err)
		}
		defer qry.Close()
		res := qry.Exec(ctx)
		if res.Err != nil {
			return queryError(res.Err)
		}
		warnings.Merge(res.Warnings)
		m, ok := res.Value.(promql.Matrix)
		if !ok {
			return &apiError{errorInternal, fmt.Errorf("stitched query: a range query returned %s", res.Value.Type())}
		}
		for _, s := range m {
			h := s.Metric.Hash()
			acc := series[h]
			if acc == nil {
				acc = &promql.Series{Metric: s.Metric.Copy()}
				series[h] = acc
			}
			acc.Floats = append(acc.Floats, s.Floats...)
			for _, p := range s.Histograms {
				acc.Histograms = append(acc.Histograms, promql.HPoint{T: p.T, H: p.H.Copy()})
			}
		}
		return nil
	}
	rollupEnd := pl.boundary.Add(-step)
	if rollupEnd.After(end) {
		rollupEnd = end
	}
	fr := fastRange{start: start.UnixMilli(), end: rollupEnd.UnixMilli(), stp: step.Milliseconds()}
	rq := rollupQueryable{r: rr, ns: pl.rollup, res: pl.res.Milliseconds(), marker: a.rollupMarker, fr: fr, raw: a.queryable(r), rawFrom: pl.rawFrom}
	if aerr := run(a.rollup, rq, start, rollupEnd); aerr != nil {
		return result{err: aerr}
	}
	if !pl.boundary.After(end) {
		if aerr := run(a.engine, a.queryable(r), pl.boundary, end); aerr != nil {
			return result{err: aerr}
		}
	}
	m := make(promql.Matrix, 0, len(series))
	for _, s := range series {
		m = append(m, *s)
	}
	sort.Slice(m, func(i, j int) bool { return labels.Compare(m[i].Metric, m[j].Metric) < 0 })
	if limit > 0 && len(m) > limit {
		m = m[:limit]
		warnings = warnings.Add(errors.New("results truncated due to limit"))
	}
	buf := append(make([]byte, 0, 1024+len(successPrefix)+valueSize(m)), successPrefix...)
	buf = append(buf, `{"resultType":"matrix","result":`...)
	buf, err := appendValue(buf, m)
	if err != nil {
		return result{err: &apiError{errorInternal, fmt.Errorf("encode result: %w", err)}}
	}
	buf = append(buf, '}')
	return result{body: buf, warnings: warnings, query: qs}
}
