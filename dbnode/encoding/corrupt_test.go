package encoding

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// decoder is a decoder with the encoder output it reads, for corruption
// tests over both forms.
type decoder struct {
	name string
	open func([]byte) Iterator
	make func(t *testing.T, in []sample) []byte
}

var decoders = []decoder{
	{"stream", NewIterator, func(t *testing.T, in []sample) []byte { return encodeStream(t, in) }},
	{"sealed", NewSealedIterator, func(t *testing.T, in []sample) []byte {
		b, err := Seal(encodeStream(t, in))
		require.NoError(t, err)
		return b
	}},
}

// TestTruncationIsAnError cuts valid data at every length: a decoder must
// report corruption rather than a shorter series.
func TestTruncationIsAnError(t *testing.T) {
	for _, d := range decoders {
		t.Run(d.name, func(t *testing.T) {
			for name, in := range conformanceCases() {
				if len(in) == 0 {
					continue
				}
				full := d.make(t, in)
				for n := 1; n < len(full); n++ {
					it := d.open(slices.Clone(full[:n]))
					got := drain(it)
					require.Error(t, it.Err(), "%s cut to %d of %d bytes gave %d samples", name, n, len(full), len(got))
					require.ErrorIs(t, it.Err(), ErrCorrupt)
				}
			}
		})
	}
}

func TestTrailingBytesAreAnError(t *testing.T) {
	for _, d := range decoders {
		t.Run(d.name, func(t *testing.T) {
			for name, in := range conformanceCases() {
				full := d.make(t, in)
				for _, tail := range [][]byte{{0}, {1}, {0, 0, 0, 0, 0, 0, 0, 0, 0}} {
					it := d.open(append(slices.Clone(full), tail...))
					drain(it)
					require.ErrorIs(t, it.Err(), ErrCorrupt, "%s + %x", name, tail)
				}
			}
		})
	}
}

func TestBadHeaders(t *testing.T) {
	for _, b := range [][]byte{
		{streamFormat}, {streamFormat, 1, 0, 0}, {0x7f, 0, 0, 0, 0},
		{streamFormat, 1, 0, 0, 0},                   // one sample promised, none there
		{streamFormat, 0xff, 0xff, 0xff, 0xff, 0xff}, // 4 billion promised
	} {
		it := NewIterator(b)
		require.False(t, it.Next())
		require.ErrorIs(t, it.Err(), ErrCorrupt, "%x", b)
	}
	for _, b := range [][]byte{
		{}, {sealedFormat}, {0x7f, 0}, {sealedFormat, 0, 0}, {sealedFormat, 1},
		{sealedFormat, 1, 8, 0, 0, 0, 0, 0, 0, 0, 0, 9}, // unknown value kind
		{sealedFormat, 0x80},
	} {
		it := NewSealedIterator(b)
		require.False(t, it.Next())
		require.ErrorIs(t, it.Err(), ErrCorrupt, "%x", b)
	}
}
