package encoding

import (
	"testing"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/stretchr/testify/require"
)

func testIntHist(i int) *histogram.Histogram {
	return &histogram.Histogram{
		Schema: 1, ZeroThreshold: 0.001, ZeroCount: uint64(i), Count: uint64(3*i + 2), Sum: float64(i) * 1.5,
		PositiveSpans: spans(0, 2), PositiveBuckets: []int64{int64(i + 1), int64(i) + 0},
	}
}

// Merging keeps time order across kinds, and later inputs win ties.
func TestMergeHistogramIterators(t *testing.T) {
	a := hAt(testIntHist(1), testIntHist(2), testIntHist(3)) // t0, t1, t2
	b := []hsample{{t: a[1].t, fh: testIntHist(9).ToFloat(nil)}, {t: a[2].t + 1, fh: testIntHist(8).ToFloat(nil)}}
	it := MergeHistogramIterators(NewHistogramIterator(encodeHistStream(t, a)), NewHistogramIterator(encodeHistStream(t, b)))
	want := []hsample{a[0], b[0], a[2], b[1]}
	requireHistSamples(t, want, it, false)

	// Re-encoding cuts a stream at each change of kind.
	it = MergeHistogramIterators(NewHistogramIterator(encodeHistStream(t, a)), NewHistogramIterator(encodeHistStream(t, b)))
	streams, n, err := EncodeHistograms(it)
	require.NoError(t, err)
	require.Equal(t, 4, n)
	require.Len(t, streams, 4)
}

// A payload without histograms is the sealed form itself (old filesets
// read unchanged); with them, both parts come back.
func TestPayloadRoundTrip(t *testing.T) {
	var e Encoder
	require.NoError(t, e.Append(1000, 1.5))
	require.NoError(t, e.Append(2000, 2.5))
	sealed, err := Seal(e.Bytes())
	require.NoError(t, err)
	require.Equal(t, sealed, AppendPayload(nil, sealed, nil))

	empty, err := Seal(nil)
	require.NoError(t, err)
	require.Equal(t, empty, AppendPayload(nil, nil, nil))

	hs := hAt(testIntHist(1), testIntHist(2))
	for _, fl := range [][]byte{sealed, nil} {
		p := AppendPayload(nil, fl, [][]byte{encodeHistStream(t, hs[:1]), encodeHistStream(t, hs[1:])})
		fit, hit := PayloadIterators(p)
		if fl == nil {
			require.Nil(t, fit)
		} else {
			n := 0
			for fit.Next() {
				n++
			}
			require.NoError(t, fit.Err())
			require.Equal(t, 2, n)
		}
		requireHistSamples(t, hs, hit, false)
		// Every truncation is an error, never a panic or a shorter answer
		// taken for whole.
		for i := 1; i < len(p); i++ {
			_, _, err := SplitPayload(p[:i])
			if err == nil {
				// The cut fell inside the last stream's bytes only if the
				// length prefix still matched: impossible, lengths are exact.
				t.Fatalf("truncation at %d of %d accepted", i, len(p))
			}
			require.ErrorIs(t, err, ErrCorrupt)
		}
	}
}

// FuzzPayload: any bytes give iterators that end (with or without an
// error wrapping ErrCorrupt), never a panic.
func FuzzPayload(f *testing.F) {
	hs := hAt(testIntHist(1), testIntHist(2))
	f.Add(AppendPayload(nil, nil, [][]byte{encodeHistStream(f, hs)}))
	f.Add([]byte{payloadContainer, 0, 1, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		fit, hit := PayloadIterators(data)
		if fit != nil {
			for i := 0; fit.Next(); i++ {
				require.LessOrEqual(t, i, 8*len(data))
			}
			if err := fit.Err(); err != nil {
				require.ErrorIs(t, err, ErrCorrupt)
			}
		}
		if hit != nil {
			for i := 0; hit.Next(); i++ {
				require.LessOrEqual(t, i, 8*len(data))
				_, _ = hit.AtFloatHistogram(nil)
			}
			if err := hit.Err(); err != nil {
				require.ErrorIs(t, err, ErrCorrupt)
			}
		}
	})
}
