package rollup

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"

	"github.com/prometheus/prometheus/model/histogram"
)

// HistogramVersion is the first byte of an encoding of histogram windows
// (docs/format/rollup.md, "Histogram windows"): the high bit tells it from
// float windows, the low bits are its version.
const HistogramVersion = 0x81

// Histogram window flags.
const (
	hflagStale  = 1 << 0 // Stale
	hflagSingle = 1 << 1 // Count 1: Last == First, Sum is First's histogram, no Resets
	hflagResets = 1 << 2 // Resets follows
	hflagsKnown = hflagStale | hflagSingle | hflagResets
)

// appendHistogram writes one histogram; floats are XORed with 0 (trimmed
// of zero bytes) and each bucket with the previous bucket of its side.
func appendHistogram(dst []byte, h *histogram.FloatHistogram) []byte {
	dst = append(dst, byte(h.CounterResetHint))
	dst = binary.AppendVarint(dst, int64(h.Schema))
	for _, v := range []float64{h.ZeroThreshold, h.ZeroCount, h.Count, h.Sum} {
		dst = appendXOR(dst, math.Float64bits(v), 0)
	}
	side := func(spans []histogram.Span, buckets []float64) {
		dst = binary.AppendUvarint(dst, uint64(len(spans)))
		for _, s := range spans {
			dst = binary.AppendVarint(dst, int64(s.Offset))
			dst = binary.AppendUvarint(dst, uint64(s.Length))
		}
		prev := uint64(0)
		for _, b := range buckets {
			dst = appendXOR(dst, math.Float64bits(b), prev)
			prev = math.Float64bits(b)
		}
	}
	side(h.PositiveSpans, h.PositiveBuckets)
	side(h.NegativeSpans, h.NegativeBuckets)
	dst = binary.AppendUvarint(dst, uint64(len(h.CustomValues)))
	prev := uint64(0)
	for _, v := range h.CustomValues {
		dst = appendXOR(dst, math.Float64bits(v), prev)
		prev = math.Float64bits(v)
	}
	return dst
}

func histBytes(h *histogram.FloatHistogram) []byte { return appendHistogram(nil, h) }

func isSingleHist(w HWindow) bool {
	if w.Count != 1 || w.Resets != nil || w.Last.T != w.First.T || w.Last.H == nil || w.Sum == nil {
		return false
	}
	f := histBytes(w.First.H)
	return bytes.Equal(f, histBytes(w.Last.H)) && bytes.Equal(f, histBytes(w.Sum))
}

// check is what EncodeHistograms requires and DecodeHistograms checks:
// the span's rules, and histograms that Prometheus' validation accepts.
func (w *HWindow) check(res int64) error {
	if err := checkSpan(w.span(), res); err != nil {
		return err
	}
	if w.Count == 0 {
		return nil
	}
	for _, h := range []struct {
		name string
		h    *histogram.FloatHistogram
	}{{"first", w.First.H}, {"last", w.Last.H}, {"sum", w.Sum}, {"resets", w.Resets}} {
		if h.h == nil {
			if h.name == "resets" {
				continue
			}
			return fmt.Errorf("%s histogram missing", h.name)
		}
		if err := h.h.Validate(); err != nil {
			return fmt.Errorf("%s histogram: %w", h.name, err)
		}
	}
	return nil
}

// histogramCodec is the histogram windows' part of the shared stream.
var histogramCodec = codec{version: HistogramVersion, window: "histogram window", versionFault: "version %#x, this build reads histogram windows %#x"}

// EncodeHistograms appends the encoding of one series' histogram windows
// of resolution res ms (as ComputeHistograms and MergeHistograms make
// them) to dst. As Encode, it refuses what DecodeHistograms would.
func EncodeHistograms(dst []byte, res int64, ws []HWindow) ([]byte, error) {
	return encodeWindows(dst, histogramCodec, res, ws, appendHWindow)
}

// appendHWindow writes a histogram window from its flags on.
func appendHWindow(dst []byte, w *HWindow) []byte {
	flags := byte(0)
	if w.Stale {
		flags |= hflagStale
	}
	single := isSingleHist(*w)
	switch {
	case w.Count == 0:
	case single:
		flags |= hflagSingle
	case w.Resets != nil:
		flags |= hflagResets
	}
	dst = appendHead(dst, flags, w.Count)
	if w.Count == 0 {
		return dst
	}
	dst = binary.AppendUvarint(dst, uint64(w.End-w.First.T))
	dst = appendHistogram(dst, w.First.H)
	if single {
		return dst
	}
	dst = binary.AppendUvarint(dst, uint64(w.End-w.Last.T))
	dst = appendHistogram(dst, w.Last.H)
	dst = appendHistogram(dst, w.Sum)
	if w.Resets != nil {
		dst = appendHistogram(dst, w.Resets)
	}
	return dst
}

