package encoding

import (
	"math"
	"math/bits"
	"slices"

	"github.com/prometheus/prometheus/model/histogram"
)

// Histogram stream header: a format byte (high bit: histogram stream; low
// bits: version 1, so the float Iterator rejects it and vice versa), a kind
// byte, then the sample count as uint32 little endian, written in place by
// Bytes. See docs/format/histogram.md.
const (
	histStreamFormat    = 0x81
	histStreamHeaderLen = 6
)

// histKind says which histogram type a stream holds; one stream holds one.
type histKind uint8

const (
	histKindNone  histKind = 0 // empty stream only
	histKindInt   histKind = 1
	histKindFloat histKind = 2
)

// maxCounterResetHint is the largest hint Prometheus defines (GaugeType).
const maxCounterResetHint = histogram.GaugeType

// histLayout is what a histogram's buckets mean: written once per stream and
// again only when it changes. Its slices belong to the coder (copied in).
type histLayout struct {
	schema        int32
	zeroThreshold uint64 // bit pattern
	pos, neg      []histogram.Span
	custom        []float64
}

// same reports whether a sample's layout equals l, comparing floats by bit
// pattern.
func (l *histLayout) same(schema int32, zt float64, pos, neg []histogram.Span, custom []float64) bool {
	if l.schema != schema || l.zeroThreshold != math.Float64bits(zt) ||
		!slices.Equal(l.pos, pos) || !slices.Equal(l.neg, neg) || len(l.custom) != len(custom) {
		return false
	}
	for i, c := range custom {
		if math.Float64bits(l.custom[i]) != math.Float64bits(c) {
			return false
		}
	}
	return true
}

// set copies a sample's layout into l.
func (l *histLayout) set(schema int32, zt float64, pos, neg []histogram.Span, custom []float64) {
	l.schema, l.zeroThreshold = schema, math.Float64bits(zt)
	l.pos = append(l.pos[:0], pos...)
	l.neg = append(l.neg[:0], neg...)
	// A fresh slice: decoders hand custom values out by reference (they are
	// immutable, as Prometheus interns them), so an old one is never reused.
	l.custom = nil
	if len(custom) > 0 {
		l.custom = slices.Clone(custom)
	}
}

// sameBuckets reports whether bucket indices mean the same bounds under l and
// next: same schema and, for custom buckets, the same bounds.
func (l *histLayout) sameBuckets(next *histLayout) bool {
	if l.schema != next.schema || len(l.custom) != len(next.custom) {
		return false
	}
	for i, c := range next.custom {
		if math.Float64bits(l.custom[i]) != math.Float64bits(c) {
			return false
		}
	}
	return true
}

// write emits the layout (see docs/format/histogram.md, "Layout").
func (l *histLayout) write(w *bitWriter) {
	writeTimestampCode(w, int64(l.schema))
	w.writeBits(l.zeroThreshold, 64)
	for _, spans := range [2][]histogram.Span{l.pos, l.neg} {
		writeTimestampCode(w, int64(len(spans)))
		for _, s := range spans {
			writeTimestampCode(w, int64(s.Offset))
			writeTimestampCode(w, int64(s.Length))
		}
	}
	writeTimestampCode(w, int64(len(l.custom)))
	for _, c := range l.custom {
		w.writeBits(math.Float64bits(c), 64)
	}
}

// read decodes a layout into l, checking every count against the bits left
// so that no input makes it allocate more than the input's size warrants.
func (l *histLayout) read(r *bitReader) error {
	schema := int64(readTimestampCode(r))
	if schema != int64(int32(schema)) {
		return corruptf("schema %d out of range", schema)
	}
	l.schema = int32(schema)
	l.zeroThreshold = r.readBits64(64)
	var err error
	if l.pos, err = readSpans(r, l.pos[:0]); err != nil {
		return err
	}
	if l.neg, err = readSpans(r, l.neg[:0]); err != nil {
		return err
	}
	n := readTimestampCode(r)
	if n > bitsLeft(r)/64 {
		return corruptf("%d custom bucket bounds in %d bits", int64(n), bitsLeft(r))
	}
	l.custom = nil
	if n > 0 {
		l.custom = make([]float64, n)
		for i := range l.custom {
			l.custom[i] = math.Float64frombits(r.readBits64(64))
		}
	}
	// Every bucket costs at least one bit in every sample.
	if total, ok := bucketCount(l.pos, l.neg); !ok || total > bitsLeft(r) {
		return corruptf("layout of %d buckets in %d bits", total, bitsLeft(r))
	}
	return nil
}

