package exemplars

import (
	"math"
	"testing"

	"github.com/prometheus/prometheus/model/exemplar"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/ident"
)

func qex(trace string, v float64, ts int64) exemplar.Exemplar {
	return exemplar.Exemplar{Labels: labels.FromStrings("trace_id", trace), Value: v, Ts: ts, HasTs: true}
}

// TestMergeDeduplicates: replicas holding the same exemplar give it once;
// exemplars differing in value, timestamp or labels all stay; series
// come out sorted, each one's exemplars oldest first.
func TestMergeDeduplicates(t *testing.T) {
	a := labels.FromStrings("__name__", "m", "job", "a")
	b := labels.FromStrings("__name__", "m", "job", "b")
	node1 := []exemplar.QueryResult{
		{SeriesLabels: b, Exemplars: []exemplar.Exemplar{qex("t1", 1, 10), qex("t2", 2, 20)}},
	}
	node2 := []exemplar.QueryResult{
		{SeriesLabels: a, Exemplars: []exemplar.Exemplar{qex("t9", 9, 5)}},
		{SeriesLabels: b, Exemplars: []exemplar.Exemplar{qex("t2", 2, 20), qex("t0", 0, 1), qex("t1", 1.5, 10), qex("t1b", 1, 10)}},
	}
	got := Merge(node1, node2, nil)
	require.Equal(t, []exemplar.QueryResult{
		{SeriesLabels: a, Exemplars: []exemplar.Exemplar{qex("t9", 9, 5)}},
		{SeriesLabels: b, Exemplars: []exemplar.Exemplar{qex("t0", 0, 1), qex("t1", 1, 10), qex("t1", 1.5, 10), qex("t1b", 1, 10), qex("t2", 2, 20)}},
	}, got)
	require.Empty(t, Merge())
}

// TestMergeNaNValues: NaN never equals itself, so equality is by bits.
func TestMergeNaNValues(t *testing.T) {
	a := labels.FromStrings("__name__", "m")
	r := []exemplar.QueryResult{{SeriesLabels: a, Exemplars: []exemplar.Exemplar{qex("t", math.NaN(), 1)}}}
	got := Merge(r, r)
	require.Len(t, got, 1)
	require.Len(t, got[0].Exemplars, 1)
}

// TestSnapshotRebuilds: adding a snapshot into an empty store of the same
// size answers the same queries.
func TestSnapshotRebuilds(t *testing.T) {
	s := New(3)
	var items []Item
	for i := range 5 {
		ls := labels.FromStrings("__name__", "m", "i", string(rune('a'+i%2)))
		items = append(items, Item{SeriesID: ident.FromLabels(ls), Labels: labels.FromStrings("trace_id", string(rune('0'+i))), V: float64(i), T: int64(i)})
	}
	s.Add(items)
	snap := s.Snapshot()
	require.Len(t, snap, 3)
	r := New(3)
	r.Add(snap)
	all := []*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, "__name__", "m")}
	require.Equal(t, s.Select(math.MinInt64, math.MaxInt64, all), r.Select(math.MinInt64, math.MaxInt64, all))
}
