package promapi

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/schema"
	"github.com/tessera-tsdb/tessera/dbnode/query"
	tstorage "github.com/tessera-tsdb/tessera/dbnode/storage"
	"github.com/tessera-tsdb/tessera/ident"
)

// A selection holding native histograms is not computed by the fast
// path's float arithmetic: the engine computes it, over the series the
// fast path has already read and not yet decoded. The set's plan keeps
// the text of the subexpression it stands for (fastSpec.src), which the
// plain engine evaluates at the query's steps over a Reader answering
// with those series; its values (floats and histograms) become the set's
// step values, in the order the engine evaluating the whole query would
// have produced them. Nothing is read twice: before, such a query was
// declined after the read and run again on the engine, reading storage
// or the cluster again.

// hasHistograms reports whether a series of its holds native histograms:
// known from the read, before a sample is decoded.
func hasHistograms(its []tstorage.SeriesIterator) bool {
	for i := range its {
		if its[i].Histograms != nil {
			return true
		}
	}
	return false
}

// fetched is a Reader whose Query answers with series already read, once.
type fetched struct {
	its  []tstorage.SeriesIterator
	used bool
}

func (f *fetched) Query(_ context.Context, _ string, matchers []*labels.Matcher, _, _ int64) ([]tstorage.SeriesIterator, error) {
	if f.used {
		return nil, fmt.Errorf("fast path: the engine selected %v twice from one read", matchers)
	}
	f.used = true
	return f.its, nil
}

func (f *fetched) LabelNames(context.Context, string, []*labels.Matcher, int64, int64) ([]string, error) {
	return nil, errors.New("fast path: label names asked of a read selection")
}

func (f *fetched) LabelValues(context.Context, string, string, []*labels.Matcher, int64, int64) ([]string, error) {
	return nil, errors.New("fast path: label values asked of a read selection")
}

var _ query.Reader = (*fetched)(nil)

// loadEngine sets s.out to the engine's evaluation of the set's
// subexpression over its, the set's read series.
func (s *fastSet) loadEngine(its []tstorage.SeriesIterator) error {
	q, r := s.q, s.q.fast
	qa := queryable{b: &fetched{its: its}, ns: q.ns}
	opts := r.opts // the query's own: its lookback_delta, to the nanosecond
	var (
		qry promql.Query
		err error
	)
	if r.stp <= 0 {
		qry, err = r.engine.NewInstantQuery(s.ctx, qa, opts, s.spec.src, time.UnixMilli(r.start))
	} else {
		qry, err = r.engine.NewRangeQuery(s.ctx, qa, opts, s.spec.src, time.UnixMilli(r.start), time.UnixMilli(r.end), time.Duration(r.stp)*time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("fast path: evaluate %q with the engine: %w", s.spec.src, err)
	}
	defer qry.Close()
	res := qry.Exec(s.ctx)
	if res.Err != nil {
		return res.Err
	}
	s.warnings.Merge(res.Warnings)
	var out []fastSeries
	switch v := res.Value.(type) {
	case promql.Matrix:
		for i := range v {
			out = append(out, r.stepSeries(v[i].Metric, v[i].Floats, v[i].Histograms))
		}
	case promql.Vector:
		for i := range v {
			fs := []promql.FPoint{{T: v[i].T, F: v[i].F}}
			var hs []promql.HPoint
			if v[i].H != nil {
				fs, hs = nil, []promql.HPoint{{T: v[i].T, H: v[i].H}}
			}
			out = append(out, r.stepSeries(v[i].Metric, fs, hs))
		}
	default:
		return fmt.Errorf("fast path: the engine evaluated %q to a %s", s.spec.src, res.Value.Type())
	}
	s.out = s.engineOrder(its, out)
	n := 0
	for i := range s.out {
		n += s.out[i].n
	}
	q.fastPoints.Add(int64(n))
	if r.stats != nil {
		r.stats.computed.Add(1)
		r.stats.engine.Add(1)
	}
	return nil
}

// stepSeries is a series the engine evaluated at the range's steps as
// step values: StaleNaN at the steps without a value from the first on,
// and after the last unless it is the last step. Histograms are copied:
// the engine reuses their memory once the query is closed.
func (r *fastRange) stepSeries(lset labels.Labels, fs []promql.FPoint, hs []promql.HPoint) fastSeries {
	steps := r.steps()
	step := func(t int64) int {
		if r.stp <= 0 {
			return 0
		}
		return int((t - r.start) / r.stp)
	}
	first, last := steps, -1
	for _, p := range fs {
		first, last = min(first, step(p.T)), max(last, step(p.T))
	}
	for _, p := range hs {
		first, last = min(first, step(p.T)), max(last, step(p.T))
	}
	if last < 0 {
		return fastSeries{lset: lset}
	}
	n := min(last+2, steps) - first
	out := fastSeries{lset: lset, first: first, n: n, vals: make([]float64, n)}
	for k := range out.vals {
		out.vals[k] = staleNaN
	}
	for _, p := range fs {
		out.vals[step(p.T)-first] = p.F
	}
	if len(hs) > 0 {
		out.hists = make([]*histogram.FloatHistogram, n)
		for _, p := range hs {
			out.hists[step(p.T)-first] = p.H.Copy()
			out.vals[step(p.T)-first] = 0
		}
	}
	return out
}

// engineOrder is out in the order the engine evaluating the whole query
// hands them on: by the first of its (the read order) that each output
// comes from. A range query's result is sorted by labels, but the
// engine evaluates a function series by series in the order they were
// selected, and an aggregation group by group in the order of their first
// series, which a parent summing them sees.
func (s *fastSet) engineOrder(its []tstorage.SeriesIterator, out []fastSeries) []fastSeries {
	index := make(map[uint64][]int, len(out))
	for i := range out {
		h := out[i].lset.Hash()
		index[h] = append(index[h], i)
	}
	ordered := make([]fastSeries, 0, len(out))
	taken := make([]bool, len(out))
	var lb labels.ScratchBuilder
	for _, it := range its {
		lset, err := ident.LabelsWith(&lb, it.ID)
		if err != nil {
			continue
		}
		switch {
		case s.spec.Agg != query.AggNone:
			lset = labels.NewBuilder(lset).Keep(s.spec.Grouping...).Labels()
		case s.spec.Func != query.FuncSelect:
			lset = lset.DropReserved(schema.IsMetadataLabel)
		}
		for _, i := range index[lset.Hash()] {
			if !taken[i] && labels.Equal(out[i].lset, lset) {
				taken[i] = true
				ordered = append(ordered, out[i])
			}
		}
	}
	for i := range out {
		if !taken[i] {
			ordered = append(ordered, out[i])
		}
	}
	return ordered
}
