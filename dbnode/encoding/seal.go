package encoding

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"slices"
)

// Sealed form; the byte layout is in docs/format/encoding.md.
const (
	sealedFormat = 0x02

	valuesStream   = 0 // value codes of the stream form
	valuesIntegers = 1 // integers at one decimal scale, Rice-coded residuals

	orderConst = 0 // delta/g = bias always: no residuals
	orderDelta = 1 // residual = delta/g - bias
	orderDoD   = 2 // residual = delta/g - previous delta/g
)

// Seal re-encodes a stream (Encoder.Bytes output) into the sealed form that
// blocks are stored and streamed as. It fails if the stream is corrupt.
func Seal(stream []byte) ([]byte, error) {
	var s Sealer
	return s.Seal(nil, stream)
}

// Sealer seals streams reusing its scratch memory, for writers that seal
// many series in a row. The zero value is ready to use. Not safe for
// concurrent use.
type Sealer struct {
	it     streamIterator
	ts     []int64
	vs     []float64
	ns     []int64
	ds     []int64
	zs, z2 []uint64
	sel    []int64
	exc    []int
	w      bitWriter
}

// Seal appends the sealed form of stream to dst and returns the result.
func (s *Sealer) Seal(dst, stream []byte) ([]byte, error) {
	s.ts, s.vs = s.ts[:0], s.vs[:0]
	if len(stream) > 0 {
		if err := s.it.reset(stream); err != nil {
			return dst, fmt.Errorf("seal: %w", err)
		}
		s.ts = growCap(s.ts, int(s.it.left))
		s.vs = growCap(s.vs, int(s.it.left))
		for s.it.Next() {
			t, v := s.it.At()
			s.ts = append(s.ts, t)
			s.vs = append(s.vs, v)
		}
		if err := s.it.Err(); err != nil {
			return dst, fmt.Errorf("seal: read stream: %w", err)
		}
	}
	return s.seal(dst), nil
}

// growCap is slices.Grow capped: a corrupt header must not make Seal
// allocate gigabytes before it finds out.
func growCap[T any](s []T, n int) []T {
	return slices.Grow(s[:0], min(n, 1<<20))
}

// seal writes the sealed form of s.ts and s.vs.
func (s *Sealer) seal(out []byte) []byte {
	out = append(out, sealedFormat)
	out = binary.AppendUvarint(out, uint64(len(s.ts)))
	if len(s.ts) == 0 {
		return out
	}
	// Timestamps: a section of its own, byte aligned and independent of
	// the values, so that series scraped together carry identical bytes
	// that zstd turns into one long match.
	out = s.appendTimestamps(out)

	// Values: integers where most values are decimals of one scale,
	// unless the stream's value codes come out smaller: their buckets
	// adapt per value, which wins over one Rice parameter for bursty
	// series (disk reads: mostly nothing, now and then a lot).
	start := len(out)
	out, ok := s.appendIntegers(out)
	s.w.reset(0)
	var c valueCoder
	var run uint8
	c.encodeFirst(&s.w, s.vs[0], &run)
	for _, v := range s.vs[1:] {
		c.encode(&s.w, v, &run)
	}
	if ok && len(out)-start <= 1+len(s.w.bytes()) {
		return out
	}
	out = append(out[:start], valuesStream)
	return append(out, s.w.bytes()...)
}

