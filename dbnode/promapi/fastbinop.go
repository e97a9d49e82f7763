package promapi

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/schema"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/util/annotations"
	"github.com/tessera-tsdb/tessera/dbnode/query"
)

// Binary operators on the fast path. A query whose outermost expression
// (parentheses aside) is an arithmetic or comparison operator over
// operands the fast path computes (marked selectors: instant selectors,
// rates, sum/count/avg by) and number literals, e.g. `a / b` or
// `1 - avg by (i) (rate(x[5m]))`, is rewritten as a whole into one marked
// selector whose marker carries the operation (binPlan). The querier computes the operands as it
// computes any marked selector and then the operator per step, so the
// engine no longer matches both operands' label signatures and builds
// result labels at every step of the query (fs_used_ratio: ~4,000 and
// ~1,600 series x 121 steps), only reads the results.
//
// The engine's semantics kept (promql/engine.go VectorBinop,
// VectorscalarBinop, resultMetric, rangeEval):
//   - one-to-one matching on the engine's signature: on(...) keeps only the
//     listed labels, ignoring(...) (and the default) all but those and
//     __name__, __type__, __unit__;
//   - a point where either side has no value yields none;
//   - the value is the engine's single float operation on the same
//     operands (binOps), so NaN and infinities come out as they would; a
//     comparison (binCmps) keeps the vector's value (the left one between
//     vectors) where it holds and drops the point where not, or with bool
//     is 1 or 0 at every point;
//   - result labels: the left side's, without __name__, __type__ and
//     __unit__ for arithmetic and bool, then on() keeps the listed labels
//     and ignoring() deletes them; vector-scalar drops the metadata
//     labels for arithmetic and bool, and keeps them all for a filter;
//   - results in the left side's order, the order the engine's instant
//     evaluation gives (a range result is sorted by the engine).
//
// Whatever could make the engine answer differently, the fast path hands
// to the engine (errFallback): two series on the right with one
// signature, two matched series on the left with one, two results with
// equal labels (the engine's many-to-many, many-to-one and "same
// labelset" errors, or its merge of such series across steps), a read
// error in an operand, a result that is bit for bit a StaleNaN, results
// past half the samples limit with the operands. Not rewritten at all:
// set operators, group_left/group_right, fill modifiers, scalar-scalar
// operators, operators under any other expression (the engine's range
// evaluation of a binary operator yields its series in Go map order, so
// a parent that depends on their order would see another order).

// binOps are the arithmetic operators the fast path computes, each the
// engine's float operation (vectorElemBinop, scalarBinop); tests replace
// them with wrong versions to show the comparison with the engine
// catches them.
var binOps = map[parser.ItemType]func(l, r float64) float64{
	parser.ADD:   func(l, r float64) float64 { return l + r },
	parser.SUB:   func(l, r float64) float64 { return l - r },
	parser.MUL:   func(l, r float64) float64 { return l * r },
	parser.DIV:   func(l, r float64) float64 { return l / r },
	parser.MOD:   math.Mod,
	parser.POW:   math.Pow,
	parser.ATAN2: math.Atan2,
}

// binCmps are the comparison operators the fast path computes, each the
// engine's float comparison; replaceable by tests as binOps.
var binCmps = map[parser.ItemType]func(l, r float64) bool{
	parser.EQLC: func(l, r float64) bool { return l == r },
	parser.NEQ:  func(l, r float64) bool { return l != r },
	parser.GTR:  func(l, r float64) bool { return l > r },
	parser.LSS:  func(l, r float64) bool { return l < r },
	parser.GTE:  func(l, r float64) bool { return l >= r },
	parser.LTE:  func(l, r float64) bool { return l <= r },
}

// binPlan is a binary operator the querier computes: Op (with bool, for a
// comparison, when Bool) between L and R, with vector-vector matching On
// (else ignoring) Labels.
type binPlan struct {
	Op     parser.ItemType
	Bool   bool
	On     bool
	Labels []string
	L, R   binOperand
}

// binOperand is one side of a binPlan: exactly one of a number literal, a
// rewritten selector (its matchers, marker excluded, and what it computes)
// or another operator.
type binOperand struct {
	Num *float64
	Sel *selOperand
	Bin *binPlan
}

