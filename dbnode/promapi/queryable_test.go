package promapi

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/stretchr/testify/require"
)

func pushdownBackend() *memBackend {
	b := &memBackend{}
	for _, s := range []struct{ job, inst string }{{"b", "1"}, {"a", "2"}, {"c", "1"}, {"a", "1"}} {
		b.add(labels.FromStrings("__name__", "up", "job", s.job, "instance", s.inst),
			tsample{100, 1}, tsample{200, 2}, tsample{300, 3})
	}
	b.add(labels.FromStrings("__name__", "up", "job", "late"), tsample{1000, 1})
	return b
}

func drain(t *testing.T, set storage.SeriesSet) (lsets []string, samples [][]tsample) {
	t.Helper()
	var it chunkenc.Iterator
	for set.Next() {
		s := set.At()
		lsets = append(lsets, s.Labels().String())
		it = s.Iterator(it)
		var ss []tsample
		for it.Next() == chunkenc.ValFloat {
			tt, v := it.At()
			ss = append(ss, tsample{tt, v})
		}
		require.NoError(t, it.Err())
		samples = append(samples, ss)
	}
	require.NoError(t, set.Err())
	return lsets, samples
}

func TestSelectPushesDownMatchersAndRange(t *testing.T) {
	b := pushdownBackend()
	q, err := NewQueryable(b, "default").Querier(0, 10_000)
	require.NoError(t, err)
	ms := []*labels.Matcher{
		labels.MustNewMatcher(labels.MatchEqual, "__name__", "up"),
		labels.MustNewMatcher(labels.MatchRegexp, "job", "a|c"),
	}
	set := q.Select(context.Background(), true, &storage.SelectHints{Start: 150, End: 250}, ms...)
	require.Empty(t, b.recorded(), "Select is lazy: nothing is read until the set is advanced")
	lsets, samples := drain(t, set)
	require.Equal(t, []memQuery{{matchers: ms, start: 150, end: 250}}, b.recorded())
	require.Equal(t, []string{
		`{__name__="up", instance="1", job="a"}`,
		`{__name__="up", instance="1", job="c"}`,
		`{__name__="up", instance="2", job="a"}`,
	}, lsets, "sorted by labels.Compare when asked")
	for _, ss := range samples {
		require.Equal(t, []tsample{{200, 2}}, ss)
	}

	// Without hints, the querier's own range; series without samples in it
	// are not reported.
	b2 := pushdownBackend()
	q2, _ := NewQueryable(b2, "default").Querier(500, 2000)
	lsets, _ = drain(t, q2.Select(context.Background(), false, nil, ms[0]))
	require.Equal(t, []string{`{__name__="up", job="late"}`}, lsets)
	require.Equal(t, []memQuery{{matchers: ms[:1], start: 500, end: 2000}}, b2.recorded())
}

func TestSelectLimitAndUnsorted(t *testing.T) {
	b := pushdownBackend()
	q, _ := NewQueryable(b, "default").Querier(0, 10_000)
	m := labels.MustNewMatcher(labels.MatchEqual, "__name__", "up")
	lsets, _ := drain(t, q.Select(context.Background(), false, &storage.SelectHints{Start: 0, End: 10_000, Limit: 2}, m))
	require.Len(t, lsets, 2)
	lsets, _ = drain(t, q.Select(context.Background(), false, &storage.SelectHints{Start: 0, End: 10_000}, m))
	require.Len(t, lsets, 5)
	require.False(t, slices.IsSorted(lsets), "the fake answers out of label order; unsorted selects keep it")
}

func TestSelectEngineHints(t *testing.T) {
	srv, b := newMemAPI(t, Options{})
	ts := testBase + 30*60*1000
	code, r := get(t, srv.URL, "/api/v1/query", url.Values{
		"query": {`sum by (job) (rate(x{job=~"a|b"}[5m]))`}, "time": {fmtTime(ts, false)}})
	require.Equal(t, http.StatusOK, code, r.Error)
	rec := b.recorded()
	require.Len(t, rec, 1)
	require.Equal(t, `[job=~"a|b" __name__="x"]`, matcherString(rec[0].matchers))
	require.Equal(t, ts, rec[0].end)
	require.True(t, rec[0].start >= ts-5*60*1000 && rec[0].start <= ts-5*60*1000+1, "start %d: the 5m window, no more", rec[0].start)
}

func matcherString(ms []*labels.Matcher) string {
	s := "["
	for i, m := range ms {
		if i > 0 {
			s += " "
		}
		s += m.String()
	}
	return s + "]"
}

// TestSeriesIteratedTwice covers the storage.Series contract the engine
// does not use today: a second Iterator re-reads the same samples.
func TestSeriesIteratedTwice(t *testing.T) {
	b := pushdownBackend()
	q, _ := NewQueryable(b, "default").Querier(0, 10_000)
	set := q.Select(context.Background(), false, nil,
		labels.MustNewMatcher(labels.MatchEqual, "job", "a"), labels.MustNewMatcher(labels.MatchEqual, "instance", "1"))
	require.True(t, set.Next())
	s := set.At()
	read := func() []tsample {
		it := s.Iterator(nil)
		var ss []tsample
		for it.Next() != chunkenc.ValNone {
			tt, v := it.At()
			ss = append(ss, tsample{tt, v})
		}
		require.NoError(t, it.Err())
		return ss
	}
	first := read()
	require.Equal(t, []tsample{{100, 1}, {200, 2}, {300, 3}}, first)
	require.Equal(t, first, read())
	require.False(t, set.Next())
}

func TestSelectCanceled(t *testing.T) {
	b := pushdownBackend()
	q, _ := NewQueryable(b, "default").Querier(0, 10_000)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	set := q.Select(ctx, false, nil, labels.MustNewMatcher(labels.MatchEqual, "__name__", "up"))
	require.False(t, set.Next())
	require.ErrorIs(t, set.Err(), context.Canceled)
}

func TestLabelQueriesPushDown(t *testing.T) {
	b := pushdownBackend()
	q, _ := NewQueryable(b, "default").Querier(0, 500)
	m := labels.MustNewMatcher(labels.MatchEqual, "job", "a")
	names, _, err := q.LabelNames(context.Background(), nil, m)
	require.NoError(t, err)
	require.Equal(t, []string{"__name__", "instance", "job"}, names)
	vals, _, err := q.LabelValues(context.Background(), "job", nil)
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b", "c"}, vals, "job=late has no sample in [0, 500]")
	vals, _, err = q.LabelValues(context.Background(), "job", &storage.LabelHints{Limit: 2})
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b"}, vals)
	require.NoError(t, q.Close())
}
