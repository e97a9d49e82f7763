package promapi

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/util/annotations"
	"github.com/tessera-tsdb/tessera/dbnode/query"
	"github.com/tessera-tsdb/tessera/limits"
)

// NewQueryable adapts a Backend's namespace to Prometheus' storage.Queryable
// so that promql.Engine evaluates queries over Tessera.
//
// The returned Queryable and its Queriers are safe for concurrent use; a
// SeriesSet and its series belong to one goroutine, as in Prometheus.
func NewQueryable(b query.Reader, namespace string) storage.Queryable {
	return queryable{b: b, ns: namespace}
}

type queryable struct {
	b      query.Reader
	ns     string
	limits *limits.Limits
	// fast, when set, computes the fast path's marked selectors
	// (rewrite.go) over these steps; nil answers them as plain selectors.
	fast *fastRange
}

// Querier returns a querier over [mint, maxt]. The engine takes one per
// query, so the series its selectors fetch are counted there against
// limits.maxFetchedSeriesPerQuery.
func (q queryable) Querier(mint, maxt int64) (storage.Querier, error) {
	return &querier{b: q.b, ns: q.ns, mint: mint, maxt: maxt, limits: q.limits, fast: q.fast}, nil
}

// querier is scoped to [mint, maxt] (ms, inclusive). It holds no resources:
// every call goes to the backend.
type querier struct {
	b          query.Reader
	ns         string
	mint, maxt int64
	limits     *limits.Limits
	fast       *fastRange
	fetched    atomic.Int64 // series fetched by all its selects
	fastPoints atomic.Int64 // step values the fast path holds, all selects
}

// Select returns the series matching all matchers with samples in the
// hinted range (the querier's range without hints). The backend is asked
// only when the set is first advanced, with the context of this call, so
// a query that never expands a selector costs nothing.
func (q *querier) Select(ctx context.Context, sortSeries bool, hints *storage.SelectHints, matchers ...*labels.Matcher) storage.SeriesSet {
	if q.fast != nil {
		if set := q.selectFast(ctx, sortSeries, matchers); set != nil {
			return set
		}
	}
	start, end, limit := q.mint, q.maxt, 0
	if hints != nil {
		start, end, limit = hints.Start, hints.End, hints.Limit
	}
	return &seriesSet{
		ctx: ctx, b: q.b, ns: q.ns, q: q,
		matchers: matchers, start: start, end: end,
		sorted: sortSeries, limit: limit,
	}
}

// selectFast returns the set of a rewritten selector, or nil when matchers
// end in no marker. The plan is found by the marker matcher's identity
// (plans.go): the engine passes the selector's own matchers.
func (q *querier) selectFast(ctx context.Context, sorted bool, matchers []*labels.Matcher) storage.SeriesSet {
	last := len(matchers) - 1
	if last < 0 || matchers[last].Name != q.fast.marker {
		return nil
	}
	pl := planOf(matchers[last])
	switch {
	case pl == nil:
		return storage.ErrSeriesSet(fmt.Errorf("fast path: selector %v has a marker without a plan", matchers))
	case pl.bin != nil:
		return q.selectBinary(ctx, sorted, pl.bin)
	}
	return &fastSet{ctx: ctx, q: q, spec: *pl.sel, matchers: matchers[:last:last], sorted: sorted}
}

// LabelValues returns the sorted values of name among series matching
// matchers in the querier's range.
func (q *querier) LabelValues(ctx context.Context, name string, hints *storage.LabelHints, matchers ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	vals, err := q.b.LabelValues(ctx, q.ns, name, matchers, q.mint, q.maxt)
	if err != nil {
		return nil, nil, fmt.Errorf("label values of %q: %w", name, err)
	}
	return limitSorted(vals, hints), nil, nil
}

// LabelNames returns the sorted label names of series matching matchers in
// the querier's range.
func (q *querier) LabelNames(ctx context.Context, hints *storage.LabelHints, matchers ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	names, err := q.b.LabelNames(ctx, q.ns, matchers, q.mint, q.maxt)
	if err != nil {
		return nil, nil, fmt.Errorf("label names: %w", err)
	}
	return limitSorted(names, hints), nil, nil
}

func (q *querier) Close() error { return nil }

// limitSorted sorts vals (backends answer sorted; this keeps the
// LabelQuerier contract if one does not) and applies the hinted limit.
func limitSorted(vals []string, hints *storage.LabelHints) []string {
	if !slices.IsSorted(vals) {
		vals = slices.Clone(vals)
		slices.Sort(vals)
	}
	vals, _ = hints.ApplyLimit(vals)
	return vals
}
