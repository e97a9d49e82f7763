package encoding

import (
	"math"
	"math/bits"
)

// noWindow marks the XOR window of valueCoder as unset.
const noWindow = 0xff

// valueCoder is the value half of the stream format, shared by the encoder
// and the decoders so that both sides evolve the same state.
//
// In integer mode a value v is the integer n with v == n/10^scale, and the
// coder writes the delta-of-delta of n: zero for constants and for counters
// at a steady rate. In float mode it writes Gorilla XORs of the bit
// patterns. A mode change is an escape code followed by a mode descriptor;
// see docs/format/encoding.md for the codes.
type valueCoder struct {
	intMode bool
	scale   uint8
	n       uint64 // last integer (integer mode), wrapping arithmetic
	delta   uint64 // last integer delta
	bits    uint64 // bit pattern of the last value, in every mode
	lead    uint8  // XOR window: leading zeros, or noWindow
	trail   uint8  // XOR window: trailing zeros
}

func (c *valueCoder) reset() { *c = valueCoder{lead: noWindow} }

// setMode applies a mode descriptor. Moving integer state to a larger
// scale multiplies it by the power of ten (wrapping), so the delta-of-deltas
// stay small across the change; every other change starts from zero.
func (c *valueCoder) setMode(intMode bool, scale uint8) {
	if intMode {
		if c.intMode && scale > c.scale {
			p := pow10u[scale-c.scale]
			c.n *= p
			c.delta *= p
		} else {
			c.n, c.delta = 0, 0
		}
	} else {
		c.lead = noWindow
	}
	c.intMode, c.scale = intMode, scale
}

// Integer-mode delta-of-delta codes: prefix of k ones then a zero, then a
// signed payload of intPayload[k] bits. Six ones is the escape.
var intPayload = [6]uint{0, 7, 13, 20, 32, 64}

const intEscape = 0b111111

// encodeFirst writes the first value of a stream: a descriptor, then the
// value in that mode.
func (c *valueCoder) encodeFirst(w *bitWriter, v float64) {
	c.reset()
	c.switchAndEncode(w, v)
}

// encode writes v after at least one earlier value.
func (c *valueCoder) encode(w *bitWriter, v float64) {
	vb := math.Float64bits(v)
	if c.intMode {
		if n, ok := toInt(v, c.scale); ok {
			c.writeInt(w, uint64(n))
			c.bits = vb
			return
		}
		w.writeBits(intEscape, 6)
	} else {
		if vb == c.bits {
			w.writeBits(0, 1)
			return
		}
		if _, _, ok := findScale(v); !ok {
			c.writeXOR(w, vb)
			return
		}
		w.writeBits(0b111, 3)
	}
	c.switchAndEncode(w, v)
}

// switchAndEncode writes a mode descriptor for v and v itself.
func (c *valueCoder) switchAndEncode(w *bitWriter, v float64) {
	vb := math.Float64bits(v)
	if n, s, ok := findScale(v); ok {
		w.writeBits(1<<3|uint64(s), 4)
		c.setMode(true, s)
		c.writeInt(w, uint64(n))
	} else {
		w.writeBits(0, 1)
		c.setMode(false, 0)
		c.writeXOR(w, vb)
	}
	c.bits = vb
}

func (c *valueCoder) writeInt(w *bitWriter, n uint64) {
	delta := n - c.n
	dod := int64(delta - c.delta)
	c.n, c.delta = n, delta
	switch {
	case dod == 0:
		w.writeBits(0, 1)
	case fitsSigned(dod, 7):
		w.writeBits(0b10<<7|uint64(dod)&(1<<7-1), 2+7)
	case fitsSigned(dod, 13):
		w.writeBits(0b110<<13|uint64(dod)&(1<<13-1), 3+13)
	case fitsSigned(dod, 20):
		w.writeBits(0b1110<<20|uint64(dod)&(1<<20-1), 4+20)
	case fitsSigned(dod, 32):
		w.writeBits(0b11110<<32|uint64(dod)&(1<<32-1), 5+32)
	default:
		w.writeBits(0b111110, 6)
		w.writeBits64(uint64(dod), 64)
	}
}