func readSpans(r *bitReader, dst []histogram.Span) ([]histogram.Span, error) {
	n := readTimestampCode(r)
	if n > bitsLeft(r)/2 { // a span takes at least two one-bit codes
		return dst, corruptf("%d spans in %d bits", int64(n), bitsLeft(r))
	}
	for range n {
		off, length := int64(readTimestampCode(r)), readTimestampCode(r)
		if off != int64(int32(off)) || length > math.MaxUint32 {
			return dst, corruptf("span offset %d or length %d out of range", off, int64(length))
		}
		dst = append(dst, histogram.Span{Offset: int32(off), Length: uint32(length)})
	}
	return dst, nil
}

// bucketCount is the number of buckets spans describe; false on overflow.
func bucketCount(pos, neg []histogram.Span) (uint64, bool) {
	var total uint64
	for _, spans := range [2][]histogram.Span{pos, neg} {
		for _, s := range spans {
			var carry uint64
			total, carry = bits.Add64(total, uint64(s.Length), 0)
			if carry != 0 {
				return 0, false
			}
		}
	}
	return total, true
}

func bitsLeft(r *bitReader) uint64 {
	if r.pos >= r.end {
		return 0
	}
	return r.end - r.pos
}

// remapBuckets carries per-bucket coder state across a layout change: dst
// gets one zero state per bucket of the new spans, except for buckets whose
// index the old spans also had, which keep their state. Indices of valid
// spans increase, so one merge walk finds them; for spans that do not
// (arbitrary input), it finds fewer, the same on both sides.
func remapBuckets[T any](oldSpans []histogram.Span, old []T, newSpans []histogram.Span, dst []T) []T {
	n, _ := bucketCount(newSpans, nil)
	dst = slices.Grow(dst[:0], int(n))[:n]
	clear(dst)
	var oi spanIter
	oi.init(oldSpans)
	oldIdx, oldOK := oi.next()
	var ni spanIter
	ni.init(newSpans)
	for k := range dst {
		idx, _ := ni.next()
		for oldOK && oldIdx < idx {
			oldIdx, oldOK = oi.next()
		}
		if oldOK && oldIdx == idx && oi.k-1 < len(old) {
			dst[k] = old[oi.k-1]
		}
	}
	return dst
}

// bucketStates is the per-bucket coder state of both bucket lists, with a
// spare list for remapping without allocating.
type bucketStates[T any] struct{ pos, neg, spare []T }

// switchLayout moves the state from layout old to next (remapBuckets; carry
// false starts every bucket afresh); old and next are then swapped, so
// *old is the layout in force.
func (b *bucketStates[T]) switchLayout(carry bool, old, next *histLayout) {
	var oldPos, oldNeg []T
	if carry {
		oldPos, oldNeg = b.pos, b.neg
	}
	b.spare = remapBuckets(old.pos, oldPos, next.pos, b.spare)
	b.pos, b.spare = b.spare, b.pos
	b.spare = remapBuckets(old.neg, oldNeg, next.neg, b.spare)
	b.neg, b.spare = b.spare, b.neg
	*old, *next = *next, *old
}

// reset empties b, keeping its storage.
func (b *bucketStates[T]) reset() {
	b.pos, b.neg, b.spare = b.pos[:0], b.neg[:0], b.spare[:0]
}

