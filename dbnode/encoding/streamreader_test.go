package encoding

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestStreamReaderMatchesNewIterator: one StreamReader reset over
// streams in turn (long, short, empty, a corrupt header, a cut body)
// yields what NewIterator yields for each: samples, and the error or
// none.
func TestStreamReaderMatchesNewIterator(t *testing.T) {
	enc := func(n int, step int64) []byte {
		e := NewEncoder()
		for i := range n {
			require.NoError(t, e.Append(1_000+int64(i)*step, math.Sin(float64(i))*float64(i%7)))
		}
		return append([]byte(nil), e.Bytes()...)
	}
	long := enc(500, 15_000)
	// An empty stream after a corrupt one: the reader forgets the error.
	streams := [][]byte{long, enc(1, 1), nil, {0x7f, 1, 0, 0, 0}, {}, long[:len(long)/2], enc(40, 30_000), {}}
	type result struct {
		ts  []int64
		vs  []float64
		err bool
	}
	drain := func(it Iterator) result {
		var r result
		for it.Next() {
			tt, v := it.At()
			r.ts, r.vs = append(r.ts, tt), append(r.vs, v)
		}
		r.err = it.Err() != nil
		return r
	}
	var sr StreamReader
	require.False(t, sr.Next()) // zero value: empty
	require.NoError(t, sr.Err())
	for i, s := range streams {
		sr.Reset(s)
		require.Equal(t, drain(NewIterator(s)), drain(&sr), "stream %d", i)
	}
	require.True(t, drain(NewIterator(streams[3])).err, "the corrupt header is refused")
	require.True(t, drain(NewIterator(streams[5])).err, "the cut stream fails")
}
