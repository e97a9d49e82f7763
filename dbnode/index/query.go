package index

import (
	"fmt"
	"slices"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/prometheus/prometheus/model/labels"
)

// Query returns the IDs of the series that have data in a block overlapping
// [start, end] (ms, inclusive) and match all matchers, with Prometheus
// semantics: a label a series lacks has the value "", so {a!="x"}, {a=""}
// and {a=~".*"} match series without a, and regexps are anchored. No
// matchers match every series in range.
//
// The result is sorted by ID bytes without duplicates. The slices alias the
// index's memory: callers must not modify them. The error is non-nil only
// for a nil or invalid matcher.
func (ix *Index) Query(matchers []*labels.Matcher, start, end int64) ([][]byte, error) {
	ids, _, err := ix.query(matchers, start, end, false, true)
	return ids, err
}

// QueryTagged is Query also returning, beside each ID, the tag last
// recorded for it (InsertTagged; 0 if none).
func (ix *Index) QueryTagged(matchers []*labels.Matcher, start, end int64) ([][]byte, []uint32, error) {
	return ix.query(matchers, start, end, true, true)
}

// QueryTaggedUnsorted is QueryTagged answering in ref order instead of ID
// order: for a caller whose answer does not depend on the order (a count),
// it skips the sort (a sixth of a count over ten million series) and reads
// the series about in the order they were created, which is how they lie
// in memory.
func (ix *Index) QueryTaggedUnsorted(matchers []*labels.Matcher, start, end int64) ([][]byte, []uint32, error) {
	return ix.query(matchers, start, end, true, false)
}

func (ix *Index) query(matchers []*labels.Matcher, start, end int64, tagged, sorted bool) ([][]byte, []uint32, error) {
	p, err := newPlan(matchers)
	if err != nil {
		return nil, nil, fmt.Errorf("index query: %w", err)
	}
	ix.cutMu.RLock()
	defer ix.cutMu.RUnlock()

	set := ix.matching(p, start, end)
	n := set.GetCardinality()
	ids := make([]string, 0, n)
	var tags []uint32
	if tagged {
		tags = make([]uint32, 0, n)
		ix.series.each(set, func(ref uint32, id string) {
			ids = append(ids, id)
			tags = append(tags, ix.series.ids.tag(ref))
		})
	} else {
		ix.series.each(set, func(_ uint32, id string) { ids = append(ids, id) })
	}
	if sorted {
		sortIDsTags(ids, tags)
	}
	out := make([][]byte, len(ids))
	for i, id := range ids {
		out[i] = bytesOf(id)
	}
	return out, tags, nil
}

// matching returns the refs of the series matching p in any block
// overlapping [start, end]. The caller holds cutMu.RLock.
func (ix *Index) matching(p plan, start, end int64) *roaring.Bitmap {
	var res *roaring.Bitmap
	for _, b := range ix.overlapping(start, end) {
		b.mu.RLock()
		r := b.match(p, ix.series)
		b.mu.RUnlock()
		if res == nil {
			res = r
		} else {
			res.Or(r)
		}
	}
	if res == nil {
		res = roaring.New()
	}
	return res
}

// LabelNames returns the sorted label names of the series that have data in
// [start, end] and match all matchers; with no matchers, every name in
// range. Names whose only values are empty are not reported (Prometheus
// treats an empty value as an absent label).
func (ix *Index) LabelNames(matchers []*labels.Matcher, start, end int64) ([]string, error) {
	p, err := newPlan(matchers)
	if err != nil {
		return nil, fmt.Errorf("index label names: %w", err)
	}
	ix.cutMu.RLock()
	defer ix.cutMu.RUnlock()

	found := map[string]struct{}{}
	for _, b := range ix.overlapping(start, end) {
		b.mu.RLock()
		b.labelNames(p, len(matchers) == 0, ix.series, found)
		b.mu.RUnlock()
	}
	return sortedKeys(found), nil
}

// labelNames adds to found the names of b's series matching p. The caller
// holds b.mu.RLock.
func (b *block) labelNames(p plan, all bool, series *seriesTable, found map[string]struct{}) {
	if all {
		for name := range b.names {
			found[name] = struct{}{}
		}
		return
	}
	set := b.match(p, series)
	if set.IsEmpty() {
		return
	}
	if set.GetCardinality() < uint64(b.pairs) {
		// Few series: reading their IDs beats probing every label pair.
		series.each(set, func(_ uint32, id string) {
			rangeLabels(id, func(name, value string) {
				if value != "" {
					found[name] = struct{}{}
				}
			})
		})
		return
	}
	for name, vals := range b.names {
		if _, ok := found[name]; ok {
			continue
		}
		if vals.intersects(set) {
			found[name] = struct{}{}
		}
	}
}

// LabelValues returns the sorted non-empty values of label name among the
// series that have data in [start, end] and match all matchers.
func (ix *Index) LabelValues(name string, matchers []*labels.Matcher, start, end int64) ([]string, error) {
	p, err := newPlan(matchers)
	if err != nil {
		return nil, fmt.Errorf("index label values of %q: %w", name, err)
	}
	ix.cutMu.RLock()
	defer ix.cutMu.RUnlock()

	found := map[string]struct{}{}
	for _, b := range ix.overlapping(start, end) {
		b.mu.RLock()
		b.labelValues(name, p, len(matchers) == 0, ix.series, found)
		b.mu.RUnlock()
	}
	return sortedKeys(found), nil
}

// labelValues adds to found the values of name among b's series matching p.
// The caller holds b.mu.RLock.
func (b *block) labelValues(name string, p plan, all bool, series *seriesTable, found map[string]struct{}) {
	vals := b.names[name]
	if vals == nil || vals.len() == 0 {
		return
	}
	if all {
		vals.each(series, func(v string, _ postings) { found[v] = struct{}{} })
		return
	}
	set := b.match(p, series)
	if set.IsEmpty() {
		return
	}
	if set.GetCardinality() < uint64(vals.len()) {
		series.each(set, func(_ uint32, id string) {
			if v := labelValue(id, name); v != "" {
				found[v] = struct{}{}
			}
		})
		return
	}
	vals.each(series, func(v string, pl postings) {
		if _, ok := found[v]; !ok && pl.intersects(set) {
			found[v] = struct{}{}
		}
	})
}

func sortedKeys(m map[string]struct{}) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
