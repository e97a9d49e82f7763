package promapi

import (
	"context"
	"slices"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/util/annotations"
)

// refStorage is the reference the comparison tests hold Tessera to: the
// samples encoded in Prometheus' own XOR chunks (120 samples each, as the
// TSDB head cuts them) and served through Prometheus' own chunk-to-series
// adapters, selected with Prometheus' matcher semantics.
//
// It stands in for util/teststorage, which does not build in this module:
// the tsdb package imports prometheus/config, whose dependency
// client_golang/exp is not in our go.sum.
type refStorage struct {
	series []refSeries
}

type refSeries struct {
	lset    labels.Labels
	samples []chunks.Sample
	entry   *storage.ChunkSeriesEntry
}

// fsample is a float sample for chunks.ChunkFromSamples.
type fsample struct {
	t int64
	f float64
}

func (s fsample) T() int64                      { return s.t }
func (s fsample) ST() int64                     { return 0 }
func (s fsample) F() float64                    { return s.f }
func (s fsample) H() *histogram.Histogram       { return nil }
func (s fsample) FH() *histogram.FloatHistogram { return nil }
func (s fsample) Type() chunkenc.ValueType      { return chunkenc.ValFloat }
func (s fsample) Copy() chunks.Sample           { return s }

// add appends one series; samples must be in timestamp order.
func (r *refStorage) add(lset labels.Labels, samples []tsample) {
	var all []chunks.Sample
	var pieces [][]chunks.Sample
	for i, s := range samples {
		if i%120 == 0 {
			pieces = append(pieces, nil)
		}
		pieces[len(pieces)-1] = append(pieces[len(pieces)-1], fsample{s.t, s.v})
		all = append(all, fsample{s.t, s.v})
	}
	r.series = append(r.series, refSeries{
		lset: lset, samples: all,
		entry: storage.NewListChunkSeriesFromSamples(lset, pieces...),
	})
}

func (r *refStorage) Querier(mint, maxt int64) (storage.Querier, error) {
	return &refQuerier{r: r, mint: mint, maxt: maxt}, nil
}

type refQuerier struct {
	r          *refStorage
	mint, maxt int64
}

func (rs refSeries) hasSampleIn(mint, maxt int64) bool {
	for _, s := range rs.samples {
		if s.T() >= mint && s.T() <= maxt {
			return true
		}
	}
	return false
}

func (q *refQuerier) matching(ms []*labels.Matcher, mint, maxt int64) []refSeries {
	var out []refSeries
	for _, s := range q.r.series {
		if matchesAll(ms, s.lset) && s.hasSampleIn(mint, maxt) {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b refSeries) int { return labels.Compare(a.lset, b.lset) })
	return out
}

func (q *refQuerier) Select(_ context.Context, _ bool, hints *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
	mint, maxt, limit := q.mint, q.maxt, 0
	if hints != nil {
		mint, maxt, limit = hints.Start, hints.End, hints.Limit
	}
	sel := q.matching(ms, mint, maxt)
	if limit > 0 && len(sel) > limit {
		sel = sel[:limit]
	}
	entries := make([]storage.ChunkSeries, len(sel))
	for i, s := range sel {
		entries[i] = s.entry
	}
	return storage.NewSeriesSetFromChunkSeriesSet(&chunkSeriesList{list: entries, i: -1})
}

func (q *refQuerier) LabelValues(_ context.Context, name string, _ *storage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	var vals []string
	for _, s := range q.matching(ms, q.mint, q.maxt) {
		if v := s.lset.Get(name); v != "" {
			vals = append(vals, v)
		}
	}
	slices.Sort(vals)
	return slices.Compact(vals), nil, nil
}

func (q *refQuerier) LabelNames(_ context.Context, _ *storage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	var names []string
	for _, s := range q.matching(ms, q.mint, q.maxt) {
		s.lset.Range(func(l labels.Label) { names = append(names, l.Name) })
	}
	slices.Sort(names)
	return slices.Compact(names), nil, nil
}

func (q *refQuerier) Close() error { return nil }

type chunkSeriesList struct {
	list []storage.ChunkSeries
	i    int
}

func (c *chunkSeriesList) Next() bool                        { c.i++; return c.i < len(c.list) }
func (c *chunkSeriesList) At() storage.ChunkSeries           { return c.list[c.i] }
func (c *chunkSeriesList) Err() error                        { return nil }
func (c *chunkSeriesList) Warnings() annotations.Annotations { return nil }
