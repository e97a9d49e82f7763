package query

import (
	"math"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"
)

// TestMergePartials: groups with equal labels combine (counts exactly,
// Kahan sums continued so that 1e16 + 1 - 1e16 split over two replicas
// still gives 1), others are appended, and mismatched shapes are refused.
func TestMergePartials(t *testing.T) {
	a := &Result{Steps: 2, Series: 2, Groups: []Partial{
		{Labels: labels.FromStrings("g", "x"), Count: []float64{1, 0}, Sum: []float64{1e16, 0}, Comp: []float64{0, 0}},
	}}
	b := &Result{Steps: 2, Series: 3, NonCounters: []string{"m"}, Groups: []Partial{
		{Labels: labels.FromStrings("g", "x"), Count: []float64{2, 1}, Sum: []float64{1, 5}, Comp: []float64{0, 0}},
		{Labels: labels.FromStrings("g", "y"), Count: []float64{0, 1}, Sum: []float64{0, 7}, Comp: []float64{0, 0}},
	}}
	c := &Result{Steps: 2, Groups: []Partial{
		{Labels: labels.FromStrings("g", "x"), Count: []float64{1, 0}, Sum: []float64{-1e16, 0}, Comp: []float64{0, 0}},
	}}
	require.NoError(t, a.Merge(b))
	require.NoError(t, a.Merge(c))
	require.Equal(t, 5, a.Series)
	require.Equal(t, []string{"m"}, a.NonCounters)
	require.Len(t, a.Groups, 2)
	x := a.Groups[0]
	v, ok := x.Value(AggSum, 0)
	require.True(t, ok)
	require.Equal(t, 1.0, v, "the compensation carries the 1 lost next to 1e16")
	v, _ = x.Value(AggCount, 0)
	require.Equal(t, 4.0, v)
	v, _ = x.Value(AggAvg, 1)
	require.Equal(t, 5.0, v, "step 1: only b's value")
	_, ok = a.Groups[1].Value(AggSum, 0)
	require.False(t, ok, "y has no value at step 0")

	require.Error(t, a.Merge(&Result{Steps: 3}))
	require.Error(t, a.Merge(&Result{Steps: 2, Groups: []Partial{{Labels: labels.EmptyLabels(), Count: []float64{1}}}}))
	require.Error(t, a.Merge(&Result{Steps: 2, Groups: []Partial{{Labels: labels.FromStrings("g", "x"), Count: []float64{1, 1}}}}),
		"a count group merged into a sum group")
}

// Min and max partials merge as the engine compares: a NaN is replaced by
// any value, a value by one it beats; a group absent at a step takes the
// other's value.
func TestMergeMinMax(t *testing.T) {
	nan := math.NaN()
	for _, tc := range []struct {
		agg  Agg
		want []float64
	}{{AggMax, []float64{3, 2, 0, 7}}, {AggMin, []float64{1, 2, 0, 7}}} {
		a := &Result{Steps: 4, Series: 1, Groups: []Partial{{Labels: labels.FromStrings("g", "x"),
			Count: []float64{1, 1, 0, 2}, Sum: []float64{1, nan, 0, 7}, Comp: make([]float64, 4)}}}
		b := &Result{Steps: 4, Series: 2, Groups: []Partial{{Labels: labels.FromStrings("g", "x"),
			Count: []float64{2, 1, 0, 0}, Sum: []float64{3, 2, 0, 0}, Comp: make([]float64, 4)}}}
		require.NoError(t, a.MergeFor(tc.agg, b))
		require.Equal(t, 3, a.Series)
		for k, w := range tc.want {
			v, ok := a.Groups[0].Value(tc.agg, k)
			require.Equal(t, k != 2, ok, "step %d", k)
			if ok {
				require.Equal(t, w, v, "%s step %d", tc.agg, k)
			}
		}
	}
}

// Without an aggregation each partial is a series: the parts' are
// appended, and two with equal labels decline the request.
func TestMergeSeries(t *testing.T) {
	a := &Result{Steps: 1, Groups: []Partial{{Labels: labels.FromStrings("i", "a"), Count: []float64{1}, Sum: []float64{1}, Comp: []float64{0}}}}
	b := &Result{Steps: 1, Groups: []Partial{{Labels: labels.FromStrings("i", "b"), Count: []float64{1}, Sum: []float64{2}, Comp: []float64{0}}}}
	require.NoError(t, a.MergeFor(AggNone, b))
	require.Len(t, a.Groups, 2)
	require.ErrorIs(t, a.MergeFor(AggNone, b), ErrDeclined)
}