type selOperand struct {
	matchers []*labels.Matcher
	spec     *fastSpec
}

// rewriteBinary returns e, already rewritten by rewrite, as one marked
// selector when it is (in parentheses or not) a binary operator the fast
// path computes; e otherwise.
func (p fastParser) rewriteBinary(e parser.Expr) parser.Expr {
	be, ok := unparen(e).(*parser.BinaryExpr)
	if !ok {
		return e
	}
	bp, ok := p.binPlan(be)
	if !ok {
		return e
	}
	return &parser.VectorSelector{
		LabelMatchers: []*labels.Matcher{p.planMatcher(&plan{bin: bp})},
		PosRange:      be.PositionRange(),
	}
}

func unparen(e parser.Expr) parser.Expr {
	for {
		pe, ok := e.(*parser.ParenExpr)
		if !ok {
			return e
		}
		e = pe.Expr
	}
}

// maxBinDepth is the most binary operators nested in one another that
// the fast path plans; it leaves a deeper expression to the engine before
// reading any data, so that planning and evaluating a plan (both
// recursive) stay bounded whatever query.maxExpressionDepth allows. (When
// plans travelled as JSON, a chain of 5,001 selectors answered 422
// "exceeded max depth" from encoding/json.)
const maxBinDepth = 1000

// binPlan returns the plan of be, false when the fast path leaves it to
// the engine. It takes its operands' types from their plans, not from
// parser.Expr.Type, which walks the operand's subtree at every level
// (quadratic in a chain's length).
func (p fastParser) binPlan(be *parser.BinaryExpr) (*binPlan, bool) {
	return p.binPlanAt(be, 1)
}

func (p fastParser) binPlanAt(be *parser.BinaryExpr, depth int) (*binPlan, bool) {
	_, arith := binOps[be.Op]
	if _, cmp := binCmps[be.Op]; !arith && !cmp || depth > maxBinDepth {
		return nil, false
	}
	plan := &binPlan{Op: be.Op, Bool: be.ReturnBool}
	var ok bool
	if plan.L, ok = p.binOperand(be.LHS, depth); !ok {
		return nil, false
	}
	if plan.R, ok = p.binOperand(be.RHS, depth); !ok {
		return nil, false
	}
	// An operand is a scalar exactly when it is a number: a marked
	// selector is a vector, and so is a planned operator (the plan of
	// two numbers is refused below).
	lt, rt := plan.L.Num == nil, plan.R.Num == nil
	switch {
	case lt && rt:
		m := be.VectorMatching
		if m == nil || m.Card != parser.CardOneToOne || len(m.Include) > 0 ||
			m.FillValues.LHS != nil || m.FillValues.RHS != nil {
			return nil, false
		}
		plan.On, plan.Labels = m.On, slices.Clone(m.MatchingLabels)
	case lt || rt:
	default:
		return nil, false
	}
	return plan, true
}

// binOperand is e as an operand of an operator depth levels deep.
func (p fastParser) binOperand(e parser.Expr, depth int) (binOperand, bool) {
	switch n := unparen(e).(type) {
	case *parser.NumberLiteral:
		v := n.Val
		return binOperand{Num: &v}, true
	case *parser.VectorSelector:
		last := len(n.LabelMatchers) - 1
		if last < 0 {
			return binOperand{}, false
		}
		pl := planOf(n.LabelMatchers[last])
		if pl == nil || pl.sel == nil {
			return binOperand{}, false
		}
		return binOperand{Sel: &selOperand{matchers: n.LabelMatchers[:last:last], spec: pl.sel}}, true
	case *parser.BinaryExpr:
		plan, ok := p.binPlanAt(n, depth+1)
		return binOperand{Bin: plan}, ok
	}
	return binOperand{}, false
}

// binSet is the SeriesSet of a marked binary operator: its result
// series, computed on the first Next.
type binSet struct {
	ctx    context.Context
	q      *querier
	plan   *binPlan
	sorted bool

	// pre are the operands' sets, read by prefetch before any is
	// computed.
	pre map[*selOperand]*fastSet

	loaded   bool
	out      []fastSeries
	i        int
	err      error
	warnings annotations.Annotations
}

