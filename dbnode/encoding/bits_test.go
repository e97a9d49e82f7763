package encoding

import (
	"math/rand"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestBitWriterBytesShortSpare checks bytes() when the buffer has fewer
// than 8 spare bytes (it then stores only the pending bytes) against a
// writer whose buffer always has room, after every field.
func TestBitWriterBytesShortSpare(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for round := 0; round < 200; round++ {
		var small, roomy bitWriter
		small.reset(streamHeaderLen)
		roomy.grow(4096)
		roomy.reset(streamHeaderLen)
		for f := 0; f < 40; f++ {
			n := uint(r.Intn(65))
			v := r.Uint64()
			if n < 64 {
				v &= 1<<n - 1
			}
			small.writeBits(v, n)
			roomy.writeBits(v, n)
			got, want := small.bytes(), roomy.bytes()
			require.Equal(t, want, got, "round %d field %d", round, f)
			require.Equal(t, len(got), cap(got), "capacity clipped")
		}
	}
}

// TestBitWriterBytesKeepsSmallBuffer: a short stream whose pending bits fit
// the buffer's last spare bytes is read without growing the buffer.
func TestBitWriterBytesKeepsSmallBuffer(t *testing.T) {
	var w bitWriter
	w.reset(streamHeaderLen)
	c := w.cap()
	for int(w.n)+8 <= c {
		w.writeBits(0, 64) // whole words: len grows by 8, nothing pending
	}
	w.writeBits(1, 3) // pending bits, fewer than 8 spare bytes
	require.Less(t, w.cap()-int(w.n), 8)
	b := w.bytes()
	require.Equal(t, c, w.cap(), "buffer grew")
	require.Equal(t, byte(1<<5), b[len(b)-1])
}
