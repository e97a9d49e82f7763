package encoding

import "math/bits"

// Golomb-Rice codes for the sealed form's integer residuals: zigzag z is
// written as q = z>>k one bits, a zero, then the low k bits of z. Residuals
// of sampled counters and gauges are roughly two-sided geometric, for which
// the best Rice code is within a fraction of a bit of their entropy. A
// quotient of riceEscape or more would make a long unary run, so it is
// written as riceEscape ones, 6 bits of (bit length - 1), and the bits.
const riceEscape = 24

func zigzag(x int64) uint64   { return uint64(x<<1) ^ uint64(x>>63) }
func unzigzag(z uint64) int64 { return int64(z>>1) ^ -int64(z&1) }

// riceLen is the size in bits of z's code with parameter k.
func riceLen(z uint64, k uint) uint {
	q := z >> k
	if q >= riceEscape {
		return riceEscape + 6 + uint(bits.Len64(z))
	}
	return uint(q) + 1 + k
}

func writeRice(w *bitWriter, z uint64, k uint) {
	q := z >> k
	if q >= riceEscape {
		n := uint(bits.Len64(z))
		w.writeBits((1<<riceEscape-1)<<6|uint64(n-1), riceEscape+6)
		w.writeBits(z, n)
		return
	}
	// q ones, a zero, k bits: at most 23+1+k bits.
	if q+1+uint64(k) <= 56 {
		w.writeBits((1<<q-1)<<(k+1)|z&(1<<k-1), uint(q)+1+k)
		return
	}
	w.writeBits((1<<q-1)<<1, uint(q)+1)
	w.writeBits(z&(1<<k-1), k)
}

func readRice(r *bitReader, k uint) uint64 {
	word := r.peek()
	q := uint(bits.LeadingZeros64(^word))
	if q >= riceEscape {
		n := uint(word>>(64-riceEscape-6)&0x3f) + 1
		r.skip(riceEscape + 6)
		return r.readBits64(n)
	}
	if q+1+k <= 57 {
		r.skip(q + 1 + k)
		return uint64(q)<<k | word<<(q+1)>>(63-k)>>1
	}
	r.skip(q + 1)
	return uint64(q)<<k | r.readBits64(k)
}

// bestRiceK returns the k in 0..62 with the smallest total code length for
// zs, and that length. The optimum sits near log2 of the mean, so only a few
// neighbours of that estimate are tried.
func bestRiceK(zs []uint64) (uint, uint64) {
	if len(zs) == 0 {
		return 0, 0
	}
	var sum float64
	for _, z := range zs {
		sum += float64(z)
	}
	est := 0
	if mean := sum / float64(len(zs)); mean >= 1 {
		est = bits.Len64(uint64(mean)) - 1
	}
	bestK, bestBits := uint(0), ^uint64(0)
	for k := max(0, est-2); k <= min(62, est+2); k++ {
		var n uint64
		for _, z := range zs {
			n += uint64(riceLen(z, uint(k)))
		}
		if n < bestBits {
			bestK, bestBits = uint(k), n
		}
	}
	return bestK, bestBits
}