// prefetch reads every selector operand of the plan before decoding a
// sample of any, and declines the operator (errFallback) when one of them
// holds native histograms (the operator's float arithmetic does not
// apply), when their outputs and the operators' could pass half the
// samples limit, or when an operand's outputs could collide: decided
// from the series lists, the reads are handed over to the plain engine's
// run of the query (handover.go), which reads nothing again. Where the
// backend computes operands itself (a query.Pusher, the cluster), they
// are asked of it one by one instead.
func (s *binSet) prefetch() error {
	if _, ok := s.q.b.(query.Pusher); ok {
		return nil
	}
	var sels []*selOperand
	ops := 0
	var walk func(p *binPlan)
	walk = func(p *binPlan) {
		ops++
		for _, o := range []binOperand{p.L, p.R} {
			switch {
			case o.Sel != nil:
				sels = append(sels, o.Sel)
			case o.Bin != nil:
				walk(o.Bin)
			}
		}
	}
	walk(s.plan)
	s.pre = make(map[*selOperand]*fastSet, len(sels))
	sets := make([]*fastSet, 0, len(sels))
	for _, o := range sels {
		fs := &fastSet{ctx: s.ctx, q: s.q, spec: *o.spec, matchers: o.matchers}
		if err := fs.read(); err != nil {
			return err
		}
		s.pre[o] = fs
		sets = append(sets, fs)
	}
	// Each operator's results are at most its largest operand's series at
	// every step: all of them at most the operands' series times the
	// operators, at each step.
	all := 0
	for _, fs := range sets {
		all += len(fs.its)
	}
	extra := all * ops * s.q.fast.steps()
	var err error
	for _, fs := range sets {
		if _, err = fs.precheck(false, extra); err != nil {
			break
		}
	}
	if err == nil {
		return nil
	}
	if errors.Is(err, errFallback) {
		for _, fs := range sets {
			s.q.fast.handover.keep(fs.key, fs.its, fs.readErr)
		}
	}
	return err
}

// selectBinary is selectFast for a marker standing for a binPlan.
func (q *querier) selectBinary(ctx context.Context, sorted bool, plan *binPlan) storage.SeriesSet {
	return &binSet{ctx: ctx, q: q, plan: plan, sorted: sorted}
}

func (s *binSet) Next() bool {
	if s.err != nil {
		return false
	}
	if !s.loaded {
		s.loaded = true
		if s.err = s.prefetch(); s.err != nil {
			return false
		}
		if s.out, s.err = s.eval(s.plan); s.err != nil {
			return false
		}
		if s.sorted {
			slices.SortFunc(s.out, func(a, b fastSeries) int { return labels.Compare(a.lset, b.lset) })
		}
		if r := s.q.fast; r.stats != nil {
			r.stats.binops.Add(1)
		}
		s.i = -1
	}
	s.i++
	return s.i < len(s.out)
}

func (s *binSet) At() storage.Series { return s.q.fast.series(&s.out[s.i]) }

func (s *binSet) Err() error                        { return s.err }
func (s *binSet) Warnings() annotations.Annotations { return s.warnings }

// account adds out's points to the query's fast path points and declines
// past half the samples limit, as fastSet.load does: the engine would
// have held each operator's results besides its operands' (the
// operands' are counted already), and copies the last into its matrix.
func (s *binSet) account(out []fastSeries) error {
	n := 0
	for i := range out {
		n += len(out[i].vals)
	}
	if int(s.q.fastPoints.Add(int64(n))) > s.q.fast.maxSamples/2 {
		return errFallback
	}
	return nil
}

