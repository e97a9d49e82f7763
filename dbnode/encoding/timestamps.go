package encoding

import "math/bits"

// tsCoder codes each timestamp after the first as the difference between
// its delta and the nominal interval: the first delta, and later any delta
// that repeated the one before it. Scrapes are scheduled at a fixed interval
// and jitter around that schedule without accumulating, so one late scrape
// costs two small codes (+j, -j) where delta-of-deltas would cost three
// (+j, -2j, +j). All arithmetic wraps, so any int64 timestamps work.
type tsCoder struct {
	t         int64
	delta     uint64 // last delta
	nominal   uint64
	haveDelta bool
}

func (c *tsCoder) next(delta uint64) {
	if delta == c.delta || !c.haveDelta {
		c.nominal = delta
	}
	c.delta, c.haveDelta = delta, true
}

// encode writes t, which must be after the last timestamp.
func (c *tsCoder) encode(w *bitWriter, t int64) {
	delta := uint64(t) - uint64(c.t)
	writeTimestampCode(w, int64(delta-c.nominal))
	c.next(delta)
	c.t = t
}

// decode reads the next timestamp; false if it is not after the last one.
func (c *tsCoder) decode(r *bitReader) (int64, bool) {
	delta := c.nominal + readTimestampCode(r)
	t := int64(uint64(c.t) + delta)
	if t <= c.t {
		return t, false
	}
	c.next(delta)
	c.t = t
	return t, true
}

// Timestamp codes: prefix of k ones then a zero (no zero after four ones),
// then a signed payload of tsPayload[k] bits. The 5-bit bucket fits scrape
// jitter of a few milliseconds; 14 bits a missed scrape or two.
var tsPayload = [5]uint{0, 5, 14, 24, 64}

func writeTimestampCode(w *bitWriter, x int64) {
	switch {
	case x == 0:
		w.writeBits(0, 1)
	case fitsSigned(x, 5):
		w.writeBits(0b10<<5|uint64(x)&(1<<5-1), 2+5)
	case fitsSigned(x, 14):
		w.writeBits(0b110<<14|uint64(x)&(1<<14-1), 3+14)
	case fitsSigned(x, 24):
		w.writeBits(0b1110<<24|uint64(x)&(1<<24-1), 4+24)
	default:
		w.writeBits(0b1111, 4)
		w.writeBits64(uint64(x), 64)
	}
}

func readTimestampCode(r *bitReader) uint64 {
	word := r.peek()
	ones := uint(bits.LeadingZeros64(^word))
	switch {
	case ones == 0:
		r.skip(1)
		return 0
	case ones >= 4:
		r.skip(4)
		return r.readBits64(64)
	default:
		k := tsPayload[ones]
		r.skip(ones + 1 + k)
		return signExtend(word<<(ones+1)>>(64-k), k)
	}
}
