package promapi

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/util/annotations"
	"github.com/prometheus/prometheus/util/kahansum"

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

// RollupScanner is a RollupReader that hands the series over one at a
// time (storage.Database.ScanRollup): fn runs on several goroutines at
// once, with the series' index in QueryRollup's order, and the windows
// are valid only during the call. The rollup querier computes a series'
// step values inside fn, so decoding and evaluation share the cores and
// no query holds every window of every series.
type RollupScanner interface {
	ScanRollup(ctx context.Context, namespace string, matchers []*labels.Matcher, start, end int64, fn func(i int, rs tstorage.RollupSeries) error) error
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
	// group, when set, is the sum around the call (sum by/without): the
	// querier hands the engine one partial sum per group instead of a
	// series per input series (the engine's sum of one series per group
	// is that series).
	group *rollupGroup
}

// rollupGroup is the grouping of a sum a rollup plan computes partially.
type rollupGroup struct {
	labels  []string
	without bool
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
		if vs := p.replace(n, nil); vs != nil {
			return vs
		}
		for i, a := range n.Args {
			n.Args[i] = p.rewrite(a)
		}
	case *parser.AggregateExpr:
		if call, ok := n.Expr.(*parser.Call); ok && n.Op == parser.SUM && n.Param == nil {
			if vs := p.replace(call, &rollupGroup{labels: n.Grouping, without: n.Without}); vs != nil {
				n.Expr = vs
				return e
			}
		}
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

// replace is the marked selector standing for call, nil when a rollup
// does not answer it. With group set it stands for the sum around call
// too, which needs a __name__="..." matcher: series of one name cannot
// become equal when the call drops it (the engine refuses that with an
// error a partial sum would hide).
func (p rollupParser) replace(call *parser.Call, group *rollupGroup) *parser.VectorSelector {
	if _, ok := rollupFuncs[call.Func.Name]; !ok || len(call.Args) != 1 {
		return nil
	}
	ms, vs := callRange(call)
	if vs == nil {
		return nil
	}
	named := false
	for _, m := range vs.LabelMatchers {
		if strings.HasPrefix(m.Name, "__tessera_") {
			return nil
		}
		named = named || (m.Name == labels.MetricName && m.Type == labels.MatchEqual)
	}
	if group != nil && !named {
		return nil
	}
	m := rollupPlans.mark(p.marker, &rollupPlan{fn: call.Func.Name, rng: ms.Range.Milliseconds(), matchers: vs.LabelMatchers, group: group})
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
	// raw, when set (a stitched query), is read from rawFrom (Unix ms) on
	// by the selectors the rollup does not answer exactly: raw samples
	// where raw surely holds them, windows' first and last before.
	raw     storage.Queryable
	rawFrom int64
}

func (q rollupQueryable) Querier(mint, maxt int64) (storage.Querier, error) {
	return &rollupQuerier{q: q, mint: mint, maxt: maxt}, nil
}

type rollupQuerier struct {
	q          rollupQueryable
	mint, maxt int64
	mu         sync.Mutex
	closers    []storage.Querier // raw queriers of a stitched query's selectors
}

func (q *rollupQuerier) LabelValues(context.Context, string, *storage.LabelHints, ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	return nil, nil, nil
}

func (q *rollupQuerier) LabelNames(context.Context, *storage.LabelHints, ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	return nil, nil, nil
}

func (q *rollupQuerier) Close() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	var errs []error
	for _, c := range q.closers {
		errs = append(errs, c.Close())
	}
	q.closers = nil
	return errors.Join(errs...)
}

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
	if q.q.raw != nil && start >= q.q.rawFrom {
		return q.selectRaw(ctx, sorted, hints, start, end, matchers)
	}
	rollEnd := end
	if q.q.raw != nil {
		rollEnd = q.q.rawFrom - 1
	}
	rs, err := q.q.r.QueryRollup(ctx, q.q.ns, matchers, start, rollEnd+q.q.res)
	if err != nil {
		return storage.ErrSeriesSet(err)
	}
	var warns annotations.Annotations
	switch {
	// Only a range selector is approximated: an instant vector selector
	// under a function or an aggregation (abs(g), sum(g)) reads the last
	// sample at or before a step, which at a window end is the window's
	// last, as raw's.
	case hints != nil && hints.Range > 0:
		fn := hints.Func
		if fn == "" {
			fn = "a range selector"
		}
		where := ""
		if q.q.raw != nil {
			where = fmt.Sprintf(" before %s (past raw's retention; raw samples after it)", time.UnixMilli(q.q.rawFrom).UTC().Format(time.RFC3339))
		}
		warns.Add(fmt.Errorf("PromQL function %s over rollup namespace %q is not exact: a rollup keeps per %s window only count, sum, min, max, first, last and resets (docs/rollups.md); answered from each window's first and last samples%s",
			fn, q.q.ns, time.Duration(q.q.res)*time.Millisecond, where))
	case !q.aligned() || (hints != nil && hints.Step > 0 && hints.Step%q.q.res != 0):
		// A subquery's own steps are hints.Step apart.
		warns.Add(fmt.Errorf("rollup namespace %q: steps not on %s window ends read a window's last sample before its end", q.q.ns, time.Duration(q.q.res)*time.Millisecond))
	}
	out := make([]storage.Series, 0, len(rs))
	byLabels := make(map[string]*listSeries, len(rs))
	for _, s := range rs {
		lset, err := ident.Labels(s.ID)
		if err != nil {
			return storage.ErrSeriesSet(err)
		}
		ls := &listSeries{lset: lset, pts: pseudoRaw(s, start, rollEnd)}
		out = append(out, ls)
		byLabels[string(s.ID)] = ls
	}
	if q.q.raw != nil && end >= q.q.rawFrom {
		// The rest of the range from raw, appended to the same series.
		set := q.selectRaw(ctx, false, hints, q.q.rawFrom, end, matchers)
		for set.Next() {
			rsr := set.At()
			lset := rsr.Labels()
			key := string(ident.FromLabels(lset))
			ls := byLabels[key]
			if ls == nil {
				ls = &listSeries{lset: lset}
				out = append(out, ls)
				byLabels[key] = ls
			}
			var err error
			if ls.pts, err = appendPoints(ls.pts, rsr); err != nil {
				return storage.ErrSeriesSet(err)
			}
		}
		if err := set.Err(); err != nil {
			return storage.ErrSeriesSet(err)
		}
		warns.Merge(set.Warnings())
	}
	return newListSet(out, sorted, warns)
}