// eval computes plan's result series, in the engine's order.
func (s *binSet) eval(plan *binPlan) ([]fastSeries, error) {
	elem, err := binElem(plan)
	if err != nil {
		return nil, err
	}
	lhs, lnum, err := s.operand(plan.L)
	if err != nil {
		return nil, err
	}
	rhs, rnum, err := s.operand(plan.R)
	if err != nil {
		return nil, err
	}
	var (
		out   []fastSeries
		ok    = true
		steps = s.q.fast.steps()
	)
	switch {
	case plan.L.Num == nil && plan.R.Num == nil:
		if out, err = binVectors(elem, plan, lhs, rhs, steps); err != nil {
			return nil, err
		}
	case plan.L.Num == nil:
		out, ok = binScalar(lhs, steps, dropsSchema(plan), func(v float64) (float64, bool) { return elem(v, rnum, v) })
	case plan.R.Num == nil:
		out, ok = binScalar(rhs, steps, dropsSchema(plan), func(v float64) (float64, bool) { return elem(lnum, v, v) })
	default:
		return nil, errors.New("fast path marker: binary operator between two numbers")
	}
	if !ok {
		return nil, errFallback // a result would read as a gap
	}
	if sameLabelset(out) {
		// The engine refuses them at a step both have a value, and
		// merges them into one series otherwise: its business.
		return nil, errFallback
	}
	return out, s.account(out)
}

// binElem is the plan's operation on two values: its result and whether
// there is one. vec is the vector's value (the left one between vectors),
// which a comparison without bool keeps where it holds.
func binElem(plan *binPlan) (func(l, r, vec float64) (float64, bool), error) {
	if op, ok := binOps[plan.Op]; ok {
		return func(l, r, _ float64) (float64, bool) { return op(l, r), true }, nil
	}
	cmp, ok := binCmps[plan.Op]
	switch {
	case !ok:
		return nil, fmt.Errorf("fast path marker: binary operator %q not computed", plan.Op)
	case plan.Bool:
		return func(l, r, _ float64) (float64, bool) {
			if cmp(l, r) {
				return 1, true
			}
			return 0, true
		}, nil
	}
	return func(l, r, vec float64) (float64, bool) { return vec, cmp(l, r) }, nil
}

// dropsSchema reports whether the plan's results lose the name and the
// metadata labels (the engine's changesMetricSchema, or bool).
func dropsSchema(plan *binPlan) bool {
	_, arith := binOps[plan.Op]
	return arith || plan.Bool
}

// operand computes o: its series, or its number.
func (s *binSet) operand(o binOperand) ([]fastSeries, float64, error) {
	switch {
	case o.Num != nil:
		return nil, *o.Num, nil
	case o.Bin != nil:
		out, err := s.eval(o.Bin)
		return out, 0, err
	}
	if o.Sel == nil {
		return nil, 0, errors.New("fast path plan: binary operator: empty operand")
	}
	fs := s.pre[o.Sel]
	if fs == nil {
		fs = &fastSet{ctx: s.ctx, q: s.q, spec: *o.Sel.spec, matchers: o.Sel.matchers}
	}
	err := fs.load()
	s.warnings.Merge(fs.warnings)
	if err != nil {
		return nil, 0, err
	}
	for i := range fs.out {
		if fs.out[i].hists != nil {
			// The engine computed the operand (native histograms): the
			// operator's float arithmetic does not apply.
			return nil, 0, errFallback
		}
		if fs.out[i].err != nil {
			// The engine fails reading this series, where its evaluation
			// of the operator has got to: let it.
			return nil, 0, errFallback
		}
	}
	return fs.out, 0, nil
}

// binVectors is the engine's VectorBinop with one-to-one matching at
// every step: each left series with its right series of the same
// signature, in the left side's order.
func binVectors(elem func(l, r, vec float64) (float64, bool), plan *binPlan, lhs, rhs []fastSeries, steps int) ([]fastSeries, error) {
	drop := dropsSchema(plan)
	sig := binSignature(plan.On, plan.Labels)
	right := make(map[string]int, len(rhs))
	for j := range rhs {
		k := sig(rhs[j].lset)
		if _, dup := right[k]; dup {
			return nil, errFallback // many-to-many, if both have a value at a step
		}
		right[k] = j
	}
	matched := make(map[string]bool, len(lhs))
	lb := labels.NewBuilder(labels.EmptyLabels())
	out := make([]fastSeries, 0, len(lhs))
	for i := range lhs {
		k := sig(lhs[i].lset)
		j, ok := right[k]
		if !ok {
			continue
		}
		if matched[k] {
			return nil, errFallback // many-to-one without group_left, if both have a value at a step
		}
		matched[k] = true
		vals, first, ok := binSteps(&lhs[i], &rhs[j], steps, elem)
		if !ok {
			return nil, errFallback // a result would read as a gap
		}
		if vals == nil {
			continue
		}
		// resultMetric.
		lb.Reset(lhs[i].lset)
		if drop {
			schema.Metadata{}.SetToLabels(lb)
		}
		if plan.On {
			lb.Keep(plan.Labels...)
		} else {
			lb.Del(plan.Labels...)
		}
		out = append(out, fastSeries{lset: lb.Labels(), vals: vals, first: first})
	}
	return out, nil
}

