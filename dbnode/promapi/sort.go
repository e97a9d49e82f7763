package promapi

import (
	"slices"

	"github.com/prometheus/prometheus/model/labels"
)

// sortByLabels orders the indexes in order by labels.Compare of lsets,
// the order Prometheus' storage returns sorted series in.
func sortByLabels(order []int, lsets []labels.Labels) {
	slices.SortFunc(order, func(a, b int) int { return labels.Compare(lsets[a], lsets[b]) })
}
