package httpapi

import (
	"github.com/prometheus/prometheus/model/labels"
	"github.com/tessera-tsdb/tessera/dbnode/exemplars"
	"github.com/tessera-tsdb/tessera/dbnode/remote"
	"github.com/tessera-tsdb/tessera/ident"
)

// Exemplars is the node's exemplar store, for /api/v1/query_exemplars.
func (a *API) Exemplars() *exemplars.Store { return a.ex }

// addExemplars stores the exemplars a decoder found and returns how many
// were stored. Each one's series is series[e.Series]: the decoders decode
// a series carrying exemplars in full, so its ID is set.
func (a *API) addExemplars(series []remote.Series, exs []remote.Exemplar, pairs []ident.Pair) int {
	if len(exs) == 0 {
		return 0
	}
	items := make([]exemplars.Item, 0, len(exs))
	var b labels.ScratchBuilder
	for _, e := range exs {
		id := series[e.Series].ID
		if id == nil {
			continue
		}
		b.Reset()
		for _, p := range pairs[e.From:e.To] {
			b.Add(string(p.Name), string(p.Value))
		}
		b.Sort()
		items = append(items, exemplars.Item{SeriesID: id, Labels: b.Labels(), V: e.V, T: e.T})
	}
	n := a.ex.Add(items)
	a.m.exemplarsIn.Inc(int64(n))
	return n
}