// binSignature is the engine's join signature (rangeEval's sigf).
func binSignature(on bool, matching []string) func(labels.Labels) string {
	names := slices.Clone(matching)
	buf := make([]byte, 0, 1024)
	if on {
		slices.Sort(names)
		return func(l labels.Labels) string { return string(l.BytesWithLabels(buf, names...)) }
	}
	names = append([]string{model.MetricNameLabel, model.MetricTypeLabel, model.MetricUnitLabel}, names...)
	slices.Sort(names)
	return func(l labels.Labels) string { return string(l.BytesWithoutLabels(buf, names...)) }
}

// binSteps is op of l and r at every step both have a value, in
// fastSeries form (a StaleNaN at each step without one after the first,
// and after the last unless at the last step); nil when no step has one.
// false when a result is bit for bit a StaleNaN, which would read as a
// gap.
func binSteps(l, r *fastSeries, steps int, elem func(l, r, vec float64) (float64, bool)) ([]float64, int, bool) {
	lo := max(l.first, r.first)
	hi := min(l.first+len(l.vals), r.first+len(r.vals))
	var (
		vals  []float64
		first int
	)
	for step := lo; step < hi; step++ {
		lv, rv := l.vals[step-l.first], r.vals[step-r.first]
		if value.IsStaleNaN(lv) || value.IsStaleNaN(rv) {
			continue
		}
		v, ok := elem(lv, rv, lv)
		if !ok {
			continue // a comparison that does not hold
		}
		if value.IsStaleNaN(v) {
			return nil, 0, false
		}
		vals, first = binAppend(vals, first, step, hi-step+1, v)
	}
	return binEnd(vals, first, steps), first, true
}

// binScalar is the engine's VectorscalarBinop at every step: f of each
// value, the metadata labels dropped when drop, in the vector's order;
// false when a
// result is bit for bit a StaleNaN.
func binScalar(in []fastSeries, steps int, drop bool, f func(float64) (float64, bool)) ([]fastSeries, bool) {
	out := make([]fastSeries, 0, len(in))
	for i := range in {
		s := &in[i]
		var (
			vals  []float64
			first int
		)
		for k, v := range s.vals {
			if value.IsStaleNaN(v) {
				continue
			}
			r, ok := f(v)
			if !ok {
				continue
			}
			if value.IsStaleNaN(r) {
				return nil, false
			}
			vals, first = binAppend(vals, first, s.first+k, len(s.vals)-k+1, r)
		}
		if vals = binEnd(vals, first, steps); vals == nil {
			continue
		}
		lset := s.lset
		if drop {
			lset = lset.DropReserved(schema.IsMetadataLabel)
		}
		out = append(out, fastSeries{lset: lset, vals: vals, first: first})
	}
	return out, true
}

// binAppend adds v at step to vals (from step first), StaleNaN at the
// steps between; room is how many more values the series may take.
func binAppend(vals []float64, first, step, room int, v float64) ([]float64, int) {
	if vals == nil {
		vals, first = make([]float64, 0, room), step
	}
	for len(vals) < step-first {
		vals = append(vals, staleNaN)
	}
	return append(vals, v), first
}

// binEnd closes a series as stepper.end does.
func binEnd(vals []float64, first, steps int) []float64 {
	if vals != nil && first+len(vals) < steps {
		vals = append(vals, staleNaN)
	}
	return vals
}
