package promapi

import (
	"bytes"
	"slices"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/tessera-tsdb/tessera/dbnode/query"
)

// countGroups is one fast path worker's share of a count by (...): per
// group, how many of the worker's series have a value at each step.
// Counting in the workers, as they compute each series' steps, spares the
// step values of every series (a slab per 64 series) and a second pass
// over all of them on one goroutine (fastSet.aggregate); count by (mode)
// of node_cpu_seconds_total spent a tenth of its CPU, all of it serial,
// in that pass. A count is the same whatever order its series are added
// in (whole numbers far below 2^53), so the workers' partial counts add
// up to the engine's exactly; the groups' order and labels, which depend
// on the series order, come from the smallest series index of each group.
type countGroups struct {
	grouping []string
	// byID orders the groups by their smallest series ID instead of
	// their first series' index: the series came in the index's ref
	// order, and in ID order the first series of a group is the one with
	// the smallest ID.
	byID    bool
	steps   int
	index   map[uint64]*countGroup
	buf     []byte
	scratch []float64 // the current series' step values, reused
}

// countGroup is a group as one worker (then the merge) saw it.
type countGroup struct {
	key   uint64
	first int           // the index of the group's first series
	minID []byte        // the smallest ID of its series (countGroups.byID)
	lset  labels.Labels // its grouping labels, those of series first
	count []float64     // per step; 0: no series has a value
}

func newCountGroups(grouping []string, steps int) *countGroups {
	return &countGroups{grouping: grouping, steps: steps, index: map[uint64]*countGroup{}}
}

// floats is the room for one series' step values: they are counted
// (add) before the worker's next series needs the room.
func (c *countGroups) floats() []float64 {
	if cap(c.scratch) < c.steps {
		c.scratch = make([]float64, 0, c.steps)
	}
	return c.scratch[:0]
}

// add counts the values of fs, the series at index i, as the engine's
// count aggregation does: a value is present at a step when it is not a
// StaleNaN. A worker takes series in increasing index order, so a group's
// first series is the first the worker sees of it.
func (c *countGroups) add(i int, id []byte, fs *fastSeries) {
	var key uint64
	if len(c.grouping) > 0 {
		key, c.buf = fs.lset.HashForLabels(c.buf, c.grouping...)
	}
	g := c.index[key]
	if g == nil {
		g = &countGroup{key: key, first: i, minID: id, count: make([]float64, c.steps), lset: labels.EmptyLabels()}
		if len(c.grouping) > 0 {
			// A copy: fs.lset may be the worker's transient labels, which
			// Keep returns as they are when it drops nothing.
			g.lset = labels.NewBuilder(fs.lset).Keep(c.grouping...).Labels().Copy()
		}
		c.index[key] = g
	} else if c.byID && bytes.Compare(id, g.minID) < 0 {
		g.minID = id // the group's labels are the same for every series
	}
	cnt := g.count[fs.first : fs.first+len(fs.vals)]
	for k, v := range fs.vals {
		if !value.IsStaleNaN(v) {
			cnt[k]++
		}
	}
}

// mergeCounts adds up the workers' groups into the aggregation's output,
// in fastSeries form: groups in the order of their first series (the
// engine's order; with byID, of their smallest ID: the first in ID order),
// each labelled by that series, StaleNaN where a group has no value.
func mergeCounts(parts []*countGroups, steps int) []fastSeries {
	var (
		all   []*countGroup
		byKey = map[uint64]*countGroup{}
		byID  bool
	)
	for _, p := range parts {
		if p == nil {
			continue
		}
		byID = p.byID
		for key, g := range p.index {
			m := byKey[key]
			if m == nil {
				byKey[key] = g
				all = append(all, g)
				continue
			}
			if g.first < m.first {
				m.first, m.lset = g.first, g.lset
			}
			if bytes.Compare(g.minID, m.minID) < 0 {
				m.minID = g.minID
			}
			for k, n := range g.count {
				m.count[k] += n
			}
		}
	}
	if byID {
		slices.SortFunc(all, func(a, b *countGroup) int { return bytes.Compare(a.minID, b.minID) })
	} else {
		slices.SortFunc(all, func(a, b *countGroup) int { return a.first - b.first })
	}
	out := make([]fastSeries, 0, len(all))
	for _, g := range all {
		first := slices.IndexFunc(g.count, func(n float64) bool { return n != 0 })
		if first < 0 {
			continue
		}
		st := stepper{steps: steps, first: first, vals: make([]float64, 0, steps-first)}
		for step := first; step < steps; step++ {
			if g.count[step] != 0 {
				st.value(step, g.count[step])
			}
		}
		st.end()
		out = append(out, fastSeries{lset: g.lset, vals: st.vals, first: st.first, n: len(st.vals)})
	}
	return out
}

// countOut is the count's output once every series is counted: a series
// the engine fails on reading makes it evaluate the query, as aggregate
// does.
func (s *fastSet) countOut(parts []*countGroups) ([]fastSeries, error) {
	for i := range s.out {
		if s.out[i].err != nil {
			return nil, errFallback
		}
	}
	out := mergeCounts(parts, s.q.fast.steps())
	if s.spec.Agg == query.AggGroup {
		for i := range out {
			for k, v := range out[i].vals {
				if !value.IsStaleNaN(v) {
					out[i].vals[k] = 1 // a group with a series at the step
				}
			}
		}
	}
	return out, nil
}