// writeXOR writes the Gorilla XOR of vb against the last value.
func (c *valueCoder) writeXOR(w *bitWriter, vb uint64) {
	x := vb ^ c.bits
	c.bits = vb
	if x == 0 {
		w.writeBits(0, 1)
		return
	}
	lead := uint8(bits.LeadingZeros64(x))
	trail := uint8(bits.TrailingZeros64(x))
	if c.lead != noWindow && lead >= c.lead && trail >= c.trail {
		w.writeBits(0b10, 2)
		w.writeBits64(x>>c.trail, uint(64-c.lead-c.trail))
		return
	}
	c.lead, c.trail = lead, trail
	sig := 64 - lead - trail // 1..64, stored minus one
	w.writeBits(0b110<<12|uint64(lead)<<6|uint64(sig-1), 3+12)
	w.writeBits64(x>>trail, uint(sig))
}

// fitsSigned reports whether x is representable in n-bit two's complement.
func fitsSigned(x int64, n uint) bool {
	return -(1<<(n-1)) <= x && x < 1<<(n-1)
}

// signExtend interprets the low n bits of x as n-bit two's complement.
func signExtend(x uint64, n uint) uint64 {
	return uint64(int64(x<<(64-n)) >> (64 - n))
}

// decodeFirst reads the first value of a stream.
func (c *valueCoder) decodeFirst(r *bitReader) (float64, bool) {
	c.reset()
	return c.decodeSwitch(r)
}

// decode reads a value after at least one earlier value. It returns false
// on a malformed code; running past the end shows in r.ok.
func (c *valueCoder) decode(r *bitReader) (float64, bool) {
	word := r.peek()
	ones := uint(bits.LeadingZeros64(^word))
	if c.intMode {
		if ones >= 6 {
			r.skip(6)
			return c.decodeSwitch(r)
		}
		return c.readInt(r, word, ones), true
	}
	if ones >= 3 {
		r.skip(3)
		return c.decodeSwitch(r)
	}
	return c.readXOR(r, word, ones)
}

// decodeSwitch reads a mode descriptor and the value after it. An escape
// right after a descriptor is malformed: it also bounds the work per value.
func (c *valueCoder) decodeSwitch(r *bitReader) (float64, bool) {
	word := r.peek()
	if word>>63 == 0 {
		r.skip(1)
		c.setMode(false, 0)
		word = r.peek()
		ones := uint(bits.LeadingZeros64(^word))
		if ones >= 3 {
			return 0, false
		}
		return c.readXOR(r, word, ones)
	}
	s := uint8(word >> 60 & 0b111)
	if s > maxScale {
		return 0, false
	}
	r.skip(4)
	c.setMode(true, s)
	word = r.peek()
	ones := uint(bits.LeadingZeros64(^word))
	if ones >= 6 {
		return 0, false
	}
	return c.readInt(r, word, ones), true
}

// readInt reads an integer delta-of-delta whose code starts with ones
// (< 6) one bits; word is r.peek().
func (c *valueCoder) readInt(r *bitReader, word uint64, ones uint) float64 {
	var dod uint64
	switch ones {
	case 0:
		r.skip(1)
	case 5:
		r.skip(6)
		dod = r.readBits64(64)
	default:
		k := intPayload[ones]
		dod = signExtend(word<<(ones+1)>>(64-k), k)
		r.skip(ones + 1 + k)
	}
	c.delta += dod
	c.n += c.delta
	v := fromInt(int64(c.n), c.scale)
	c.bits = math.Float64bits(v)
	return v
}

// readXOR reads a float-mode value whose code starts with ones (< 3) one
// bits; word is r.peek().
func (c *valueCoder) readXOR(r *bitReader, word uint64, ones uint) (float64, bool) {
	switch ones {
	case 0:
		r.skip(1)
	case 1:
		if c.lead == noWindow {
			return 0, false
		}
		r.skip(2)
		c.bits ^= r.readBits64(uint(64-c.lead-c.trail)) << c.trail
	default:
		lead := uint8(word >> 55 & 0x3f)
		sig := uint8(word>>49&0x3f) + 1
		if lead+sig > 64 {
			return 0, false
		}
		r.skip(15)
		c.lead, c.trail = lead, 64-lead-sig
		c.bits ^= r.readBits64(uint(sig)) << c.trail
	}
	return math.Float64frombits(c.bits), true
}
