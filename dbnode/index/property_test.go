package index

import (
	"strconv"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

var (
	propNames   = []string{"__name__", "a", "b", "c"}
	propValues  = []string{"", "x", "y", "xy", "z", "X", "1"}
	propRegexps = []string{"x", "x|y", ".*", ".+", "", "x.*", "y?", "(x|z)y?", "X", "(?i)x", "x|", "[a-z]+", "1.*", "1|2|3", ".*y", "x.+|z"}
	propBlocks  = []int64{-10, 0, 10, 20}
)

// TestQueryMatchesModel checks Query, LabelNames and LabelValues against the
// brute-force model on random series sets, block memberships, retention
// cuts and matchers. A high-cardinality "id" label makes the
// filter-by-candidate path run too.
func TestQueryMatchesModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		ix, ref := New(10), newModel(10)
		hiCard := rapid.Bool().Draw(rt, "hiCard")
		floor, hasFloor := int64(0), false
		insert := func(i int) {
			var kv []string
			for _, name := range propNames {
				if rapid.IntRange(0, 3).Draw(rt, "omit") == 0 {
					continue
				}
				kv = append(kv, name, rapid.SampledFrom(propValues).Draw(rt, "value"))
			}
			if hiCard {
				kv = append(kv, "id", strconv.Itoa(i))
			}
			if len(kv) == 0 {
				return
			}
			id := sid(kv...)
			for _, b := range rapid.SliceOfN(rapid.SampledFrom(propBlocks), 1, 3).Draw(rt, "blocks") {
				require.NoError(rt, ix.Insert(id, b))
				if !hasFloor || b+10 > floor {
					ref.insert(id, b)
				}
			}
		}
		n := rapid.IntRange(0, 60).Draw(rt, "series")
		for i := range n {
			insert(i)
		}
		if rapid.Bool().Draw(rt, "drop") {
			floor, hasFloor = rapid.SampledFrom([]int64{-10, 0, 10, 20, 30}).Draw(rt, "dropBefore"), true
			ix.DropBlocksBefore(floor)
			ref.dropBefore(floor)
			for i := range rapid.IntRange(0, 10).Draw(rt, "more") {
				insert(n + i) // reuses freed refs
			}
		}
		require.Equal(rt, len(ref.series), ix.NumSeries())

		matcherNames := append([]string{"id", "missing"}, propNames...)
		for range 5 {
			var ms []*labels.Matcher
			for range rapid.IntRange(0, 3).Draw(rt, "matchers") {
				typ := labels.MatchType(rapid.IntRange(0, 3).Draw(rt, "type"))
				var v string
				if typ == labels.MatchRegexp || typ == labels.MatchNotRegexp {
					v = rapid.SampledFrom(propRegexps).Draw(rt, "regexp")
				} else {
					v = rapid.SampledFrom(propValues).Draw(rt, "value")
				}
				m, err := labels.NewMatcher(typ, rapid.SampledFrom(matcherNames).Draw(rt, "name"), v)
				require.NoError(rt, err)
				ms = append(ms, m)
			}
			start := rapid.Int64Range(-15, 35).Draw(rt, "start")
			end := start + rapid.Int64Range(-2, 30).Draw(rt, "len")

			got, err := ix.Query(ms, start, end)
			require.NoError(rt, err)
			require.Equal(rt, ref.query(rt, ms, start, end), asStrings(got), "query %v [%d,%d]", ms, start, end)

			names, err := ix.LabelNames(ms, start, end)
			require.NoError(rt, err)
			require.Equal(rt, ref.labelNames(rt, ms, start, end), names, "label names %v", ms)

			name := rapid.SampledFrom(matcherNames).Draw(rt, "valuesOf")
			vals, err := ix.LabelValues(name, ms, start, end)
			require.NoError(rt, err)
			require.Equal(rt, ref.labelValues(rt, name, ms, start, end), vals, "values of %s %v", name, ms)
		}
	})
}
