package encoding

import (
	"math"
	"math/bits"
)

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
	if word>>51 == floatEscape {
		r.skip(13)
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
		c.setMode(false, 0, 0)
		word = r.peek()
		if word>>51 == floatEscape {
			return 0, false
		}
		return c.readXOR(r, word, uint(bits.LeadingZeros64(^word)))
	}
	s, shift := uint8(word>>60&0b111), uint8(word>>54&0x3f)
	if s > maxScale {
		return 0, false
	}
	r.skip(10)
	c.setMode(true, s, shift)
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
		dod = r.readBits64(64) << c.shift
	default:
		k := intPayload[ones]
		dod = signExtend(word<<(ones+1)>>(64-k), k) << c.shift
		r.skip(ones + 1 + k)
	}
	c.delta += dod
	c.n += c.delta
	v := fromInt(int64(c.n), c.scale)
	c.bits = math.Float64bits(v)
	return v
}

// readXOR reads a float-mode value (not the escape) whose code starts with
// ones one bits; word is r.peek().
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
		lead := uint8(word >> 57 & 0x1f)
		sig := uint8(word>>51&0x3f) + 1
		if lead+sig > 64 {
			return 0, false
		}
		r.skip(13)
		c.lead, c.trail = lead, 64-lead-sig
		c.bits ^= r.readBits64(uint(sig)) << c.trail
	}
	return math.Float64frombits(c.bits), true
}
