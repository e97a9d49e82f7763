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

	orderDelta = 1 // residual = delta/g - bias
	orderDoD   = 2 // residual = delta/g - previous delta/g
)

// Seal re-encodes a stream (Encoder.Bytes output) into the sealed form that
// blocks are stored and streamed as. It fails if the stream is corrupt.
func Seal(stream []byte) ([]byte, error) {
	var ts []int64
	var vs []float64
	it := NewIterator(stream)
	for it.Next() {
		t, v := it.At()
		ts = append(ts, t)
		vs = append(vs, v)
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("seal: read stream: %w", err)
	}
	return sealSamples(ts, vs), nil
}

// sealSamples writes the sealed form of samples with increasing timestamps.
func sealSamples(ts []int64, vs []float64) []byte {
	out := []byte{sealedFormat}
	out = binary.AppendUvarint(out, uint64(len(ts)))
	if len(ts) == 0 {
		return out
	}
	// Timestamps: a section of its own, byte aligned and independent of
	// the values, so that series scraped together carry identical bytes
	// that zstd turns into one long match.
	var w bitWriter
	w.reset(0)
	w.writeBits64(uint64(ts[0]), 64)
	tc := tsCoder{t: ts[0]}
	for _, t := range ts[1:] {
		tc.encode(&w, t)
	}
	out = binary.AppendUvarint(out, uint64(len(w.bytes())))
	out = append(out, w.bytes()...)

	// Values: integers if that is smaller, else the stream's value codes.
	if ints, ok := sealIntegers(vs); ok {
		var sw bitWriter
		sw.reset(0)
		writeStreamValues(&sw, vs)
		if len(ints) <= len(sw.bytes())+1 {
			return append(out, ints...)
		}
		return append(append(out, valuesStream), sw.bytes()...)
	}
	var sw bitWriter
	sw.reset(0)
	writeStreamValues(&sw, vs)
	return append(append(out, valuesStream), sw.bytes()...)
}

func writeStreamValues(w *bitWriter, vs []float64) {
	var c valueCoder
	c.encodeFirst(w, vs[0])
	for _, v := range vs[1:] {
		c.encode(w, v)
	}
}

// sealIntegers writes the integer-kind value section, including its kind
// byte, if enough values are decimals at one scale. Values that are not
// (a NaN staleness marker at the end of a counter, say) are stored verbatim
// as exceptions.
func sealIntegers(vs []float64) ([]byte, bool) {
	scale := uint8(0)
	for _, v := range vs {
		if _, s, ok := findScale(v); ok && s > scale {
			scale = s
		}
	}
	ns := make([]int64, 0, len(vs))
	var exc []int // indexes of exceptions
	for i, v := range vs {
		n, ok := toInt(v, scale)
		if !ok {
			exc = append(exc, i)
			continue
		}
		ns = append(ns, n)
	}
	if len(ns) == 0 || len(exc) > len(vs)/4 {
		return nil, false
	}
	// Deltas, wrapping, and their greatest common divisor: page or sector
	// multiples, kB*1024 memory sizes.
	ds := make([]int64, len(ns)-1)
	var g uint64
	for i := range ds {
		ds[i] = int64(uint64(ns[i+1]) - uint64(ns[i]))
		g = gcd(g, absU(ds[i]))
	}
	if g == 0 || g > 1<<62 {
		g = 1
	}
	for i := range ds {
		ds[i] /= int64(g) // exact: g divides every delta
	}

	// Order 1 subtracts the median delta (a counter's typical increase);
	// order 2 the previous delta (smooth trends). Keep the cheaper.
	order, bias := orderDelta, int64(0)
	zs := make([]uint64, 0, len(ds))
	if len(ds) > 0 {
		sorted := slices.Clone(ds)
		slices.Sort(sorted)
		bias = sorted[len(sorted)/2]
		for _, d := range ds {
			zs = append(zs, zigzag(int64(uint64(d)-uint64(bias))))
		}
	}
	k, cost := bestRiceK(zs)
	if len(ds) > 1 {
		z2 := make([]uint64, 0, len(ds)-1)
		for i := 1; i < len(ds); i++ {
			z2 = append(z2, zigzag(int64(uint64(ds[i])-uint64(ds[i-1]))))
		}
		if k2, cost2 := bestRiceK(z2); cost2 < cost {
			order, k, zs = orderDoD, k2, z2
		}
	}

	out := []byte{valuesIntegers, scale, byte(order), byte(k)}
	out = binary.AppendUvarint(out, g)
	out = binary.AppendUvarint(out, uint64(len(exc)))
	prev := 0
	for _, i := range exc {
		out = binary.AppendUvarint(out, uint64(i-prev))
		out = binary.LittleEndian.AppendUint64(out, math.Float64bits(vs[i]))
		prev = i
	}
	out = binary.AppendVarint(out, ns[0])
	if order == orderDelta {
		out = binary.AppendVarint(out, bias)
	} else {
		out = binary.AppendVarint(out, ds[0])
	}
	var w bitWriter
	w.reset(0)
	for _, z := range zs {
		writeRice(&w, z, k)
	}
	return append(out, w.bytes()...), true
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
