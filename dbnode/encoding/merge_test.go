package encoding

import (
	"errors"
	"math"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// sliceIterator replays samples, then an optional error.
type sliceIterator struct {
	s   []sample
	i   int
	err error
}

func (it *sliceIterator) Next() bool {
	if it.i >= len(it.s) {
		return false
	}
	it.i++
	return true
}
func (it *sliceIterator) At() (int64, float64) { s := it.s[it.i-1]; return s.t, s.v }
func (it *sliceIterator) Err() error {
	if it.i >= len(it.s) {
		return it.err
	}
	return nil
}

func TestMerge(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   [][]sample
		want []sample
	}{
		{"none", nil, nil},
		{"all empty", [][]sample{nil, nil}, nil},
		{"one", [][]sample{{{1, 1}, {2, 2}}}, []sample{{1, 1}, {2, 2}}},
		{"interleaved", [][]sample{{{1, 1}, {3, 3}, {5, 5}}, {{2, 2}, {4, 4}, {6, 6}}},
			[]sample{{1, 1}, {2, 2}, {3, 3}, {4, 4}, {5, 5}, {6, 6}}},
		{"disjoint blocks", [][]sample{{{10, 1}, {11, 1}}, {{1, 0}, {2, 0}}},
			[]sample{{1, 0}, {2, 0}, {10, 1}, {11, 1}}},
		{"duplicates: later argument wins", [][]sample{
			{{1, 10}, {2, 10}, {3, 10}},
			{{2, 20}, {3, 20}, {4, 20}},
			{{3, 30}, {5, 30}},
		}, []sample{{1, 10}, {2, 20}, {3, 30}, {4, 20}, {5, 30}}},
		{"duplicates with empty inputs between", [][]sample{{{1, 1}}, nil, {{1, 2}}, nil},
			[]sample{{1, 2}}},
		{"NaN payloads survive", [][]sample{{{1, staleNaN}}, {{2, math.Copysign(0, -1)}}},
			[]sample{{1, staleNaN}, {2, math.Copysign(0, -1)}}},
		{"extreme timestamps", [][]sample{{{math.MinInt64, 1}, {math.MaxInt64, 1}}, {{0, 2}, {math.MaxInt64, 2}}},
			[]sample{{math.MinInt64, 1}, {0, 2}, {math.MaxInt64, 2}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Through real streams, and through plain slices.
			var fromStreams, fromSlices []Iterator
			for _, s := range tc.in {
				fromStreams = append(fromStreams, NewIterator(encodeStream(t, s)))
				fromSlices = append(fromSlices, &sliceIterator{s: s})
			}
			requireSamples(t, tc.want, MergeIterators(fromStreams...))
			requireSamples(t, tc.want, MergeIterators(fromSlices...))
		})
	}
}

func TestMergeReportsFirstError(t *testing.T) {
	errA, errB := errors.New("a"), errors.New("b")
	it := MergeIterators(
		&sliceIterator{s: []sample{{1, 1}, {2, 2}, {3, 3}}},
		&sliceIterator{s: []sample{{1, 5}}, err: errA},
		&sliceIterator{s: []sample{{9, 9}}, err: errB},
	)
	got := drain(it)
	require.ErrorIs(t, it.Err(), errA)
	require.Equal(t, []sample{{1, 5}}, got, "merging stops at the error")

	full := encodeStream(t, at(1, 2, 3))
	it = MergeIterators(NewIterator(full), NewIterator(full[:len(full)-1]))
	drain(it)
	require.ErrorIs(t, it.Err(), ErrCorrupt)
	require.False(t, it.Next())
}

// TestMergeModel checks the merge against a map-based model: the value of
// each timestamp is the one from the last input that has it.
func TestMergeModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		k := rapid.IntRange(0, 6).Draw(rt, "inputs")
		model := map[int64]float64{}
		var its []Iterator
		for i := 0; i < k; i++ {
			ts := rapid.SliceOfDistinct(rapid.Int64Range(-50, 50), func(x int64) int64 { return x }).Draw(rt, "ts")
			sort.Slice(ts, func(a, b int) bool { return ts[a] < ts[b] })
			in := make([]sample, len(ts))
			for j, tt := range ts {
				in[j] = sample{tt, float64(i*1000 + j)}
				model[tt] = in[j].v
			}
			its = append(its, NewIterator(encodeStream(rt, in)))
		}
		var want []sample
		for tt, v := range model {
			want = append(want, sample{tt, v})
		}
		sort.Slice(want, func(a, b int) bool { return want[a].t < want[b].t })
		requireSamples(rt, want, MergeIterators(its...))
	})
}

// TestMergeTwoReportsFirstError: the two-input merge stops at an error of
// either input, as the heap merge does.
func TestMergeTwoReportsFirstError(t *testing.T) {
	errA := errors.New("a")
	for _, first := range []bool{true, false} {
		bad := &sliceIterator{s: []sample{{1, 5}}, err: errA}
		good := &sliceIterator{s: []sample{{1, 1}, {2, 2}, {3, 3}}}
		its := []Iterator{bad, good}
		if !first {
			its = []Iterator{good, bad}
		}
		it := MergeIterators(its...)
		got := drain(it)
		require.ErrorIs(t, it.Err(), errA)
		require.Len(t, got, 1, "merging stops at the error")
		require.False(t, it.Next())
	}
}

// TestConcat: inputs one after the other, stopping at an input's error.
func TestConcat(t *testing.T) {
	requireSamples(t, nil, ConcatIterators())
	requireSamples(t, []sample{{1, 1}, {2, 2}, {10, 3}, {11, 4}}, ConcatIterators(
		NewIterator(encodeStream(t, []sample{{1, 1}, {2, 2}})),
		NewIterator(nil),
		&sliceIterator{s: []sample{{10, 3}, {11, 4}}},
	))
	errA := errors.New("a")
	it := ConcatIterators(&sliceIterator{s: []sample{{1, 1}}, err: errA}, &sliceIterator{s: []sample{{5, 5}}})
	require.Equal(t, []sample{{1, 1}}, drain(it))
	require.ErrorIs(t, it.Err(), errA)
	require.False(t, it.Next())
}

func TestStreamFirstTimestamp(t *testing.T) {
	_, ok := StreamFirstTimestamp(nil)
	require.False(t, ok)
	_, ok = StreamFirstTimestamp(emptyStream)
	require.False(t, ok)
	for _, first := range []int64{math.MinInt64, -1, 0, 1_700_000_000_123, math.MaxInt64 - 1} {
		got, ok := StreamFirstTimestamp(encodeStream(t, []sample{{first, 1}, {first + 1, 2}}))
		require.True(t, ok)
		require.Equal(t, first, got)
	}
}
