package exemplars

import (
	"fmt"
	"unicode/utf8"

	"github.com/prometheus/prometheus/model/exemplar"
	"github.com/prometheus/prometheus/model/labels"
)

// CheckLabels refuses an exemplar whose label set is longer than
// OpenMetrics allows (exemplar.ExemplarMaxLabelSetLength UTF-8
// characters, names and values together), as Prometheus' exemplar
// storage does: it bounds the bytes one exemplar record can hold in the
// ring.
func CheckLabels(ls labels.Labels) error {
	n := 0
	ls.Range(func(l labels.Label) { n += utf8.RuneCountInString(l.Name) + utf8.RuneCountInString(l.Value) })
	if n > exemplar.ExemplarMaxLabelSetLength {
		return fmt.Errorf("exemplar labels of %d UTF-8 characters exceed OpenMetrics' limit of %d (exemplar.ExemplarMaxLabelSetLength)", n, exemplar.ExemplarMaxLabelSetLength)
	}
	return nil
}
