package query

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestFuncNames(t *testing.T) {
	for f := FuncSelect + 1; f < numFuncs; f++ {
		got, ok := FuncByName(f.String())
		require.True(t, ok, f.String())
		require.Equal(t, f, got)
	}
	_, ok := FuncByName("last_over_time")
	require.False(t, ok, "last_over_time keeps the metric name: not pushed down")
	_, ok = FuncByName("")
	require.False(t, ok)
	for a := AggNone + 1; a < numAggs; a++ {
		got, ok := AggByName(a.String())
		require.True(t, ok)
		require.Equal(t, a, got)
	}
	_, ok = AggByName("stddev")
	require.False(t, ok)
}

func TestRequestValidate(t *testing.T) {
	ok := Request{Steps: Steps{Start: 0, End: 60_000, Step: 15_000, Lookback: 300_000},
		Pushdown: Pushdown{Func: FuncRate, Range: 5 * time.Minute, Agg: AggSum, Grouping: []string{"a", "b"}}}
	require.NoError(t, ok.Validate())
	require.Equal(t, 5, ok.Steps.Count())
	s, e := ok.FetchRange()
	require.Equal(t, int64(-300_000), s)
	require.Equal(t, int64(60_000), e)
	for name, mut := range map[string]func(*Request){
		"unsorted grouping":    func(r *Request) { r.Grouping = []string{"b", "a"} },
		"grouping without agg": func(r *Request) { r.Agg = AggNone },
		"select with range":    func(r *Request) { r.Func = FuncSelect },
		"rate without range":   func(r *Request) { r.Range = 0 },
		"end before start":     func(r *Request) { r.Steps.End = -1 },
		"unknown func":         func(r *Request) { r.Func = numFuncs },
		"unknown agg":          func(r *Request) { r.Agg = numAggs },
	} {
		r := ok
		r.Grouping = []string{"a", "b"}
		mut(&r)
		require.Error(t, r.Validate(), name)
	}
}
