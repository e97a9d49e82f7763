package encoding

import "math/bits"

// Timestamp delta-of-delta codes: prefix of k ones then a zero (no zero after
// four ones), then a signed payload of tsPayload[k] bits. The 5-bit bucket
// fits scrape jitter of a few milliseconds; 14 bits a missed scrape or two.
var tsPayload = [5]uint{0, 5, 14, 24, 64}

func writeTimestampDoD(w *bitWriter, dod int64) {
	switch {
	case dod == 0:
		w.writeBits(0, 1)
	case fitsSigned(dod, 5):
		w.writeBits(0b10<<5|uint64(dod)&(1<<5-1), 2+5)
	case fitsSigned(dod, 14):
		w.writeBits(0b110<<14|uint64(dod)&(1<<14-1), 3+14)
	case fitsSigned(dod, 24):
		w.writeBits(0b1110<<24|uint64(dod)&(1<<24-1), 4+24)
	default:
		w.writeBits(0b1111, 4)
		w.writeBits64(uint64(dod), 64)
	}
}

func readTimestampDoD(r *bitReader) uint64 {
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
