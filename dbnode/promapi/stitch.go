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
// names no namespace, reaches back past what the raw namespace still
// holds, and uses only functions a rollup answers exactly, is answered
// from the coarsest rollup whose resolution divides the step for the
// steps raw can no longer answer, and from raw for the others. The
// boundary is a step: every step before it from the rollup, every step
// from it on from raw, so no step is counted twice or left out.

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
	maxRange, ok := exactOnRollup(expr)
	if !ok {
		return stitchPlan{}, false
	}
	lookback := a.opts.LookbackDelta
	if o, _ := queryOpts(r); o != nil && o.LookbackDelta() > 0 {
		lookback = o.LookbackDelta()
	}
	// Raw expires whole blocks: everything from the block after the one
	// holding now-retention is surely still there.
	now := a.opts.Now().UnixMilli()
	bs := a.opts.BlockSize
	if bs <= 0 {
		return stitchPlan{}, false
	}
	rawFrom := xtime.BlockStart(now-a.opts.RawRetention.Milliseconds(), bs) + bs
	need := rawFrom + maxRange.Milliseconds() + lookback.Milliseconds()
	s, stp := start.UnixMilli(), step.Milliseconds()
	if s >= need {
		return stitchPlan{}, false // raw holds all of it
	}
	var best stitchPlan
	for name, ru := range a.opts.Rollups {
		res := ru.Resolution.Milliseconds()
		if ru.Raw != a.opts.Namespace || res <= 0 || (stp > 0 && stp%res != 0) || s%res != 0 || maxRange.Milliseconds()%res != 0 {
			continue
		}
		if ru.Resolution > best.res || (ru.Resolution == best.res && name < best.rollup) {
			best = stitchPlan{rollup: name, res: ru.Resolution}
		}
	}
	if best.rollup == "" {
		return stitchPlan{}, false
	}
	if stp == 0 { // an instant query: all from the rollup
		best.boundary = time.UnixMilli(s + 1)
		return best, true
	}
	k := (need - s + stp - 1) / stp
	best.boundary = time.UnixMilli(s + k*stp)
	return best, true
}

// exactOnRollup reports whether every range selector of expr is the
// argument of a function a rollup answers exactly, and no selector has an
// offset or @ (a subquery: no), and returns the longest range.
func exactOnRollup(expr parser.Expr) (time.Duration, bool) {
	var maxRange time.Duration
	ok := true
	var walk func(e parser.Node, parentFn string)
	walk = func(e parser.Node, parentFn string) {
		switch n := e.(type) {
		case *parser.SubqueryExpr:
			ok = false
			return
		case *parser.MatrixSelector:
			if _, exact := rollupFuncs[parentFn]; !exact {
				ok = false
			}
			maxRange = max(maxRange, n.Range)
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
	return maxRange, ok
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
	if aerr := run(a.rollup, rollupQueryable{r: rr, ns: pl.rollup, res: pl.res.Milliseconds(), marker: a.rollupMarker, fr: fr}, start, rollupEnd); aerr != nil {
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
