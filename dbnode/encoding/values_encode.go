package encoding

import (
	"math"
	"math/bits"
)

// Encoder policy, none of which the decoder needs to know.
const (
	// shiftWindow is how many non-zero delta-of-deltas the encoder
	// watches before it raises the shift, and shiftGain the fewest bits
	// per value a raise must save to pay for its 16-bit escape and
	// descriptor.
	shiftWindow = 8
	shiftGain   = 2
	// intRunToSwitch is how many decimals in a row make float mode switch
	// to integer mode even when one switch costs more than one XOR: a
	// float series such as a clock in seconds with sub-microsecond digits
	// is a 6-digit decimal one time in four, and must not flap.
	intRunToSwitch = 4
)

// encodeFirst writes the first value of a stream: a descriptor, then the
// value in that mode. run is the encoder's count of decimals in a row in
// float mode, kept beside the coder (see valueCoder).
func (c *valueCoder) encodeFirst(w *bitWriter, v float64, run *uint8) {
	c.reset()
	if n, s, ok := findScale(v); ok {
		c.enterInt(w, n, s)
	} else {
		c.enterFloat(w, v, run)
	}
}

// encode writes v after at least one earlier value; run as for
// encodeFirst.
func (c *valueCoder) encode(w *bitWriter, v float64, run *uint8) {
	vb := math.Float64bits(v)
	if c.intMode {
		if n, ok := toInt(v, c.scale); ok {
			c.writeInt(w, uint64(n))
			c.bits = vb
			return
		}
		// Not a decimal at this scale: a larger scale, or float mode.
		w.writeBits(intEscape, 6)
		if n, s, ok := findScale(v); ok {
			c.enterInt(w, n, s)
		} else {
			c.enterFloat(w, v, run)
		}
		return
	}
	if vb == c.bits {
		w.writeBits(0, 1)
		return
	}
	n, s, ok := findScale(v)
	if !ok {
		*run = 0
		c.writeXOR(w, vb)
		return
	}
	*run++
	if *run < intRunToSwitch && 13+c.enterIntLen(n, s) >= c.xorLen(vb) {
		c.writeXOR(w, vb)
		return
	}
	w.writeBits(floatEscape, 13)
	c.enterInt(w, n, s)
}

// enterShift is the shift integer mode starts with for n at scale: the
// carried shift if the first delta-of-delta allows it.
func (c *valueCoder) enterShift(n int64, scale uint8) (shift uint8, dod int64) {
	if !c.carries(scale) {
		return 0, n // from zero state: delta and delta-of-delta are n
	}
	p := pow10u[scale-c.scale]
	dod = int64(uint64(n) - c.n*p - c.delta*p)
	shift = c.shift
	if dod != 0 {
		shift = min(shift, uint8(bits.TrailingZeros64(uint64(dod))))
	}
	return shift, dod
}

// enterIntLen is the size of a descriptor and the first integer code.
func (c *valueCoder) enterIntLen(n int64, scale uint8) uint {
	shift, dod := c.enterShift(n, scale)
	return 10 + intCodeLen(dod>>shift)
}

// enterInt writes an integer-mode descriptor and n, the value at scale.
func (c *valueCoder) enterInt(w *bitWriter, n int64, scale uint8) {
	shift, _ := c.enterShift(n, scale)
	writeIntDescriptor(w, scale, shift)
	c.setMode(true, scale, shift)
	c.writeInt(w, uint64(n))
	c.bits = math.Float64bits(fromInt(n, scale))
}

// enterFloat writes a float-mode descriptor and v, and starts the count of
// decimals in a row.
func (c *valueCoder) enterFloat(w *bitWriter, v float64, run *uint8) {
	w.writeBits(0, 1)
	c.setMode(false, 0, 0)
	*run = 0
	c.writeXOR(w, math.Float64bits(v))
}

func (c *valueCoder) writeInt(w *bitWriter, n uint64) {
	delta := n - c.n
	dod := int64(delta - c.delta)
	c.n, c.delta = n, delta
	if dod != 0 {
		c.adjustShift(w, uint8(bits.TrailingZeros64(uint64(dod))))
		dod >>= c.shift // exact: the low bits are zero
	}
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
		w.writeBits(uint64(dod), 64)
	}
}

// adjustShift changes the shift before a delta-of-delta with tz trailing
// zeros is written: down at once if it has fewer, up once a window of them
// all had enough more to pay for the change.
func (c *valueCoder) adjustShift(w *bitWriter, tz uint8) {
	switch {
	case tz < c.shift:
	case c.tzSeen+1 < shiftWindow || min(c.tzMin, tz) < c.shift+shiftGain:
		c.tzMin = min(c.tzMin, tz)
		c.tzSeen++
		if c.tzSeen == shiftWindow {
			c.tzMin, c.tzSeen = 63, 0
		}
		return
	default:
		tz = min(c.tzMin, tz)
	}
	w.writeBits(intEscape, 6)
	writeIntDescriptor(w, c.scale, tz)
	c.shift, c.tzMin, c.tzSeen = tz, 63, 0
}

// xorLen is the size of the XOR code writeXOR would write for vb.
func (c *valueCoder) xorLen(vb uint64) uint {
	x := vb ^ c.bits
	if x == 0 {
		return 1
	}
	lead, trail := xorWindow(x)
	if c.lead != noWindow && lead >= c.lead && trail >= c.trail {
		return 2 + uint(64-c.lead-c.trail)
	}
	return 13 + uint(64-lead-trail)
}

// writeXOR writes the Gorilla XOR of vb against the last value.
func (c *valueCoder) writeXOR(w *bitWriter, vb uint64) {
	x := vb ^ c.bits
	c.bits = vb
	if x == 0 {
		w.writeBits(0, 1)
		return
	}
	lead, trail := xorWindow(x)
	if c.lead != noWindow && lead >= c.lead && trail >= c.trail {
		w.writeBits(0b10, 2)
		w.writeBits(x>>c.trail, uint(64-c.lead-c.trail))
		return
	}
	c.lead, c.trail = lead, trail
	sig := 64 - lead - trail // 1..64, stored minus one
	w.writeBits(0b11<<11|uint64(lead)<<6|uint64(sig-1), 2+11)
	w.writeBits(x>>trail, uint(sig))
}
