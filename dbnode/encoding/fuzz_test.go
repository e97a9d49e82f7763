package encoding

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// seedCorpus adds the encodings of every conformance case.
func seedCorpus(f *testing.F, sealed bool) {
	for _, in := range conformanceCases() {
		e := NewEncoder()
		for _, s := range in {
			require.NoError(f, e.Append(s.t, s.v))
		}
		b := e.Bytes()
		if sealed {
			var err error
			b, err = Seal(b)
			require.NoError(f, err)
		}
		f.Add(b)
	}
}

// checkDecoder feeds arbitrary bytes to a decoder: it must not panic, must
// stop within a bound set by the input size (plus extra for run-coded
// timestamps), must yield increasing timestamps, and whatever it yields must
// survive a round trip.
func checkDecoder(t *testing.T, data []byte, open func([]byte) Iterator, extra int) {
	it := open(data)
	// Every sample costs at least one bit of input (a sealed constant
	// series spends nothing on values), except in timestamp runs.
	limit := 8*len(data) + 1 + extra
	var got []sample // the first samples, for the round trip
	n, last := 0, int64(0)
	for it.Next() {
		ts, v := it.At()
		if n > 0 && ts <= last {
			t.Fatalf("timestamp %d after %d", ts, last)
		}
		n, last = n+1, ts
		if n > limit {
			t.Fatalf("decoder does not stop: %d samples from %d bytes", n, len(data))
		}
		if n <= 1<<16 {
			got = append(got, sample{ts, v})
		}
	}
	require.False(t, it.Next())
	if it.Err() != nil {
		require.ErrorIs(t, it.Err(), ErrCorrupt)
		return
	}
	requireSamples(t, got, NewIterator(encodeStream(t, got)))
}

func FuzzIterator(f *testing.F) {
	seedCorpus(f, false)
	f.Fuzz(func(t *testing.T, data []byte) { checkDecoder(t, data, NewIterator, 0) })
}

func FuzzSealedIterator(f *testing.F) {
	seedCorpus(f, true)
	f.Fuzz(func(t *testing.T, data []byte) { checkDecoder(t, data, NewSealedIterator, maxRunSamples) })
}

// FuzzRoundTrip turns arbitrary bytes into a series and checks that every
// codec gives it back bit for bit. Each sample takes 9 bytes: a shape byte
// choosing how the other 8 become a timestamp gap and a value, so that the
// fuzzer reaches integer mode, scale changes and XOR alike.
func FuzzRoundTrip(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("\x00\x01\x02\x03\x04\x05\x06\x07\x08\x41\x01\x02\x03\x04\x05\x06\x07\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var in []sample
		ts := int64(binary.LittleEndian.Uint64(append(data[:min(len(data), 8):min(len(data), 8)], make([]byte, 8)...)))
		for len(data) >= 9 {
			shape, x := data[0], binary.LittleEndian.Uint64(data[1:9])
			data = data[9:]
			var v float64
			switch shape & 7 {
			case 0, 1:
				v = math.Float64frombits(x)
			case 2:
				v = float64(int64(x))
			case 3:
				v = float64(int64(x)>>40) / pow10f[shape>>3%(maxScale+1)]
			case 4:
				v = float64(int64(int16(x)))
			case 5:
				v = staleNaN
			default:
				if len(in) > 0 {
					v = in[len(in)-1].v
				}
			}
			if len(in) > 0 {
				var gap uint64
				switch shape >> 6 {
				case 0:
					gap = 10_000
				case 1:
					gap = 10_000 + x>>61 - 4
				case 2:
					gap = 1 + x>>50
				default:
					gap = 1 + x>>1
				}
				if uint64(math.MaxInt64)-uint64(ts) < gap { // headroom, wrapping
					break
				}
				ts += int64(gap)
			}
			in = append(in, sample{ts, v})
		}
		for _, c := range codecs {
			requireSamples(t, in, c.encode(t, in))
		}
	})
}
