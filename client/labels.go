package client

import (
	"sort"

	"github.com/tessera-tsdb/tessera/dbnode/storage"
	"github.com/tessera-tsdb/tessera/ident"
)

// collectLabels lists label names (name == "") or the values of label
// name over series, sorted and unique.
func collectLabels(series []storage.SeriesIterator, name string) ([]string, error) {
	set := map[string]struct{}{}
	for _, s := range series {
		err := ident.Range(s.ID, func(n, v []byte) {
			if name == "" {
				set[string(n)] = struct{}{}
			} else if string(n) == name {
				set[string(v)] = struct{}{}
			}
		})
		if err != nil {
			return nil, err
		}
	}
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out, nil
}
