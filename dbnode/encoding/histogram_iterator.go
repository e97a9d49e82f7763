package encoding

import (
	"encoding/binary"
	"math"

	"github.com/prometheus/prometheus/model/histogram"
)

// HistogramIterator walks the samples of a histogram stream in increasing
// timestamp order.
//
// Next advances and reports whether there is a sample; the At methods are
// valid after Next returned true; after Next returned false, Err is nil at
// the end of the data and non-nil (wrapping ErrCorrupt for bad bytes) if
// iteration stopped on an error, and Next keeps returning false.
//
// AtHistogram and AtFloatHistogram fill h (reusing its slices) or, if h is
// nil, a new histogram, and return it: the caller owns it and the iterator
// keeps no reference to it, except CustomValues, which is shared by every
// sample of a layout and must be treated as immutable (Prometheus interns
// it the same way). AtHistogram returns nil on a float stream;
// AtFloatHistogram converts an integer sample. Not safe for concurrent use.
type HistogramIterator interface {
	Next() bool
	// IsFloat reports whether the stream holds float histograms.
	IsFloat() bool
	// AtT is the current sample's timestamp, without decoding its
	// histogram (merges compare timestamps only).
	AtT() int64
	AtHistogram(h *histogram.Histogram) (int64, *histogram.Histogram)
	AtFloatHistogram(h *histogram.FloatHistogram) (int64, *histogram.FloatHistogram)
	Err() error
}

// histIterator decodes the histogram stream form.
type histIterator struct {
	streamCursor
	kind histKind
	hint histogram.CounterResetHint
	lay  histLayout
	next histLayout

	icount, izero intBucket
	ib            bucketStates[intBucket]
	fcount, fzero floatBucket
	fb            bucketStates[floatBucket]
	sum           valueCoder
	sumValue      float64
	countValue    uint64 // integer histograms
}

// NewHistogramIterator returns an iterator over a stream produced by
// HistogramEncoder.Bytes (or a copy of it). An empty slice is an empty
// stream.
func NewHistogramIterator(stream []byte) HistogramIterator {
	it := &histIterator{}
	if len(stream) == 0 {
		it.checked = true
		return it
	}
	if err := it.reset(stream); err != nil {
		it.fail(err)
	}
	return it
}

func (it *histIterator) reset(stream []byte) error {
	if len(stream) < histStreamHeaderLen {
		return corruptf("histogram stream of %d bytes is shorter than its header", len(stream))
	}
	if stream[0] != histStreamFormat {
		return corruptf("unknown histogram stream format %#x", stream[0])
	}
	it.kind = histKind(stream[1])
	it.left = binary.LittleEndian.Uint32(stream[2:6])
	switch {
	case it.kind > histKindFloat:
		return corruptf("unknown histogram kind %d", it.kind)
	case (it.kind == histKindNone) != (it.left == 0):
		return corruptf("histogram kind %d with %d samples", it.kind, it.left)
	}
	it.r = newBitReader(stream, histStreamHeaderLen)
	return nil
}

func (it *histIterator) Next() bool {
	if it.left == 0 {
		return it.end(histNoun)
	}
	r := &it.r
	if !it.timestamp(histNoun) {
		return false
	}
	it.hint = readHint(r, it.hint)
	if r.readBits(1) == 1 {
		if err := it.next.read(r); err != nil {
			return it.fail(err)
		}
		carry := it.read > 0 && it.lay.sameBuckets(&it.next)
		if it.kind == histKindInt {
			it.ib.switchLayout(carry, &it.lay, &it.next)
		} else {
			it.fb.switchLayout(carry, &it.lay, &it.next)
		}
	} else if it.read == 0 {
		return it.fail(corruptf("first histogram has no layout"))
	}
	ok := true
	if it.kind == histKindInt {
		it.izero.decode(r)
		it.sumValue, ok = it.decodeSum()
		it.countValue = it.izero.abs
		for i := range it.ib.pos {
			it.ib.pos[i].decode(r)
			it.countValue += it.ib.pos[i].abs
		}
		for i := range it.ib.neg {
			it.ib.neg[i].decode(r)
			it.countValue += it.ib.neg[i].abs
		}
		it.icount.decode(r)
		it.countValue += it.icount.abs
	} else {
		ok = it.fcount.decode(r) && it.fzero.decode(r)
		if ok {
			it.sumValue, ok = it.decodeSum()
		}
		for i := 0; ok && i < len(it.fb.pos); i++ {
			ok = it.fb.pos[i].decode(r)
		}
		for i := 0; ok && i < len(it.fb.neg); i++ {
			ok = it.fb.neg[i].decode(r)
		}
	}
	return it.finish(ok, histNoun)
}