// selectRaw reads [start, end] of a stitched query's selector from raw.
func (q *rollupQuerier) selectRaw(ctx context.Context, sorted bool, hints *storage.SelectHints, start, end int64, matchers []*labels.Matcher) storage.SeriesSet {
	rq, err := q.q.raw.Querier(start, end)
	if err != nil {
		return storage.ErrSeriesSet(err)
	}
	q.mu.Lock()
	q.closers = append(q.closers, rq)
	q.mu.Unlock()
	h := &storage.SelectHints{Start: start, End: end}
	if hints != nil {
		hc := *hints
		hc.Start, hc.End = start, end
		h = &hc
	}
	return rq.Select(ctx, sorted, h, matchers...)
}

// appendPoints copies s's samples after pts (a stitched series' raw
// part after its rollup part, so in time order).
func appendPoints(pts []point, s storage.Series) ([]point, error) {
	it := s.Iterator(nil)
	for {
		switch it.Next() {
		case chunkenc.ValNone:
			return pts, it.Err()
		case chunkenc.ValFloat:
			t, v := it.At()
			pts = append(pts, point{t: t, f: v})
		case chunkenc.ValHistogram, chunkenc.ValFloatHistogram:
			t, h := it.AtFloatHistogram(nil)
			pts = append(pts, point{t: t, h: h})
		}
	}
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

// selectPlan computes a rewritten call at every step of the query, one
// series at a time on every core (as storage hands them over), and then
// the sum around it when the plan has one.
func (q *rollupQuerier) selectPlan(ctx context.Context, sorted bool, pl *rollupPlan) storage.SeriesSet {
	fr := q.q.fr
	stp := fr.stp
	if stp == 0 {
		stp = 1
	}
	steps := int((fr.end-fr.start)/stp) + 1
	var warns annotations.Annotations
	if !q.aligned() || pl.rng%q.q.res != 0 {
		warns.Add(fmt.Errorf("%s over rollup namespace %q is not exact: its range or steps are not whole %s windows, so it reads the whole windows ending in each range",
			pl.fn, q.q.ns, time.Duration(q.q.res)*time.Millisecond))
	}
	f := rollupFuncs[pl.fn]
	var (
		mu                   sync.Mutex
		got                  []rollupSteps
		histWarn, boundsWarn bool
	)
	each := func(i int, s tstorage.RollupSeries) error {
		lset, err := ident.Labels(s.ID)
		if err != nil {
			return err
		}
		if !f.keepName {
			lset = lset.DropMetricName()
		}
		r := rollupSteps{i: i, lset: lset, vals: make([]float64, steps)}
		has, err := evalSteps(f, s, fr.start, stp, pl.rng, &r)
		if err != nil {
			return fmt.Errorf("%s of series %q: %w", pl.fn, s.ID, err)
		}
		mu.Lock()
		defer mu.Unlock()
		histWarn = histWarn || (len(s.HWindows) > 0 && !f.histogramSupports)
		boundsWarn = boundsWarn || r.boundsChange
		if has {
			got = append(got, r)
		}
		return nil
	}
	if err := q.scan(ctx, pl.matchers, fr.start-pl.rng, fr.end, each); err != nil {
		return storage.ErrSeriesSet(err)
	}
	if histWarn {
		warns.Add(fmt.Errorf("%s of native histograms over rollup namespace %q has no value: a rollup keeps only the histograms' sum, first, last and resets", pl.fn, q.q.ns))
	}
	if boundsWarn {
		warns.Add(fmt.Errorf("%s of custom-bucket histograms over rollup namespace %q: their bounds change inside a range, so its count and sum are exact but its buckets may not be (Prometheus reconciles bounds sample by sample; docs/rollups.md)", pl.fn, q.q.ns))
	}
	sort.Slice(got, func(a, b int) bool { return got[a].i < got[b].i })
	if pl.group != nil {
		got = sumGroups(got, pl.group, steps)
	}
	out := make([]storage.Series, 0, len(got))
	for _, r := range got {
		out = append(out, &precomputed{lset: r.lset, vals: r.vals, hists: r.hists, t0: fr.start, stp: stp})
	}
	return newListSet(out, sorted, warns)
}

// scan hands each series of the rollup matching ms with windows ending
// in [start, end] to fn, on several goroutines: the reader's own scan
// when it has one, else its QueryRollup's answer split over GOMAXPROCS
// workers.
func (q *rollupQuerier) scan(ctx context.Context, ms []*labels.Matcher, start, end int64, fn func(i int, rs tstorage.RollupSeries) error) error {
	if sc, ok := q.q.r.(RollupScanner); ok {
		return sc.ScanRollup(ctx, q.q.ns, ms, start, end, fn)
	}
	rs, err := q.q.r.QueryRollup(ctx, q.q.ns, ms, start, end)
	if err != nil {
		return err
	}
	var (
		next atomic.Int64
		wg   sync.WaitGroup
	)
	errs := make([]error, min(runtime.GOMAXPROCS(0), len(rs)))
	for k := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < len(rs); i = int(next.Add(1) - 1) {
				if errs[k] = fn(i, rs[i]); errs[k] != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// rollupSteps is one output series of a plan: its step values (StaleNaN
// where it has none), with histograms where hists is set and not nil.
type rollupSteps struct {
	i            int // the order series came in
	lset         labels.Labels
	vals         []float64
	hists        []*histogram.FloatHistogram
	boundsChange bool // see evalRollup
}

// evalSteps fills r with f at each of len(r.vals) steps from start, stp
// apart, over the windows ending in (t-rng, t]; any reports a value at
// some step. The float windows of a step are found by two indexes that
// only move forward (steps and windows are both in time order).
func evalSteps(f rollupFunc, s tstorage.RollupSeries, start, stp, rng int64, r *rollupSteps) (has bool, err error) {
	ws := s.Windows
	lo, hi := 0, 0
	for k := range r.vals {
		t := start + int64(k)*stp
		for lo < len(ws) && ws[lo].End <= t-rng {
			lo++
		}
		if hi < lo {
			hi = lo
		}
		for hi < len(ws) && ws[hi].End <= t {
			hi++
		}
		v, h, ok, err := evalRollup(f, ws[lo:hi], s.HWindows, t-rng, t, &r.boundsChange)
		if err != nil {
			return false, err
		}
		switch {
		case !ok:
			r.vals[k] = math.Float64frombits(value.StaleNaN)
		case h != nil:
			if r.hists == nil {
				r.hists = make([]*histogram.FloatHistogram, len(r.vals))
			}
			r.hists[k], has = h, true
		default:
			r.vals[k], has = v, true
		}
	}
	return has, nil
}

// sumGroups is the engine's sum by (or without) the group's labels over
// in (in the engine's series order) with its arithmetic (kahansum.Inc
// over the values present at a step, the compensation added at the
// end), one series per group holding the partial sum: the engine's sum
// over that one series gives the same. A series with histograms is
// passed on alone for the engine to add.
func sumGroups(in []rollupSteps, g *rollupGroup, steps int) []rollupSteps {
	type acc struct {
		out       rollupSteps
		sum, comp []float64
		seen      []bool
	}
	var (
		order []*acc
		byKey = map[uint64]*acc{}
		buf   []byte
		out   []rollupSteps
	)
	for _, r := range in {
		if r.hists != nil {
			out = append(out, r)
			continue
		}
		var key uint64
		if g.without {
			key, buf = r.lset.HashWithoutLabels(buf, g.labels...)
		} else {
			key, buf = r.lset.HashForLabels(buf, g.labels...)
		}
		a := byKey[key]
		if a == nil {
			b := labels.NewBuilder(r.lset)
			if g.without {
				b.Del(g.labels...).Del(labels.MetricName)
			} else {
				b.Keep(g.labels...)
			}
			a = &acc{out: rollupSteps{i: r.i, lset: b.Labels()}, sum: make([]float64, steps), comp: make([]float64, steps), seen: make([]bool, steps)}
			byKey[key] = a
			order = append(order, a)
		}
		for k, v := range r.vals {
			if value.IsStaleNaN(v) {
				continue
			}
			if !a.seen[k] {
				a.sum[k], a.seen[k] = v, true
				continue
			}
			a.sum[k], a.comp[k] = kahansum.Inc(v, a.sum[k], a.comp[k])
		}
	}
	for _, a := range order {
		for k := range a.sum {
			if !a.seen[k] {
				a.sum[k] = math.Float64frombits(value.StaleNaN)
				continue
			}
			a.sum[k] += a.comp[k]
		}
		a.out.vals = a.sum
		out = append(out, a.out)
	}
	return out
}

// evalRollup is a rollup function over the windows ending in (start,
// end]: ws are the float ones, hws every histogram window of the series.
// boundsChange is set when a histogram rate's custom bucket bounds change
// inside its range (rollup.CustomBoundsChange: count and sum exact, the
// buckets maybe not).
func evalRollup(f rollupFunc, ws []rollup.Window, hws []rollup.HWindow, start, end int64, boundsChange *bool) (float64, *histogram.FloatHistogram, bool, error) {
	var (
		w   rollup.Window
		ok  bool
		err error
	)
	if len(ws) == 1 {
		w, ok = ws[0], true // Range of one window in range is that window
	} else if w, ok, err = rollup.Range(ws, start, end); err != nil {
		return 0, nil, false, err
	}
	if ok && w.Count > 0 {
		if f.rate {
			v, ok := rollup.Rate(w, start, end, f.counter, f.perSec)
			return v, nil, ok, nil
		}
		return f.float(w), nil, true, nil
	}
	if !f.histogramSupports || len(hws) == 0 {
		return 0, nil, false, nil
	}
	hw, ok, err := rollup.RangeHistograms(inRangeH(hws, start, end), start, end)
	if err != nil || !ok || hw.Count == 0 {
		return 0, nil, false, err
	}
	if f.rate {
		h, ok, err := rollup.RateHistograms(hw, start, end, f.perSec)
		if ok && rollup.CustomBoundsChange(hw) {
			*boundsChange = true
		}
		return 0, h, ok, err
	}
	return 0, hw.Sum.Copy(), true, nil
}

// inRangeH is the part of ws (in End order) ending in (start, end].
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
// the rollup engine; with a stitch plan (pl.rawFrom > 0) the selectors
// the rollup does not answer exactly read raw from pl.rawFrom on.
func (a *API) execRollup(ctx context.Context, r *http.Request, qs string, limit int, fr fastRange, ns string, res time.Duration, pl stitchPlan,
	newQuery func(*promql.Engine, storage.Queryable) (promql.Query, error)) result {
	rr := a.opts.RollupReader
	if rr == nil {
		rr, _ = a.b.(RollupReader)
	}
	if rr == nil {
		return result{err: &apiError{errorBadData, fmt.Errorf("namespace %q is a rollup, which this node's backend cannot read yet (docs/rollups.md)", ns)}}
	}
	rq := rollupQueryable{r: rr, ns: ns, res: res.Milliseconds(), marker: a.rollupMarker, fr: fr}
	if pl.rawFrom > 0 {
		rq.raw, rq.rawFrom = a.queryable(r), pl.rawFrom
	}
	qry, err := newQuery(a.rollup, rq)
	if err != nil {
		return result{err: constructionError(err)}
	}
	return a.run(ctx, r, qry, qs, limit)
}
