package query

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/util/kahansum"
)

// Pusher is a Reader that can also answer a Request where the data lives:
// the cluster session asks each shard's replicas for their partial
// aggregates, and a test splits a data set the same way.
//
// Push returns ErrDeclined, before reading any data where it can, when
// the request is not one it computes (no aggregation, a replica that
// cannot: native histograms, sums past float64's range); the caller then
// reads raw series through Query. Any other error is the query's.
type Pusher interface {
	Reader
	Push(ctx context.Context, req *Request) (*Result, error)
}

// ErrDeclined: the request is answered from raw series instead.
var ErrDeclined = errors.New("pushdown declined: read raw series")

// Result is a Request's answer: with an aggregation one Partial per group
// with a value at some step, without one a Partial per series with a
// value at some step (its values in Sum, Count 1 where it has one), in no
// particular order.
type Result struct {
	Steps  int
	Groups []Partial
	// Series is how many series were read (for the fetched-series limit).
	Series int
	// NonCounters name the metrics rate or increase read that do not look
	// like counters (the engine's PossibleNonCounterInfo); Warnings are
	// the evaluator's other annotations, as text.
	NonCounters, Warnings []string
	// Digest is the order-independent sum of a hash of every series' ID
	// and the samples read of it (promapi/digest.go): replicas that read
	// the same samples agree on it even where their partial sums differ in
	// the last bits (another series order), and a replica asked only for
	// it computes nothing. Merge adds the digests of disjoint parts.
	Digest uint64
	// DigestOnly: asked with Request.DigestOnly, the Groups are left out.
	DigestOnly bool
	// WireBytes is the size of the answer as it crossed the network (the
	// RPC client sets it; 0 for an answer computed in process).
	WireBytes int
}

// Partial is one group's partial aggregate over some of the series: at
// each step, how many series had a value (Count; 0: none; for sum only
// non-zero where some had one) and, for sum and avg, their Kahan sum (Sum, Comp: kahansum.Inc's running sum and
// compensation, in the evaluator's series order).
type Partial struct {
	Labels    labels.Labels // the grouping labels of the group's series
	Count     []float64
	Sum, Comp []float64
}

// Merge adds o, the answer of the same request over other series, into r:
// groups with equal labels are combined (counts added, exactly; Kahan sums
// continued with o's sum, then o's compensation added), the others
// appended.
func (r *Result) Merge(o *Result) error {
	return r.mergeGroups(o, nil, func(m, g *Partial) error {
		if (m.Sum == nil) != (g.Sum == nil) {
			return fmt.Errorf("merge pushdown results: group %s with and without sums", g.Labels)
		}
		for k := range m.Count {
			switch {
			case g.Count[k] == 0:
				continue
			case m.Count[k] == 0:
				m.Count[k] = g.Count[k]
				if m.Sum != nil {
					m.Sum[k], m.Comp[k] = g.Sum[k], g.Comp[k]
				}
				continue
			}
			m.Count[k] += g.Count[k]
			if m.Sum != nil {
				s, c := kahansum.Inc(g.Sum[k], m.Sum[k], m.Comp[k])
				m.Sum[k], m.Comp[k] = s, c+g.Comp[k]
			}
		}
		return nil
	})
}

// MergeFor is Merge for a request of agg: without an aggregation each
// Partial is one series (its step values in Sum, Count 1 where it has
// one), and the parts' series are appended; two with equal labels (the
// outputs of a function that drops metadata labels as well as the name)
// would be merged or refused by the engine, so the request is declined.
func (r *Result) MergeFor(agg Agg, o *Result) error {
	switch agg {
	case AggMin, AggMax:
		return r.mergeCompare(agg, o)
	case AggNone:
	default:
		return r.Merge(o)
	}
	return r.mergeGroups(o, nil, func(_, g *Partial) error {
		return fmt.Errorf("%w: two parts computed series %s", ErrDeclined, g.Labels)
	})
}

// mergeCompare merges min or max partials (the value in Sum): the
// engine's step for each of o's values, which replaces a NaN or a value
// it beats. Over the same values in another order the answer is the same
// but for which of equal values (0 and -0, NaN payloads) is kept.
func (r *Result) mergeCompare(agg Agg, o *Result) error {
	accept := func(g *Partial) error {
		if g.Sum == nil {
			return fmt.Errorf("merge pushdown results: %s group %s without values", agg, g.Labels)
		}
		return nil
	}
	return r.mergeGroups(o, accept, func(m, g *Partial) error {
		for k := range m.Count {
			switch {
			case g.Count[k] == 0:
				continue
			case m.Count[k] == 0:
				m.Count[k], m.Sum[k] = g.Count[k], g.Sum[k]
				continue
			}
			m.Count[k] += g.Count[k]
			if f := g.Sum[k]; CompareStep(agg, m.Sum[k], f) {
				m.Sum[k] = f
			}
		}
		return nil
	})
}

// mergeGroups is what every merge shares: o's counts, digest and notes
// added to r, and each of o's groups (checked, then accepted when accept
// is nil or says so) appended when r has none of its labels, else handed
// to combine with r's group of those labels.
func (r *Result) mergeGroups(o *Result, accept func(g *Partial) error, combine func(m, g *Partial) error) error {
	if o.Steps != r.Steps {
		return fmt.Errorf("merge pushdown results: %d steps and %d", r.Steps, o.Steps)
	}
	r.Series += o.Series
	r.Digest += o.Digest
	r.NonCounters = append(r.NonCounters, o.NonCounters...)
	r.Warnings = append(r.Warnings, o.Warnings...)
	index := make(map[uint64][]int, len(r.Groups)+len(o.Groups))
	for i := range r.Groups {
		h := r.Groups[i].Labels.Hash()
		index[h] = append(index[h], i)
	}
	for _, g := range o.Groups {
		if err := g.check(r.Steps); err != nil {
			return err
		}
		if accept != nil {
			if err := accept(&g); err != nil {
				return err
			}
		}
		h := g.Labels.Hash()
		i := slices.IndexFunc(index[h], func(i int) bool { return labels.Equal(r.Groups[i].Labels, g.Labels) })
		if i < 0 {
			index[h] = append(index[h], len(r.Groups))
			r.Groups = append(r.Groups, g)
			continue
		}
		if err := combine(&r.Groups[index[h][i]], &g); err != nil {
			return err
		}
	}
	return nil
}

// CompareStep is the engine's min or max step for floats: whether f
// replaces the group's value v.
func CompareStep(agg Agg, v, f float64) bool {
	if agg == AggMax {
		return v < f || math.IsNaN(v)
	}
	return v > f || math.IsNaN(v)
}

func (p *Partial) check(steps int) error {
	if len(p.Count) != steps || (p.Sum != nil && (len(p.Sum) != steps || len(p.Comp) != steps)) {
		return fmt.Errorf("pushdown result: group %s has %d counts and %d sums for %d steps", p.Labels, len(p.Count), len(p.Sum), steps)
	}
	return nil
}

// Value is the aggregation's value of the group at step, false where no
// series had one: the engine's output for the whole group when the
// partial covers every series.
func (p *Partial) Value(agg Agg, step int) (float64, bool) {
	n := p.Count[step]
	if n == 0 {
		return 0, false
	}
	switch agg {
	case AggCount, AggCountValues:
		return n, true
	case AggGroup:
		return 1, true
	case AggSum:
		return p.Sum[step] + p.Comp[step], true
	case AggAvg:
		return p.Sum[step]/n + p.Comp[step]/n, true
	case AggNone, AggMin, AggMax:
		return p.Sum[step], true // one series' value, the group's min or max
	}
	return 0, false
}
