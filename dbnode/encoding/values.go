package encoding

import "math/bits"

// noWindow marks the XOR window of valueCoder as unset.
const noWindow = 0xff

// valueCoder is the value half of the stream format, shared by the encoder
// and the decoders so that both sides evolve the same state.
//
// In integer mode a value v is the integer n with v == n/10^scale, and the
// coder writes the delta-of-delta of n, shifted right by a number of zero
// bits every recent delta-of-delta had: zero for constants and for counters
// at a steady rate, and a few bits for gauges that move in pages or blocks
// (kB*1024, multiples of 4096). In float mode it writes Gorilla XORs of the
// bit patterns. A change of mode, scale or shift is an escape code followed
// by a mode descriptor; see docs/format/encoding.md for the codes.
//
// The integer state survives a stretch of float mode: a counter that
// reports one NaN (a staleness marker) comes back to small delta-of-deltas.
//
// The words come first and the byte fields fill one word after them, so
// the coder is 32 bytes: every in-memory series holds one (Encoder). The
// encoder's count of decimals in a row (intRun) lives with the encoder's
// owner for the same reason.
type valueCoder struct {
	n     uint64 // last integer, wrapping arithmetic
	delta uint64 // last integer delta
	bits  uint64 // bit pattern of the last value, in every mode

	intMode  bool
	intValid bool  // scale, shift, n and delta hold integer state
	scale    uint8 // of the integer state
	shift    uint8 // low zero bits of every integer delta-of-delta
	lead     uint8 // XOR window: leading zeros, or noWindow
	trail    uint8 // XOR window: trailing zeros

	// Encoder only.
	tzMin  uint8 // fewest trailing zeros of delta-of-deltas in this window
	tzSeen uint8 // non-zero delta-of-deltas in this window
}

func (c *valueCoder) reset() { *c = valueCoder{lead: noWindow, tzMin: 63} }

// carries reports whether integer mode at scale continues the integer
// state rather than starting from zero.
func (c *valueCoder) carries(scale uint8) bool { return c.intValid && scale >= c.scale }

// setMode applies a mode descriptor. Integer state carries over to the same
// or a larger scale, multiplied by the power of ten (wrapping), so the
// delta-of-deltas stay small across the change; otherwise it starts from
// zero. Float mode leaves the integer state alone.
func (c *valueCoder) setMode(intMode bool, scale, shift uint8) {
	c.intMode = intMode
	if !intMode {
		c.lead = noWindow
		return
	}
	if c.carries(scale) {
		p := pow10u[scale-c.scale]
		c.n *= p
		c.delta *= p
	} else {
		c.n, c.delta = 0, 0
	}
	c.intValid, c.scale, c.shift = true, scale, shift
	c.tzMin, c.tzSeen = 63, 0
}

// Mode descriptors: '0' float mode; '1' + 3 bits scale + 6 bits shift:
// integer mode.
func writeIntDescriptor(w *bitWriter, scale, shift uint8) {
	w.writeBits(1<<9|uint64(scale)<<6|uint64(shift), 10)
}

// Integer-mode delta-of-delta codes: prefix of k ones then a zero, then a
// signed payload of intPayload[k] bits. Six ones is the escape.
var intPayload = [6]uint{0, 7, 13, 20, 32, 64}

const intEscape = 0b111111

// intCodeLen is the size of an integer-mode code for x (already shifted).
func intCodeLen(x int64) uint {
	switch {
	case x == 0:
		return 1
	case fitsSigned(x, 7):
		return 2 + 7
	case fitsSigned(x, 13):
		return 3 + 13
	case fitsSigned(x, 20):
		return 4 + 20
	case fitsSigned(x, 32):
		return 5 + 32
	}
	return 6 + 64
}

// Float-mode codes: '0' same value, '10' XOR in the last window, '11' + 5
// bits of leading zeros + 6 bits of significant bits minus one: XOR in a new
// window. A window of 31 leading zeros and 64 significant bits cannot
// happen, so that code is the escape.
const floatEscape = 0b11<<11 | 31<<6 | 63

// fitsSigned reports whether x is representable in n-bit two's complement.
func fitsSigned(x int64, n uint) bool {
	return -(1<<(n-1)) <= x && x < 1<<(n-1)
}

// signExtend interprets the low n bits of x as n-bit two's complement.
func signExtend(x uint64, n uint) uint64 {
	return uint64(int64(x<<(64-n)) >> (64 - n))
}

// xorWindow returns the leading and trailing zeros of a non-zero XOR, the
// leading ones capped to fit 5 bits as in Gorilla.
func xorWindow(x uint64) (lead, trail uint8) {
	return min(uint8(bits.LeadingZeros64(x)), 31), uint8(bits.TrailingZeros64(x))
}