// appendIntegers appends the integer-kind value section, if at most a
// quarter of the values are not decimals at the largest scale any of them
// needs. Those (a NaN staleness marker at the end of a counter, say) are
// stored verbatim as exceptions.
func (s *Sealer) appendIntegers(out []byte) ([]byte, bool) {
	scale := uint8(0)
	for _, v := range s.vs {
		if _, sc, ok := findScale(v); ok && sc > scale {
			scale = sc
		}
	}
	s.ns, s.exc = s.ns[:0], s.exc[:0]
	for i, v := range s.vs {
		n, ok := toInt(v, scale)
		if !ok {
			s.exc = append(s.exc, i)
			if len(s.exc) > len(s.vs)/4 {
				return out, false
			}
			continue
		}
		s.ns = append(s.ns, n)
	}
	if len(s.ns) == 0 {
		return out, false
	}
	// Deltas, wrapping, and their greatest common divisor: page or sector
	// multiples, kB*1024 memory sizes, counters that step by a constant.
	ds := s.ds[:0]
	var g uint64
	for i := 1; i < len(s.ns); i++ {
		d := int64(uint64(s.ns[i]) - uint64(s.ns[i-1]))
		ds = append(ds, d)
		g = gcd(g, absU(d))
	}
	if g == 0 || g > 1<<62 {
		g = 1
	}
	for i := range ds {
		ds[i] /= int64(g) // exact: g divides every delta
	}
	s.ds = ds

	// Order 1 subtracts the median delta (a counter's typical increase);
	// order 2 the previous delta (smooth trends). Keep the cheaper.
	order, bias := uint8(orderDelta), int64(0)
	zs := s.zs[:0]
	if len(ds) > 0 {
		s.sel = append(s.sel[:0], ds...)
		bias = median(s.sel)
		for _, d := range ds {
			zs = append(zs, zigzag(int64(uint64(d)-uint64(bias))))
		}
	}
	s.zs = zs
	k, cost := bestRiceK(zs)
	switch {
	case cost == uint64(len(zs)) && k == 0:
		// Every residual is zero (a constant, a perfectly steady
		// counter): one bit each would still be spent on nothing.
		order, zs = orderConst, zs[:0]
	case len(ds) > 1:
		z2 := s.z2[:0]
		for i := 1; i < len(ds); i++ {
			z2 = append(z2, zigzag(int64(uint64(ds[i])-uint64(ds[i-1]))))
		}
		s.z2 = z2
		if k2, cost2 := bestRiceK(z2); cost2 < cost {
			order, k, zs = orderDoD, k2, z2
		}
	}

	out = append(out, valuesIntegers, scale, order, byte(k))
	out = binary.AppendUvarint(out, g)
	out = binary.AppendUvarint(out, uint64(len(s.exc)))
	prev := 0
	for _, i := range s.exc {
		out = binary.AppendUvarint(out, uint64(i-prev))
		out = binary.LittleEndian.AppendUint64(out, math.Float64bits(s.vs[i]))
		prev = i
	}
	out = binary.AppendVarint(out, s.ns[0])
	if order != orderDoD {
		out = binary.AppendVarint(out, bias)
	} else {
		out = binary.AppendVarint(out, ds[0])
	}
	s.w.reset(0)
	for _, z := range zs {
		writeRice(&s.w, z, k)
	}
	return append(out, s.w.bytes()...), true
}

// median returns the median of xs, reordering xs (quickselect).
func median(xs []int64) int64 {
	k := len(xs) / 2
	lo, hi := 0, len(xs)-1
	for lo < hi {
		p := xs[lo+(hi-lo)/2]
		i, j := lo, hi
		for i <= j {
			for xs[i] < p {
				i++
			}
			for xs[j] > p {
				j--
			}
			if i <= j {
				xs[i], xs[j] = xs[j], xs[i]
				i++
				j--
			}
		}
		switch {
		case k <= j:
			hi = j
		case k >= i:
			lo = i
		default:
			return xs[k]
		}
	}
	return xs[k]
}

func absU(x int64) uint64 {
	if x < 0 {
		return uint64(-x) // also right for MinInt64: 1<<63
	}
	return uint64(x)
}

func gcd(a, b uint64) uint64 {
	if a == 0 {
		return b
	}
	if b == 0 {
		return a
	}
	// Binary GCD: no divisions.
	shift := bits.TrailingZeros64(a | b)
	a >>= bits.TrailingZeros64(a)
	for b != 0 {
		b >>= bits.TrailingZeros64(b)
		if a > b {
			a, b = b, a
		}
		b -= a
	}
	return a << shift
}
