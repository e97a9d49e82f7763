package promapi

import (
	"math"
	"testing"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/dbnode/encoding"
	tstorage "github.com/tessera-tsdb/tessera/dbnode/storage"
	"pgregory.net/rapid"
)

// newMixedIterator is the engine's iterator of a series with floats
// fl and histograms h, as seriesset builds it.
func newMixedIterator(fl encoding.Iterator, h encoding.HistogramIterator) *sampleIterator {
	return newSampleIterator(tstorage.SeriesIterator{Values: fl, Histograms: h}.Samples())
}

// TestMixedIteratorMatchesPrometheus drives sampleIterator and Prometheus'
// list iterator over the same series of floats, integer and float
// histograms with random Next/Seek sequences: same types, timestamps,
// values and histograms, the Seek contract included.
func TestMixedIteratorMatchesPrometheus(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(0, 30).Draw(t, "n")
		var fl []tsample
		var ref []chunks.Sample
		var enc []*encoding.HistogramEncoder
		ts := int64(rapid.IntRange(-50, 50).Draw(t, "t0"))
		for i := range n {
			ts += int64(rapid.IntRange(1, 20).Draw(t, "dt"))
			h := &histogram.Histogram{Count: uint64(i + 1), Sum: float64(i), PositiveSpans: []histogram.Span{{Length: 1}}, PositiveBuckets: []int64{int64(i + 1)}}
			switch rapid.IntRange(0, 2).Draw(t, "type") {
			case 0:
				fl = append(fl, tsample{ts, float64(i) + 0.5})
				ref = append(ref, fsample{ts, float64(i) + 0.5})
				continue
			case 1:
				ref = append(ref, msample{t: ts, h: h})
				if len(enc) == 0 || enc[len(enc)-1].IsFloat() {
					enc = append(enc, encoding.NewHistogramEncoder())
				}
				require.NoError(t, enc[len(enc)-1].AppendHistogram(ts, h))
			case 2:
				ref = append(ref, msample{t: ts, fh: h.ToFloat(nil)})
				if len(enc) == 0 || !enc[len(enc)-1].IsFloat() {
					enc = append(enc, encoding.NewHistogramEncoder())
				}
				require.NoError(t, enc[len(enc)-1].AppendFloatHistogram(ts, h.ToFloat(nil)))
			}
		}
		var hits []encoding.HistogramIterator
		for _, e := range enc {
			hits = append(hits, encoding.NewHistogramIterator(e.Bytes()))
		}
		want := storage.NewListSeriesIterator(storage.Samples(chunks.SampleSlice(ref)))
		got := newMixedIterator(&sliceIter{s: fl, i: -1}, encoding.MergeHistogramIterators(hits...))
		if rapid.Bool().Draw(t, "peek") {
			// A peek at the start changes nothing the engine sees.
			_ = got.Peek()
		}
		for range rapid.IntRange(1, 40).Draw(t, "ops") {
			var w, g chunkenc.ValueType
			if rapid.Bool().Draw(t, "seek") {
				target := int64(rapid.IntRange(-60, 700).Draw(t, "target"))
				w, g = want.Seek(target), got.Seek(target)
			} else {
				w, g = want.Next(), got.Next()
			}
			require.Equal(t, w, g)
			if w != chunkenc.ValNone {
				require.Equal(t, want.AtT(), got.AtT())
			}
			switch w {
			case chunkenc.ValFloat:
				_, wv := want.At()
				_, gv := got.At()
				require.Equal(t, math.Float64bits(wv), math.Float64bits(gv))
			case chunkenc.ValHistogram:
				_, wh := want.AtHistogram(nil)
				_, gh := got.AtHistogram(nil)
				require.Equal(t, wh.String(), gh.String())
			case chunkenc.ValFloatHistogram:
				_, wh := want.AtFloatHistogram(nil)
				_, gh := got.AtFloatHistogram(nil)
				require.Equal(t, wh.String(), gh.String())
			}
		}
		require.NoError(t, got.Err())
	})
}

// At a timestamp holding both a float and a histogram, the histogram is
// the one sample returned.
func TestMixedIteratorHistogramWinsTimestamp(t *testing.T) {
	var e encoding.HistogramEncoder
	require.NoError(t, e.AppendHistogram(10, &histogram.Histogram{Count: 1, PositiveSpans: []histogram.Span{{Length: 1}}, PositiveBuckets: []int64{1}}))
	it := newMixedIterator(&sliceIter{s: []tsample{{5, 1}, {10, 2}, {15, 3}}, i: -1}, encoding.NewHistogramIterator(e.Bytes()))
	var got []chunkenc.ValueType
	for vt := it.Next(); vt != chunkenc.ValNone; vt = it.Next() {
		got = append(got, vt)
	}
	require.Equal(t, []chunkenc.ValueType{chunkenc.ValFloat, chunkenc.ValHistogram, chunkenc.ValFloat}, got)
	require.NoError(t, it.Err())
}