// histNoun names a histogram stream's samples in its errors.
const histNoun = "histogram"

func (it *histIterator) decodeSum() (float64, bool) {
	if it.read == 0 {
		return it.sum.decodeFirst(&it.r)
	}
	return it.sum.decode(&it.r)
}

func (it *histIterator) Err() error    { return it.err }
func (it *histIterator) IsFloat() bool { return it.kind == histKindFloat }
func (it *histIterator) AtT() int64    { return it.tc.t }

func (it *histIterator) AtHistogram(h *histogram.Histogram) (int64, *histogram.Histogram) {
	if it.kind != histKindInt {
		return it.tc.t, nil
	}
	if h == nil {
		h = &histogram.Histogram{}
	}
	h.CounterResetHint = it.hint
	h.Schema = it.lay.schema
	h.ZeroThreshold = math.Float64frombits(it.lay.zeroThreshold)
	h.ZeroCount = it.izero.abs
	h.Count = it.countValue
	h.Sum = it.sumValue
	h.PositiveSpans = copySpans(h.PositiveSpans, it.lay.pos)
	h.NegativeSpans = copySpans(h.NegativeSpans, it.lay.neg)
	h.PositiveBuckets = deltaBuckets(h.PositiveBuckets, it.ib.pos)
	h.NegativeBuckets = deltaBuckets(h.NegativeBuckets, it.ib.neg)
	h.CustomValues = it.lay.custom
	return it.tc.t, h
}

func (it *histIterator) AtFloatHistogram(h *histogram.FloatHistogram) (int64, *histogram.FloatHistogram) {
	if it.kind == histKindInt {
		_, ih := it.AtHistogram(nil)
		return it.tc.t, ih.ToFloat(h)
	}
	if h == nil {
		h = &histogram.FloatHistogram{}
	}
	h.CounterResetHint = it.hint
	h.Schema = it.lay.schema
	h.ZeroThreshold = math.Float64frombits(it.lay.zeroThreshold)
	h.ZeroCount = it.fzero.value()
	h.Count = it.fcount.value()
	h.Sum = it.sumValue
	h.PositiveSpans = copySpans(h.PositiveSpans, it.lay.pos)
	h.NegativeSpans = copySpans(h.NegativeSpans, it.lay.neg)
	h.PositiveBuckets = floatBuckets(h.PositiveBuckets, it.fb.pos)
	h.NegativeBuckets = floatBuckets(h.NegativeBuckets, it.fb.neg)
	h.CustomValues = it.lay.custom
	return it.tc.t, h
}

// copySpans returns src's spans in dst's storage; nil for none when dst is
// nil.
func copySpans(dst, src []histogram.Span) []histogram.Span {
	if len(src) == 0 && dst == nil {
		return nil
	}
	return append(dst[:0], src...)
}

// deltaBuckets turns absolute counts back into Prometheus' delta form.
func deltaBuckets(dst []int64, state []intBucket) []int64 {
	if len(state) == 0 && dst == nil {
		return nil
	}
	dst = dst[:0]
	var prev uint64
	for _, b := range state {
		dst = append(dst, int64(b.abs-prev))
		prev = b.abs
	}
	return dst
}

func floatBuckets(dst []float64, state []floatBucket) []float64 {
	if len(state) == 0 && dst == nil {
		return nil
	}
	dst = dst[:0]
	for i := range state {
		dst = append(dst, state[i].value())
	}
	return dst
}
