package index

import (
	"strconv"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// TestLoaderMatchesModel: series loaded in bulk (some already in the
// index by Insert, some noted twice, some into blocks retention dropped)
// answer Query, LabelNames and LabelValues as the brute-force model says.
func TestLoaderMatchesModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		ix, ref := New(10), newModel(10)
		floor := rapid.Bool().Draw(rt, "floor")
		if floor {
			ix.DropBlocksBefore(0) // blocks before 0 are gone: loads into them are ignored
			ref.dropBefore(0)
		}
		hiCard := rapid.Bool().Draw(rt, "hiCard")
		l := ix.NewLoader()
		n := rapid.IntRange(0, 80).Draw(rt, "series")
		for i := range n {
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
				continue
			}
			id := sid(kv...)
			for _, b := range rapid.SliceOfN(rapid.SampledFrom(propBlocks), 1, 3).Draw(rt, "blocks") {
				if rapid.IntRange(0, 4).Draw(rt, "byInsert") == 0 {
					require.NoError(rt, ix.Insert(id, b))
				} else {
					require.NoError(rt, l.AddString(string(id), b))
				}
				if !floor || b+10 > 0 {
					ref.insert(id, b)
				}
			}
		}
		l.Finish()
		require.Equal(rt, len(ref.series), ix.NumSeries())
		matcherNames := append([]string{"id", "missing"}, propNames...)
		for range 5 {
			var ms []*labels.Matcher
			for range rapid.IntRange(0, 3).Draw(rt, "matchers") {
				typ := labels.MatchType(rapid.IntRange(0, 3).Draw(rt, "type"))
				v := rapid.SampledFrom(propValues).Draw(rt, "value")
				if typ == labels.MatchRegexp || typ == labels.MatchNotRegexp {
					v = rapid.SampledFrom(propRegexps).Draw(rt, "regexp")
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

// TestLoaderLargeBlockMatchesInsert: enough series for the parallel
// label collection (chunks merged by name) and for multi-series values of
// every size; the loaded index holds what Insert builds, value by value,
// and later Inserts into the loaded block find its values.
func TestLoaderLargeBlockMatchesInsert(t *testing.T) {
	const n = 20000
	id := func(i int) []byte {
		kv := []string{"__name__", "m" + strconv.Itoa(i%7), "group", strconv.Itoa(i / 100), "job", "bench", "series", strconv.Itoa(i)}
		if i%3 == 0 {
			kv = append(kv, "zone", "z"+strconv.Itoa(i%5))
		}
		return sid(kv...)
	}
	byInsert, loaded := New(10), New(10)
	l := loaded.NewLoader()
	for i := range n {
		require.NoError(t, byInsert.Insert(id(i), 0))
		require.NoError(t, l.AddString(string(id(i)), 3))
	}
	require.NoError(t, l.AddString(string(id(5)), 0)) // a repeat
	l.Finish()
	require.Equal(t, n, loaded.NumSeries())
	for _, name := range []string{"__name__", "group", "job", "series", "zone"} {
		want, err := byInsert.LabelValues(name, nil, 0, 9)
		require.NoError(t, err)
		got, err := loaded.LabelValues(name, nil, 0, 9)
		require.NoError(t, err)
		require.Equal(t, want, got, "values of %s", name)
		for _, v := range []string{want[0], want[len(want)/2], want[len(want)-1]} {
			ms := []*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, name, v)}
			w, err := byInsert.Query(ms, 0, 9)
			require.NoError(t, err)
			g, err := loaded.Query(ms, 0, 9)
			require.NoError(t, err)
			require.Equal(t, asStrings(w), asStrings(g), "%s=%q", name, v)
		}
	}
	// Writes after the load go through the loaded tables.
	extra := sid("__name__", "m1", "group", "7", "job", "bench", "series", "new")
	require.NoError(t, loaded.Insert(extra, 0))
	got, err := loaded.Query([]*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, "group", "7")}, 0, 9)
	require.NoError(t, err)
	require.Len(t, got, 101)
	got, err = loaded.Query([]*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, "series", "new")}, 0, 9)
	require.NoError(t, err)
	require.Equal(t, []string{string(extra)}, asStrings(got))
}

// TestLoaderRejectsMalformedID: AddString fails as Insert does.
func TestLoaderRejectsMalformedID(t *testing.T) {
	err := New(10).NewLoader().AddString("\xff\xff", 0)
	require.ErrorContains(t, err, "index insert")
}

// TestValueLoaderSharedHashTakesGeneralPath: two values whose hashes
// share part and tag (forced here; rare in life) are not taken for one
// value: each gets its own postings.
func TestValueLoaderSharedHashTakesGeneralPath(t *testing.T) {
	st := newSeriesTable()
	var fresh []uint32
	for i, v := range []string{"a", "b", "a"} {
		id := sid("x", v, "n", strconv.Itoa(i))
		h := st.hash(id)
		s := st.stripeOf(h)
		ref, _, err := st.create(s, h, id, "")
		require.NoError(t, err)
		fresh = append(fresh, ref)
	}
	const forced = 42 << 32
	pairs := []loadPair{{h: forced, idx: 0, rep: 0}, {h: forced, idx: 1, rep: 1}, {h: forced, idx: 2, rep: 0}}
	vs := newValues("x")
	var ld valueLoader
	require.Equal(t, 2, ld.load(vs, pairs, fresh, st))
	a, ok := vs.get("a", st)
	require.True(t, ok)
	require.NotNil(t, a.bm)
	require.Equal(t, []uint32{fresh[0], fresh[2]}, a.bm.ToArray())
	b, ok := vs.get("b", st)
	require.True(t, ok)
	require.Nil(t, b.bm)
	require.Equal(t, fresh[1], b.one)
}
