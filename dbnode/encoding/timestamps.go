package encoding

import "math/bits"

// tsCoder codes each timestamp after the first as its offset from where the
// scrape schedule puts it: the last sample's schedule time plus the nominal
// interval. Scrapes jitter around a fixed schedule without accumulating, so
// one late scrape costs one small code and the next is on schedule again
// (delta-of-deltas would spend three codes: +j, -2j, +j).
//
// The schedule follows the data: the first delta sets the interval, two
// equal deltas that differ from it set a new one (the scrape interval
// changed), and two equal non-zero offsets move the schedule (its phase
// changed). In both cases the current timestamp becomes the schedule. All
// arithmetic wraps, so any int64 timestamps work.
//
// It is five words and no flag: every encoder of an in-memory series holds
// one, and a "have a delta" bool would cost 8 bytes of padding. A delta is
// never 0 (timestamps strictly increase, so even a wrapped difference is
// not), so delta == 0 says there is none yet.
type tsCoder struct {
	t       int64  // last timestamp
	sched   uint64 // schedule time of the last timestamp
	nominal uint64 // interval
	delta   uint64 // last delta; 0: none yet
	off     uint64 // last offset from the schedule
}

func newTSCoder(first int64) tsCoder { return tsCoder{t: first, sched: uint64(first)} }

// advance moves the state past t, which was off from the schedule by off.
// t must be after the last timestamp (so the delta is not 0).
func (c *tsCoder) advance(t int64, off uint64) {
	delta := uint64(t) - uint64(c.t)
	c.sched += c.nominal
	switch {
	case c.delta == 0 || delta == c.delta && delta != c.nominal:
		c.nominal, c.sched = delta, uint64(t)
	case off != 0 && off == c.off:
		c.sched = uint64(t)
	}
	c.delta, c.off, c.t = delta, off, t
}

// encode writes t, which must be after the last timestamp.
func (c *tsCoder) encode(w *bitWriter, t int64) {
	writeTimestampCode(w, int64(c.offset(t)))
}

// offset returns t's offset from the schedule and advances past t.
func (c *tsCoder) offset(t int64) uint64 {
	off := uint64(t) - (c.sched + c.nominal)
	c.advance(t, off)
	return off
}

// decode reads the next timestamp; false if it is not after the last one.
func (c *tsCoder) decode(r *bitReader) (int64, bool) {
	return c.apply(readTimestampCode(r))
}

// apply advances past the timestamp at offset off from the schedule; false
// if it is not after the last one.
func (c *tsCoder) apply(off uint64) (int64, bool) {
	t := int64(c.sched + c.nominal + off)
	if t <= c.t {
		return t, false
	}
	c.advance(t, off)
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
		w.writeBits(uint64(x), 64)
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
