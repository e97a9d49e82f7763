package exemplars

import (
	"math"
	"sort"

	"github.com/prometheus/prometheus/model/exemplar"
	"github.com/prometheus/prometheus/model/labels"
)

// Merge joins the answers of several nodes to one query: series with the
// same labels become one, and an exemplar several replicas hold (same
// timestamp, value bits and labels) appears once. Series come out sorted
// by labels, each one's exemplars oldest first, as Store.Select answers.
func Merge(answers ...[]exemplar.QueryResult) []exemplar.QueryResult {
	type key struct {
		ts   int64
		bits uint64
		ls   string
	}
	type acc struct {
		res  exemplar.QueryResult
		seen map[key]bool
	}
	bySeries := map[string]*acc{}
	var order []*acc
	var buf []byte
	for _, ans := range answers {
		for _, r := range ans {
			buf = r.SeriesLabels.Bytes(buf[:0])
			a := bySeries[string(buf)]
			if a == nil {
				a = &acc{res: exemplar.QueryResult{SeriesLabels: r.SeriesLabels}, seen: map[key]bool{}}
				bySeries[string(buf)] = a
				order = append(order, a)
			}
			for _, e := range r.Exemplars {
				buf = e.Labels.Bytes(buf[:0])
				k := key{e.Ts, math.Float64bits(e.Value), string(buf)}
				if a.seen[k] {
					continue
				}
				a.seen[k] = true
				a.res.Exemplars = append(a.res.Exemplars, e)
			}
		}
	}
	out := make([]exemplar.QueryResult, len(order))
	for i, a := range order {
		sort.SliceStable(a.res.Exemplars, func(x, y int) bool { return a.res.Exemplars[x].Ts < a.res.Exemplars[y].Ts })
		out[i] = a.res
	}
	sort.Slice(out, func(a, b int) bool { return labels.Compare(out[a].SeriesLabels, out[b].SeriesLabels) < 0 })
	return out
}
