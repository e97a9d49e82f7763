package encoding

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzHistogramIterator feeds arbitrary bytes to the histogram decoder: it
// must not panic, must stop within a bound set by the input size, must
// yield increasing timestamps and histograms whose buckets match their
// spans, and whatever it yields must survive a round trip.
func FuzzHistogramIterator(f *testing.F) {
	for _, in := range histConformanceCases() {
		f.Add(encodeHistStream(f, in))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		it := NewHistogramIterator(data)
		limit := 8*len(data) + 1 // every sample costs at least one bit
		var got []hsample
		n, last := 0, int64(0)
		for it.Next() {
			var s hsample
			if it.IsFloat() {
				s.t, s.fh = it.AtFloatHistogram(nil)
				np, _ := bucketCount(s.fh.PositiveSpans, nil)
				nn, _ := bucketCount(s.fh.NegativeSpans, nil)
				require.Equal(t, [2]uint64{np, nn}, [2]uint64{uint64(len(s.fh.PositiveBuckets)), uint64(len(s.fh.NegativeBuckets))})
			} else {
				s.t, s.h = it.AtHistogram(nil)
				require.NotNil(t, s.h)
				np, _ := bucketCount(s.h.PositiveSpans, nil)
				nn, _ := bucketCount(s.h.NegativeSpans, nil)
				require.Equal(t, [2]uint64{np, nn}, [2]uint64{uint64(len(s.h.PositiveBuckets)), uint64(len(s.h.NegativeBuckets))})
			}
			if n > 0 && s.t <= last {
				t.Fatalf("timestamp %d after %d", s.t, last)
			}
			n, last = n+1, s.t
			if n > limit {
				t.Fatalf("decoder does not stop: %d histograms from %d bytes", n, len(data))
			}
			if n <= 1<<12 {
				got = append(got, s)
			}
		}
		require.False(t, it.Next())
		if it.Err() != nil {
			require.ErrorIs(t, it.Err(), ErrCorrupt)
			return
		}
		requireHistSamples(t, got, NewHistogramIterator(encodeHistStream(t, got)), false)
	})
}