// spanIter walks the bucket indices of spans; k counts buckets returned.
type spanIter struct {
	spans []histogram.Span
	span  int
	left  uint32
	idx   int64
	k     int
}

func (s *spanIter) init(spans []histogram.Span) {
	*s = spanIter{spans: spans, span: -1}
}

func (s *spanIter) next() (int64, bool) {
	for s.left == 0 {
		s.span++
		if s.span >= len(s.spans) {
			return 0, false
		}
		if s.span > 0 {
			s.idx++ // past the last bucket of the previous span
		}
		s.idx += int64(s.spans[s.span].Offset)
		s.left = s.spans[s.span].Length
		if s.left > 0 {
			s.k++
			s.left--
			return s.idx, true
		}
		s.idx-- // an empty span: its offset counts from one before
	}
	s.idx++
	s.k++
	s.left--
	return s.idx, true
}

// Counter reset hint codes: '0' same hint as the previous sample (the first
// sample's previous is UnknownCounterReset), '1' + 2 bits: the hint.
func writeHint(w *bitWriter, prev, h histogram.CounterResetHint) {
	if h == prev {
		w.writeBits(0, 1)
		return
	}
	w.writeBits(0b100|uint64(h), 3)
}

func readHint(r *bitReader, prev histogram.CounterResetHint) histogram.CounterResetHint {
	if r.readBits(1) == 0 {
		return prev
	}
	return histogram.CounterResetHint(r.readBits(2))
}

// intBucket is the coder state of one integer count: the last absolute
// value and the last delta (wrapping), and the adaptive Rice parameter
// state for its delta-of-deltas.
type intBucket struct {
	abs, delta uint64
	rice       riceState
}

// encode writes the delta-of-delta of v and advances.
func (b *intBucket) encode(w *bitWriter, v uint64) {
	d := v - b.abs
	b.rice.write(w, d-b.delta)
	b.abs, b.delta = v, d
}

func (b *intBucket) decode(r *bitReader) {
	b.delta += b.rice.read(r)
	b.abs += b.delta
}

// riceState adapts a Rice code to the magnitude of one count's
// delta-of-deltas: s tracks four times the recent bit length of the zigzag
// values (s -= s/4, rounded, then += length), and the parameter k is s/4.
// A bucket whose count grows by a steady λ a scrape has
// delta-of-deltas of a few sqrt(λ), which a fixed set of code widths fits
// badly across buckets of different rates. k = s/4 rather than s/4-1
// measured smaller on the benchmark data.
type riceState struct{ s uint16 }

func (c *riceState) k() uint {
	return uint(min(c.s>>2, 62))
}

func (c *riceState) adapt(zz uint64) {
	c.s = c.s - (c.s+2)>>2 + uint16(bits.Len64(zz))
}

// write codes x with the sealed form's Rice code (rice.go) and adapts.
func (c *riceState) write(w *bitWriter, x uint64) {
	zz := zigzag(int64(x))
	writeRice(w, zz, c.k())
	c.adapt(zz)
}

func (c *riceState) read(r *bitReader) uint64 {
	zz := readRice(r, c.k())
	c.adapt(zz)
	return uint64(unzigzag(zz))
}

// floatBucket is the coder state of one float count: the float encoding's
// value coder (integer delta-of-deltas while the counts are whole or
// decimal, XOR otherwise), started afresh for a bucket new to the layout.
type floatBucket struct {
	vc   valueCoder
	seen bool
	run  uint8 // vc.encode's count of decimals in a row
}

func (b *floatBucket) encode(w *bitWriter, v float64) {
	if !b.seen {
		b.seen = true
		b.vc.encodeFirst(w, v, &b.run)
		return
	}
	b.vc.encode(w, v, &b.run)
}

func (b *floatBucket) decode(r *bitReader) bool {
	if !b.seen {
		b.seen = true
		_, ok := b.vc.decodeFirst(r)
		return ok
	}
	_, ok := b.vc.decode(r)
	return ok
}

func (b *floatBucket) value() float64 { return math.Float64frombits(b.vc.bits) }