func (r *reader) floats(what string, n uint64) ([]float64, error) {
	if n > uint64(len(r.b)-r.off) {
		return nil, r.fail("%s: %d values announced, %d bytes left", what, n, len(r.b)-r.off)
	}
	if n == 0 {
		return nil, nil
	}
	out := make([]float64, n)
	prev := uint64(0)
	for i := range out {
		v, err := r.xor(what, prev)
		if err != nil {
			return nil, err
		}
		out[i], prev = v, math.Float64bits(v)
	}
	return out, nil
}

func (r *reader) side(what string) ([]histogram.Span, []float64, error) {
	n, err := r.uvarint(what + " span count")
	if err != nil {
		return nil, nil, err
	}
	if n > uint64(len(r.b)-r.off)/2 {
		return nil, nil, r.fail("%s: %d spans announced, %d bytes left", what, n, len(r.b)-r.off)
	}
	var spans []histogram.Span
	var total uint64
	for i := uint64(0); i < n; i++ {
		off, err := r.varint(what + " span offset")
		if err != nil {
			return nil, nil, err
		}
		l, err := r.uvarint(what + " span length")
		if err != nil {
			return nil, nil, err
		}
		if off < math.MinInt32 || off > math.MaxInt32 || l > math.MaxUint32 {
			return nil, nil, r.fail("%s: span %d (offset %d, length %d) out of range", what, i, off, l)
		}
		total += l
		if total > uint64(len(r.b)) {
			return nil, nil, r.fail("%s: spans hold %d buckets, more than the input's bytes", what, total)
		}
		spans = append(spans, histogram.Span{Offset: int32(off), Length: uint32(l)})
	}
	buckets, err := r.floats(what+" buckets", total)
	return spans, buckets, err
}

func (r *reader) histogram(what string) (*histogram.FloatHistogram, error) {
	hint, err := r.byte(what + " counter reset hint")
	if err != nil {
		return nil, err
	}
	if hint > byte(histogram.GaugeType) {
		return nil, r.fail("%s: counter reset hint %d unknown", what, hint)
	}
	schema, err := r.varint(what + " schema")
	if err != nil {
		return nil, err
	}
	if schema < math.MinInt32 || schema > math.MaxInt32 {
		return nil, r.fail("%s: schema %d out of range", what, schema)
	}
	h := &histogram.FloatHistogram{CounterResetHint: histogram.CounterResetHint(hint), Schema: int32(schema)}
	for _, f := range []*float64{&h.ZeroThreshold, &h.ZeroCount, &h.Count, &h.Sum} {
		if *f, err = r.xor(what, 0); err != nil {
			return nil, err
		}
	}
	if h.PositiveSpans, h.PositiveBuckets, err = r.side(what + " positive"); err != nil {
		return nil, err
	}
	if h.NegativeSpans, h.NegativeBuckets, err = r.side(what + " negative"); err != nil {
		return nil, err
	}
	n, err := r.uvarint(what + " custom value count")
	if err != nil {
		return nil, err
	}
	if h.CustomValues, err = r.floats(what+" custom values", n); err != nil {
		return nil, err
	}
	if err := h.Validate(); err != nil {
		return nil, r.fail("%s: %v", what, err)
	}
	return h, nil
}

// DecodeHistograms reads one series' histogram windows written by
// EncodeHistograms. As Decode, it refuses any other bytes with an error
// wrapping ErrCorrupt and never panics.
func DecodeHistograms(b []byte) (res int64, ws []HWindow, err error) {
	return decodeWindows(b, histogramCodec, hflagsKnown, decodeHWindow)
}

// decodeHWindow reads a histogram window after its head.
func decodeHWindow(r *reader, h head, res int64) (HWindow, error) {
	var err error
	w := HWindow{End: h.End, Count: h.Count, Stale: h.Flags&hflagStale != 0}
	flags := h.Flags
	valueFlags := flags &^ hflagStale
	switch {
	case w.Count == 0 && valueFlags != 0:
		return w, r.fail("flags %#x on a window without samples", flags)
	case valueFlags == hflagSingle|hflagResets:
		return w, r.fail("single flag with resets")
	case w.Count > 1 && valueFlags&hflagSingle != 0:
		return w, r.fail("single flag on %d samples", w.Count)
	}
	if w.Count > 0 {
		if w.First.T, err = r.offset("first timestamp", w.End, res); err != nil {
			return w, err
		}
		if w.First.H, err = r.histogram("first"); err != nil {
			return w, err
		}
		if valueFlags&hflagSingle != 0 {
			w.Last, w.Sum = w.First, w.First.H.Copy()
		} else {
			if w.Last.T, err = r.offset("last timestamp", w.End, res); err != nil {
				return w, err
			}
			if w.Last.H, err = r.histogram("last"); err != nil {
				return w, err
			}
			if w.Sum, err = r.histogram("sum"); err != nil {
				return w, err
			}
			if valueFlags&hflagResets != 0 {
				if w.Resets, err = r.histogram("resets"); err != nil {
					return w, err
				}
			}
			if isSingleHist(w) {
				return w, r.fail("one sample in the long form instead of the single flag")
			}
		}
	}
	if err := w.check(res); err != nil {
		return w, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	return w, nil
}
