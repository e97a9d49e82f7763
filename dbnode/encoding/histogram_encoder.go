package encoding

import (
	"errors"
	"fmt"
	"math"

	"github.com/prometheus/prometheus/model/histogram"
)

// ErrHistogramKind is returned by HistogramEncoder when a sample's type
// (integer or float histogram) differs from the stream's: one stream holds
// one type, as a Prometheus chunk does; the owner starts a new stream.
var ErrHistogramKind = errors.New("encoding: histogram type differs from the stream's")

// ErrInvalidHistogram is wrapped by HistogramEncoder for a histogram it
// cannot store losslessly: nil, bucket counts that do not match the spans,
// or an unknown counter reset hint.
var ErrInvalidHistogram = errors.New("encoding: invalid histogram")

// emptyHistStream is Bytes() of a histogram encoder that holds nothing.
var emptyHistStream = []byte{histStreamFormat, byte(histKindNone), 0, 0, 0, 0}

// HistogramEncoder appends native histogram samples (Prometheus'
// histogram.Histogram or histogram.FloatHistogram, one type per stream) with
// strictly increasing timestamps to a stream in the format of
// docs/format/histogram.md. Timestamps are coded as the float encoding codes
// them; the layout (schema, zero threshold, spans, custom bounds) is written
// with the first sample and again only when it changes; integer counts are
// delta-of-deltas per bucket in adaptive Rice codes (the total count as its
// difference from the buckets' sum), float fields go through the float
// encoding's value coder. Every field round-trips bit for bit, NaN sums (stale markers)
// included.
//
// Storage does not use it yet. Not safe for concurrent use, Bytes included
// (it completes the stream in the encoder's buffer). The zero value is empty
// and ready. Append never keeps a reference to the caller's histogram.
type HistogramEncoder struct {
	w     bitWriter
	count uint32
	kind  histKind
	tc    tsCoder
	hint  histogram.CounterResetHint
	lay   histLayout
	next  histLayout // scratch for a layout change

	// Integer histograms.
	icount, izero intBucket
	ib            bucketStates[intBucket]
	// Float histograms.
	fcount, fzero floatBucket
	fb            bucketStates[floatBucket]
	// Both.
	sum    valueCoder
	sumRun uint8 // sum.encode's count of decimals in a row
}

// NewHistogramEncoder returns an empty encoder.
func NewHistogramEncoder() *HistogramEncoder { return &HistogramEncoder{} }

// Len returns the number of samples appended since creation or Reset.
func (e *HistogramEncoder) Len() int { return int(e.count) }

// LastTimestamp returns the last appended timestamp; undefined when Len is 0.
func (e *HistogramEncoder) LastTimestamp() int64 { return e.tc.t }

// IsFloat reports whether the stream holds float histograms; false when
// empty.
func (e *HistogramEncoder) IsFloat() bool { return e.kind == histKindFloat }

// check validates what every sample needs before anything is written, so a
// refused sample leaves the encoder unchanged.
func (e *HistogramEncoder) check(t int64, hd *histHead) error {
	if e.count > 0 {
		if e.kind != hd.kind {
			return ErrHistogramKind
		}
		if t <= e.tc.t {
			return ErrOutOfOrder
		}
		if e.count == math.MaxUint32 || e.w.n >= maxStreamBytes {
			return ErrTooManySamples
		}
	}
	if hd.hint > maxCounterResetHint {
		return fmt.Errorf("%w: counter reset hint %d", ErrInvalidHistogram, hd.hint)
	}
	for i, spans := range [2][]histogram.Span{hd.pos, hd.neg} {
		n, ok := bucketCount(spans, nil)
		want := [2]int{hd.npos, hd.nneg}[i]
		if !ok || n != uint64(want) {
			return fmt.Errorf("%w: %s spans hold %d buckets, %d given", ErrInvalidHistogram,
				[2]string{"positive", "negative"}[i], n, want)
		}
	}
	return nil
}

// histHead is what a sample of either histogram type carries besides its
// counts and sum: what check and start read.
type histHead struct {
	kind       histKind
	hint       histogram.CounterResetHint
	schema     int32
	zt         float64
	pos, neg   []histogram.Span
	custom     []float64
	npos, nneg int // buckets given
}

// intHead is h's histHead; an error for a nil h.
func intHead(h *histogram.Histogram) (histHead, error) {
	if h == nil {
		return histHead{}, fmt.Errorf("%w: nil", ErrInvalidHistogram)
	}
	return histHead{histKindInt, h.CounterResetHint, h.Schema, h.ZeroThreshold, h.PositiveSpans,
		h.NegativeSpans, h.CustomValues, len(h.PositiveBuckets), len(h.NegativeBuckets)}, nil
}

// floatHead is intHead for a float histogram.
func floatHead(h *histogram.FloatHistogram) (histHead, error) {
	if h == nil {
		return histHead{}, fmt.Errorf("%w: nil", ErrInvalidHistogram)
	}
	return histHead{histKindFloat, h.CounterResetHint, h.Schema, h.ZeroThreshold, h.PositiveSpans,
		h.NegativeSpans, h.CustomValues, len(h.PositiveBuckets), len(h.NegativeBuckets)}, nil
}

