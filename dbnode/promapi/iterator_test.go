package promapi

import (
	"math"
	"testing"

	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// TestIteratorMatchesPrometheus drives floatIterator and Prometheus' own
// list iterator with the same random Next/Seek sequences and requires the
// same answers: the Seek contract (no effect when the current sample
// qualifies, never backwards, exhausted stays exhausted) is Prometheus'.
func TestIteratorMatchesPrometheus(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(0, 30).Draw(t, "n")
		var ss []tsample
		var ref []chunks.Sample
		ts := int64(rapid.IntRange(-50, 50).Draw(t, "t0"))
		for i := range n {
			ts += int64(rapid.IntRange(1, 20).Draw(t, "dt"))
			v := float64(i) + 0.5
			if i%7 == 3 {
				v = math.Float64frombits(value.StaleNaN)
			}
			ss = append(ss, tsample{ts, v})
			ref = append(ref, fsample{ts, v})
		}
		want := storage.NewListSeriesIterator(storage.Samples(chunks.SampleSlice(ref)))
		var got chunkenc.Iterator = newFloatIterator(nil, &sliceIter{s: ss, i: -1})
		if n > 0 && rapid.Bool().Draw(t, "peeked") {
			// The form Select hands out: the first sample already read.
			src := &sliceIter{s: ss, i: -1}
			src.Next()
			it := peekedIterator(src, ss[0].t, ss[0].v)
			got = &it
		}
		ops := rapid.IntRange(1, 40).Draw(t, "ops")
		for range ops {
			var w, g chunkenc.ValueType
			if rapid.Bool().Draw(t, "seek") {
				target := int64(rapid.IntRange(-60, 700).Draw(t, "target"))
				w, g = want.Seek(target), got.Seek(target)
			} else {
				w, g = want.Next(), got.Next()
			}
			require.Equal(t, w, g)
			if w == chunkenc.ValFloat {
				wt, wv := want.At()
				gt, gv := got.At()
				require.Equal(t, wt, gt)
				require.Equal(t, math.Float64bits(wv), math.Float64bits(gv), "values pass through bit for bit")
				require.Equal(t, wt, got.AtT())
			}
		}
		require.NoError(t, got.Err())
	})
}

func TestIteratorReuseAndErrors(t *testing.T) {
	it := newFloatIterator(nil, &sliceIter{s: []tsample{{1, 1}}, i: -1})
	require.Equal(t, chunkenc.ValFloat, it.Next())
	require.Equal(t, chunkenc.ValNone, it.Next())
	reused := newFloatIterator(it, &sliceIter{s: []tsample{{5, 2}}, i: -1})
	require.Same(t, it, reused)
	require.Equal(t, chunkenc.ValFloat, reused.Seek(3))
	tt, v := reused.At()
	require.Equal(t, int64(5), tt)
	require.Equal(t, 2.0, v)
	require.Equal(t, int64(0), reused.AtST())

	boom := &sliceIter{err: errBoom}
	bad := newFloatIterator(nil, boom)
	require.Equal(t, chunkenc.ValNone, bad.Next())
	require.ErrorIs(t, bad.Err(), errBoom)
}

var errBoom = errorString("boom")

type errorString string

func (e errorString) Error() string { return string(e) }
