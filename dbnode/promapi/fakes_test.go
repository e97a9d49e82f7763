package promapi

import (
	"context"
	"slices"
	"sync"

	"github.com/prometheus/prometheus/model/labels"
	tstorage "github.com/tessera-tsdb/tessera/dbnode/storage"
	"github.com/tessera-tsdb/tessera/ident"
)

// memBackend is an httpapi.Backend over plain slices that records the
// queries it receives, for tests of what the adapter pushes down.
type memBackend struct {
	series []memSeries

	mu      sync.Mutex
	queries []memQuery
	// namespaces are the namespaces Query was asked for, in order.
	namespaces []string
	err        error // returned by every call when set
	block      bool  // Query waits for its context to end
}

type memSeries struct {
	lset    labels.Labels
	samples []tsample
}

type tsample struct {
	t int64
	v float64
}

type memQuery struct {
	matchers   []*labels.Matcher
	start, end int64
}

func (m *memBackend) add(lset labels.Labels, samples ...tsample) {
	m.series = append(m.series, memSeries{lset: lset, samples: samples})
}

func (m *memBackend) WriteBatch(context.Context, string, []tstorage.Sample) error { return nil }

func matchesAll(ms []*labels.Matcher, ls labels.Labels) bool {
	for _, m := range ms {
		if !m.Matches(ls.Get(m.Name)) {
			return false
		}
	}
	return true
}

func (m *memBackend) Query(ctx context.Context, ns string, ms []*labels.Matcher, start, end int64) ([]tstorage.SeriesIterator, error) {
	m.mu.Lock()
	m.queries = append(m.queries, memQuery{matchers: ms, start: start, end: end})
	m.namespaces = append(m.namespaces, ns)
	err, block := m.err, m.block
	m.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if block {
		<-ctx.Done()
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []tstorage.SeriesIterator
	// Newest series first: an order unlike label order, so that tests see
	// whether the adapter sorts when asked.
	for i := len(m.series) - 1; i >= 0; i-- {
		s := m.series[i]
		if !matchesAll(ms, s.lset) {
			continue
		}
		var in []tsample
		for _, smp := range s.samples {
			if smp.t >= start && smp.t <= end {
				in = append(in, smp)
			}
		}
		id := ident.FromLabels(s.lset)
		out = append(out, tstorage.SeriesIterator{ID: id, Values: &sliceIter{s: in, i: -1}})
	}
	return out, nil
}

func (m *memBackend) labelSets(ms []*labels.Matcher, start, end int64) []labels.Labels {
	var out []labels.Labels
	for _, s := range m.series {
		if !matchesAll(ms, s.lset) {
			continue
		}
		for _, smp := range s.samples {
			if smp.t >= start && smp.t <= end {
				out = append(out, s.lset)
				break
			}
		}
	}
	return out
}

func (m *memBackend) LabelNames(_ context.Context, _ string, ms []*labels.Matcher, start, end int64) ([]string, error) {
	if m.err != nil {
		return nil, m.err
	}
	var names []string
	for _, ls := range m.labelSets(ms, start, end) {
		ls.Range(func(l labels.Label) { names = append(names, l.Name) })
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

func (m *memBackend) LabelValues(_ context.Context, _ string, name string, ms []*labels.Matcher, start, end int64) ([]string, error) {
	if m.err != nil {
		return nil, m.err
	}
	var vals []string
	for _, ls := range m.labelSets(ms, start, end) {
		if v := ls.Get(name); v != "" {
			vals = append(vals, v)
		}
	}
	slices.Sort(vals)
	return slices.Compact(vals), nil
}

func (m *memBackend) recorded() []memQuery {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.queries)
}

// sliceIter is an encoding.Iterator over a slice.
type sliceIter struct {
	s   []tsample
	i   int
	err error
}

func (it *sliceIter) Next() bool {
	if it.i+1 >= len(it.s) {
		it.i = len(it.s)
		return false
	}
	it.i++
	return true
}

func (it *sliceIter) At() (int64, float64) { return it.s[it.i].t, it.s[it.i].v }
func (it *sliceIter) Err() error           { return it.err }