// begin checks a sample of either type (check; err is its head's) and
// writes its timestamp, hint and layout; when the layout changes, it
// remaps the bucket state of the sample's type to it.
func (e *HistogramEncoder) begin(t int64, hd *histHead, err error) error {
	if err != nil {
		return err
	}
	if err := e.check(t, hd); err != nil {
		return err
	}
	if e.count == 0 {
		e.w.reset(histStreamHeaderLen)
		b := e.w.buf()
		b[0], b[1] = histStreamFormat, byte(hd.kind)
		e.kind = hd.kind
		e.w.writeBits(uint64(t), 64)
		e.tc = newTSCoder(t)
	} else {
		e.tc.encode(&e.w, t)
	}
	writeHint(&e.w, e.hint, hd.hint)
	e.hint = hd.hint
	if e.count > 0 && e.lay.same(hd.schema, hd.zt, hd.pos, hd.neg, hd.custom) {
		e.w.writeBits(0, 1)
		return nil
	}
	e.w.writeBits(1, 1)
	e.next.set(hd.schema, hd.zt, hd.pos, hd.neg, hd.custom)
	e.next.write(&e.w)
	sameBuckets := e.count > 0 && e.lay.sameBuckets(&e.next)
	if hd.kind == histKindInt {
		e.ib.switchLayout(sameBuckets, &e.lay, &e.next)
	} else {
		e.fb.switchLayout(sameBuckets, &e.lay, &e.next)
	}
	return nil
}

// encodeSum codes a sample's sum, of either type.
func (e *HistogramEncoder) encodeSum(sum float64) {
	if e.count == 0 {
		e.sum.encodeFirst(&e.w, sum, &e.sumRun)
	} else {
		e.sum.encode(&e.w, sum, &e.sumRun)
	}
}

// AppendHistogram adds an integer histogram sample. It returns
// ErrOutOfOrder if t is not after the last timestamp, ErrTooManySamples when
// the stream is full, ErrHistogramKind if the stream holds float
// histograms, an ErrInvalidHistogram for a histogram it cannot store; the
// encoder is unchanged then.
func (e *HistogramEncoder) AppendHistogram(t int64, h *histogram.Histogram) error {
	hd, err := intHead(h)
	if err := e.begin(t, &hd, err); err != nil {
		return err
	}
	e.izero.encode(&e.w, h.ZeroCount)
	e.encodeSum(h.Sum)
	pred := h.ZeroCount + e.encodeIntBuckets(e.ib.pos, h.PositiveBuckets) +
		e.encodeIntBuckets(e.ib.neg, h.NegativeBuckets)
	// The count is almost always the sum of the buckets: code the
	// difference, a constant zero.
	e.icount.encode(&e.w, h.Count-pred)
	e.count++
	return nil
}

// encodeIntBuckets codes Prometheus' delta-encoded buckets as per-bucket
// delta-of-deltas of the absolute counts, so a bucket keeps its state when
// a neighbour appears. It returns the sum of the counts, wrapping.
func (e *HistogramEncoder) encodeIntBuckets(state []intBucket, deltas []int64) uint64 {
	var abs, total uint64
	for i, d := range deltas {
		abs += uint64(d)
		total += abs
		state[i].encode(&e.w, abs)
	}
	return total
}

// AppendFloatHistogram adds a float histogram sample; errors as for
// AppendHistogram (ErrHistogramKind if the stream holds integer ones).
func (e *HistogramEncoder) AppendFloatHistogram(t int64, h *histogram.FloatHistogram) error {
	hd, err := floatHead(h)
	if err := e.begin(t, &hd, err); err != nil {
		return err
	}
	e.fcount.encode(&e.w, h.Count)
	e.fzero.encode(&e.w, h.ZeroCount)
	e.encodeSum(h.Sum)
	for i, v := range h.PositiveBuckets {
		e.fb.pos[i].encode(&e.w, v)
	}
	for i, v := range h.NegativeBuckets {
		e.fb.neg[i].encode(&e.w, v)
	}
	e.count++
	return nil
}

// Bytes returns a self-delimiting stream of every sample appended so far,
// readable by NewHistogramIterator. It does not copy: the caller must not
// modify it, and it is valid until the next Append or Reset. It writes into
// the encoder's buffer (see HistogramEncoder).
func (e *HistogramEncoder) Bytes() []byte {
	return e.w.stream(e.count, 2, emptyHistStream[:histStreamHeaderLen:histStreamHeaderLen])
}

// Size is len(Bytes()) without calling it (see Encoder.Size).
func (e *HistogramEncoder) Size() int { return e.w.streamSize(e.count, emptyHistStream) }

// Reset empties the encoder, keeping its buffers for reuse.
func (e *HistogramEncoder) Reset() {
	e.ib.reset()
	e.fb.reset()
	*e = HistogramEncoder{
		w:    bitWriter{p: e.w.p, capc: e.w.capc},
		ib:   e.ib,
		fb:   e.fb,
		lay:  histLayout{pos: e.lay.pos[:0], neg: e.lay.neg[:0]},
		next: histLayout{pos: e.next.pos[:0], neg: e.next.neg[:0]},
	}
}

// CheckHistogram returns the error AppendHistogram would give h in an
// empty stream (nil or ErrInvalidHistogram), without encoding it: a
// writer refuses what no stream can store before it is logged.
func CheckHistogram(h *histogram.Histogram) error { return checkHead(intHead(h)) }

// CheckFloatHistogram is CheckHistogram for float histograms.
func CheckFloatHistogram(h *histogram.FloatHistogram) error { return checkHead(floatHead(h)) }

// checkHead is check in an empty stream.
func checkHead(hd histHead, err error) error {
	if err != nil {
		return err
	}
	var e HistogramEncoder
	return e.check(0, &hd)
}
