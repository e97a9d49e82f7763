package exemplars

import (
	"testing"

	"github.com/prometheus/prometheus/model/exemplar"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/ident"
)

func item(series labels.Labels, trace string, v float64, t int64) Item {
	return Item{SeriesID: ident.FromLabels(series), Labels: labels.FromStrings("trace_id", trace), V: v, T: t}
}

func ex(trace string, v float64, t int64) exemplar.Exemplar {
	return exemplar.Exemplar{Labels: labels.FromStrings("trace_id", trace), Value: v, Ts: t, HasTs: true}
}

func TestSelectByMatchersAndTime(t *testing.T) {
	s := New(100)
	a := labels.FromStrings("__name__", "req", "job", "a")
	b := labels.FromStrings("__name__", "req", "job", "b")
	c := labels.FromStrings("__name__", "other")
	require.Equal(t, 5, s.Add([]Item{item(b, "3", 3, 30), item(a, "1", 1, 10), item(a, "2", 2, 20), item(c, "x", 9, 15), item(a, "0", 0, 5)}))
	// A retry of a series' newest exemplar is counted stored, not kept twice.
	require.Equal(t, 1, s.Add([]Item{item(a, "0", 0, 5)}))
	require.Equal(t, 5, s.Len())

	eq := labels.MustNewMatcher(labels.MatchEqual, "__name__", "req")
	require.Equal(t, []exemplar.QueryResult{
		{SeriesLabels: a, Exemplars: []exemplar.Exemplar{ex("0", 0, 5), ex("1", 1, 10), ex("2", 2, 20)}},
		{SeriesLabels: b, Exemplars: []exemplar.Exemplar{ex("3", 3, 30)}},
	}, s.Select(0, 100, []*labels.Matcher{eq}))
	require.Equal(t, []exemplar.QueryResult{ // sorted by series labels
		{SeriesLabels: c, Exemplars: []exemplar.Exemplar{ex("x", 9, 15)}},
		{SeriesLabels: a, Exemplars: []exemplar.Exemplar{ex("1", 1, 10)}},
	}, s.Select(10, 15, []*labels.Matcher{eq, labels.MustNewMatcher(labels.MatchEqual, "job", "a")},
		[]*labels.Matcher{labels.MustNewMatcher(labels.MatchRegexp, "__name__", "oth.*")}))
	require.Empty(t, s.Select(0, 100, []*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, "__name__", "nope")}))
}

// The ring keeps the newest exemplars; a series whose exemplars all aged
// out is forgotten.
func TestRingIsBounded(t *testing.T) {
	s := New(3)
	a := labels.FromStrings("__name__", "a")
	b := labels.FromStrings("__name__", "b")
	s.Add([]Item{item(a, "1", 1, 1), item(a, "2", 2, 2), item(b, "3", 3, 3), item(b, "4", 4, 4), item(b, "5", 5, 5)})
	require.Equal(t, 3, s.Len())
	all := []*labels.Matcher{labels.MustNewMatcher(labels.MatchRegexp, "__name__", ".+")}
	require.Equal(t, []exemplar.QueryResult{
		{SeriesLabels: b, Exemplars: []exemplar.Exemplar{ex("3", 3, 3), ex("4", 4, 4), ex("5", 5, 5)}},
	}, s.Select(0, 10, all))
	require.Len(t, s.series, 1, "series a aged out")
	// a's exemplar, equal to what a once had as newest, is stored again.
	require.Equal(t, 1, s.Add([]Item{item(a, "2", 2, 2)}))
	require.Len(t, s.Select(0, 10, all), 2)
}
