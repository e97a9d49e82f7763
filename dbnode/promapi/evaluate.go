package promapi

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/util/annotations"
	"github.com/tessera-tsdb/tessera/dbnode/query"
	tstorage "github.com/tessera-tsdb/tessera/dbnode/storage"
)

// Evaluate answers a pushed-down request over r, as a replica does for
// its shards: the request's function at every step per selected series,
// on up to parallelism goroutines, then the partial aggregates of the
// groups (query.Result), which Merge combines with other replicas' into
// the whole answer. Requests without an aggregation, series with native
// histograms, outputs past half of opts.MaxSamples and avg sums that would
// overflow are declined (query.ErrDeclined): the caller reads raw series.
// A reader may decline a selection before reading it by failing with
// storage.ErrHistogramsSelected (storage.QueryOptions.DeclineHistograms).
// Of opts only Parallelism (0: GOMAXPROCS) and MaxSamples (required, from
// the node's config) apply.
func Evaluate(ctx context.Context, r query.Reader, req *query.Request, opts Options) (*query.Result, error) {
	if opts.MaxSamples <= 0 {
		return nil, fmt.Errorf("promapi: evaluate: MaxSamples must be > 0, got %d", opts.MaxSamples)
	}
	opts = opts.resolved()
	if err := req.Validate(); err != nil {
		return nil, err
	}
	q := &querier{b: r, ns: req.Namespace, fast: &fastRange{
		start: req.Steps.Start, end: req.Steps.End, stp: req.Steps.Step, lookback: req.Steps.Lookback,
		parallelism: max(1, opts.Parallelism), maxSamples: opts.MaxSamples,
	}}
	res := &query.Result{Steps: req.Steps.Count()}
	s := &fastSet{ctx: ctx, q: q, spec: fastSpec{Pushdown: req.Pushdown}, matchers: req.Matchers, partial: res, digestOnly: req.DigestOnly}
	if err := s.load(); err != nil {
		if errors.Is(err, errFallback) || errors.Is(err, tstorage.ErrHistogramsSelected) {
			return nil, query.ErrDeclined
		}
		return nil, err
	}
	res.Series = int(q.fetched.Load())
	if req.DigestOnly {
		res.Groups, res.DigestOnly = nil, true
	}
	for _, err := range s.warnings {
		if !errors.Is(err, annotations.PossibleNonCounterInfo) {
			res.Warnings = append(res.Warnings, err.Error())
		}
	}
	slices.Sort(res.NonCounters)
	res.NonCounters = slices.Compact(res.NonCounters)
	return res, nil
}

// loadPushed asks p for the set's aggregation, or without one its series'
// step values, instead of reading raw series; false when p declines
// before the set read anything.
func (s *fastSet) loadPushed(p query.Pusher) (bool, error) {
	q, r := s.q, s.q.fast
	req := &query.Request{Namespace: q.ns, Matchers: s.matchers,
		Steps:    query.Steps{Start: r.start, End: r.end, Step: r.stp, Lookback: r.lookback},
		Pushdown: s.spec.Pushdown}
	res, err := p.Push(s.ctx, req)
	if errors.Is(err, query.ErrDeclined) {
		return false, nil
	}
	if err != nil {
		return true, err
	}
	if err := q.limits.CheckFetchedSeries(int(q.fetched.Add(int64(res.Series)))); err != nil {
		return true, err
	}
	for _, name := range res.NonCounters {
		s.warnings.Add(annotations.NewPossibleNonCounterInfo(name, s.spec.pos))
	}
	for _, w := range res.Warnings {
		s.warnings.Add(errors.New(w))
	}
	steps := r.steps()
	slices.SortFunc(res.Groups, func(a, b query.Partial) int { return labels.Compare(a.Labels, b.Labels) })
	out := make([]fastSeries, 0, len(res.Groups))
	for i := range res.Groups {
		g := &res.Groups[i]
		first := slices.IndexFunc(g.Count, func(n float64) bool { return n != 0 })
		if first < 0 {
			continue
		}
		st := stepper{steps: steps, first: first, vals: make([]float64, 0, steps-first)}
		for step := first; step < steps; step++ {
			v, ok := g.Value(s.spec.Agg, step)
			if !ok {
				continue
			}
			if value.IsStaleNaN(v) {
				return true, errFallback // would read as a gap
			}
			st.value(step, v)
		}
		st.end()
		out = append(out, fastSeries{lset: g.Labels, vals: st.vals, first: st.first, n: len(st.vals)})
		if int(q.fastPoints.Add(int64(len(st.vals)))) > r.maxSamples/2 {
			return true, errFallback
		}
	}
	s.out = out
	if s.sorted {
		slices.SortFunc(s.out, func(a, b fastSeries) int { return labels.Compare(a.lset, b.lset) })
	}
	if r.stats != nil {
		r.stats.computed.Add(1)
		if s.spec.Agg != query.AggNone {
			r.stats.aggregated.Add(1)
		}
		r.stats.pushed.Add(1)
	}
	return true, nil
}
