package remote

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"unicode/utf8"

	"github.com/tessera-tsdb/tessera/ident"
)

// InputError is a write request that can never succeed: the HTTP layer
// answers it with 400 and the message.
type InputError struct{ Msg string }

func (e *InputError) Error() string { return e.Msg }

func inputErr(format string, args ...any) error {
	return &InputError{Msg: fmt.Sprintf(format, args...)}
}

// Series is one decoded time series: its canonical ID (aliasing the
// decoder's arena) and its samples (aliasing the decoder's sample buffer).
type Series struct {
	ID      []byte
	Samples []Sample
}

// Sample is one (timestamp ms, value) pair.
type Sample struct {
	T int64
	V float64
}

// WriteDecoder decodes remote write requests. It reuses its buffers
// between calls, so the Series of one Decode are valid only until the next;
// it is not safe for concurrent use (pool one per request goroutine).
type WriteDecoder struct {
	Series  []Series
	arena   []byte
	samples []Sample
	pairs   []ident.Pair
	// NumSamples is the total of the last Decode.
	NumSamples int
	spans      []span
}

// protobuf wire types
const (
	wireVarint = 0
	wire64     = 1
	wireBytes  = 2
	wire32     = 5
)

var errTruncated = errors.New("truncated")

// Decode parses a decompressed prompb.WriteRequest. Metadata, exemplars and
// native histograms are skipped (not stored). Series must have a __name__,
// label names must be non-empty, unique and valid UTF-8 like their values.
func (d *WriteDecoder) Decode(b []byte) error {
	d.Series = d.Series[:0]
	d.arena = d.arena[:0]
	d.samples = d.samples[:0]
	d.NumSamples = 0
	// Series IDs and samples are first recorded as offsets, since the
	// arena and sample buffers may move while they grow.
	var spans []span
	spansBuf := d.spanScratch()
	spans = spansBuf[:0]
	for i := 0; i < len(b); {
		field, wt, n := tag(b[i:])
		if n <= 0 {
			return inputErr("bad protobuf: malformed field tag at byte %d", i)
		}
		i += n
		if field == 1 && wt == wireBytes {
			msg, n, err := lenDelim(b[i:])
			if err != nil {
				return inputErr("bad protobuf: timeseries at byte %d: %v", i, err)
			}
			idFrom, sFrom := len(d.arena), len(d.samples)
			if err := d.decodeSeries(msg, len(spans)); err != nil {
				return err
			}
			spans = append(spans, span{idFrom, len(d.arena), sFrom, len(d.samples)})
			i += n
			continue
		}
		n, err := skip(b[i:], wt)
		if err != nil {
			return inputErr("bad protobuf: field %d at byte %d: %v", field, i, err)
		}
		i += n
	}
	for _, s := range spans {
		d.Series = append(d.Series, Series{ID: d.arena[s.idFrom:s.idTo:s.idTo], Samples: d.samples[s.sFrom:s.sTo:s.sTo]})
	}
	d.NumSamples = len(d.samples)
	d.saveSpanScratch(spans)
	return nil
}

func (d *WriteDecoder) decodeSeries(b []byte, index int) error {
	d.pairs = d.pairs[:0]
	for i := 0; i < len(b); {
		// Fast path: Prometheus writes labels (field 1) and samples (field
		// 2) as length-delimited messages shorter than 128 bytes, so the
		// tag and the length are one byte each.
		if i+1 < len(b) && b[i+1] < 0x80 {
			l := int(b[i+1])
			if i+2+l <= len(b) {
				switch b[i] {
				case 0x0a: // Label
					name, value, err := decodeLabel(b[i+2 : i+2+l])
					if err != nil {
						return inputErr("bad protobuf: timeseries %d: label: %v", index, err)
					}
					d.pairs = append(d.pairs, ident.Pair{Name: name, Value: value})
					i += 2 + l
					continue
				case 0x12: // Sample
					s, err := decodeSample(b[i+2 : i+2+l])
					if err != nil {
						return inputErr("bad protobuf: timeseries %d: sample: %v", index, err)
					}
					d.samples = append(d.samples, s)
					i += 2 + l
					continue
				}
			}
		}
		field, wt, n := tag(b[i:])
		if n <= 0 {
			return inputErr("bad protobuf: timeseries %d: malformed field tag", index)
		}
		i += n
		switch {
		case field == 1 && wt == wireBytes: // Label
			msg, n, err := lenDelim(b[i:])
			if err != nil {
				return inputErr("bad protobuf: timeseries %d: label: %v", index, err)
			}
			name, value, err := decodeLabel(msg)
			if err != nil {
				return inputErr("bad protobuf: timeseries %d: label: %v", index, err)
			}
			d.pairs = append(d.pairs, ident.Pair{Name: name, Value: value})
			i += n
		case field == 2 && wt == wireBytes: // Sample
			msg, n, err := lenDelim(b[i:])
			if err != nil {
				return inputErr("bad protobuf: timeseries %d: sample: %v", index, err)
			}
			s, err := decodeSample(msg)
			if err != nil {
				return inputErr("bad protobuf: timeseries %d: sample: %v", index, err)
			}
			d.samples = append(d.samples, s)
			i += n
		default: // exemplars, histograms: not stored
			n, err := skip(b[i:], wt)
			if err != nil {
				return inputErr("bad protobuf: timeseries %d: field %d: %v", index, field, err)
			}
			i += n
		}
	}
	if err := validateLabels(d.pairs, index); err != nil {
		return err
	}
	d.arena = ident.AppendSortedPairs(d.arena, d.pairs)
	return nil
}

// validateLabels applies Prometheus' rules. pairs are sorted by name after
// this call (AppendPairs would sort them anyway).
func validateLabels(pairs []ident.Pair, index int) error {
	sortPairs(pairs)
	hasName := false
	for i, p := range pairs {
		if len(p.Name) == 0 {
			return inputErr("timeseries %d: empty label name", index)
		}
		if !utf8.Valid(p.Name) {
			return inputErr("timeseries %d: label name %q is not valid UTF-8", index, p.Name)
		}
		if !utf8.Valid(p.Value) {
			return inputErr("timeseries %d: label %s: value %q is not valid UTF-8", index, p.Name, p.Value)
		}
		if i > 0 && string(pairs[i-1].Name) == string(p.Name) {
			return inputErr("timeseries %d: duplicate label name %q", index, p.Name)
		}
		if string(p.Name) == "__name__" {
			hasName = len(p.Value) > 0
		}
	}
	if !hasName {
		return inputErr("timeseries %d: series has no __name__ label (labels: %s)", index, fmtPairs(pairs))
	}
	return nil
}

// sortPairs is an insertion sort: label sets are small and usually sorted
// already, so this is one pass without allocating.
func sortPairs(p []ident.Pair) {
	for i := 1; i < len(p); i++ {
		for j := i; j > 0 && string(p[j].Name) < string(p[j-1].Name); j-- {
			p[j], p[j-1] = p[j-1], p[j]
		}
	}
}

func fmtPairs(pairs []ident.Pair) string {
	s := "{"
	for i, p := range pairs {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%s=%q", p.Name, p.Value)
	}
	return s + "}"
}

func decodeLabel(b []byte) (name, value []byte, err error) {
	// Fast path: name (field 1) then value (field 2), each shorter than
	// 128 bytes, nothing else.
	if len(b) >= 4 && b[0] == 0x0a && b[1] < 0x80 {
		nl := int(b[1])
		if j := 2 + nl; j+2 <= len(b) && b[j] == 0x12 && b[j+1] < 0x80 && j+2+int(b[j+1]) == len(b) {
			return b[2:j], b[j+2:], nil
		}
	}
	for i := 0; i < len(b); {
		field, wt, n := tag(b[i:])
		if n <= 0 {
			return nil, nil, errors.New("malformed field tag")
		}
		i += n
		if wt == wireBytes && (field == 1 || field == 2) {
			v, n, err := lenDelim(b[i:])
			if err != nil {
				return nil, nil, err
			}
			if field == 1 {
				name = v
			} else {
				value = v
			}
			i += n
			continue
		}
		n, err := skip(b[i:], wt)
		if err != nil {
			return nil, nil, err
		}
		i += n
	}
	return name, value, nil
}

func decodeSample(b []byte) (Sample, error) {
	var s Sample
	// Fast path: value (field 1, fixed64) then timestamp (field 2, varint).
	if len(b) >= 11 && b[0] == 0x09 && b[9] == 0x10 {
		if v, n := binary.Uvarint(b[10:]); n > 0 && 10+n == len(b) {
			s.V = math.Float64frombits(binary.LittleEndian.Uint64(b[1:9]))
			s.T = int64(v)
			return s, nil
		}
	}
	for i := 0; i < len(b); {
		field, wt, n := tag(b[i:])
		if n <= 0 {
			return s, errors.New("malformed field tag")
		}
		i += n
		switch {
		case field == 1 && wt == wire64:
			if len(b)-i < 8 {
				return s, errTruncated
			}
			s.V = math.Float64frombits(binary.LittleEndian.Uint64(b[i:]))
			i += 8
		case field == 2 && wt == wireVarint:
			v, n := binary.Uvarint(b[i:])
			if n <= 0 {
				return s, errors.New("bad timestamp varint")
			}
			s.T = int64(v)
			i += n
		default:
			n, err := skip(b[i:], wt)
			if err != nil {
				return s, err
			}
			i += n
		}
	}
	return s, nil
}

func tag(b []byte) (field int, wt int, n int) {
	v, n := binary.Uvarint(b)
	if n <= 0 || v>>3 == 0 || v>>3 > math.MaxInt32 {
		return 0, 0, -1
	}
	return int(v >> 3), int(v & 7), n
}

func lenDelim(b []byte) ([]byte, int, error) {
	l, n := binary.Uvarint(b)
	if n <= 0 {
		return nil, 0, errors.New("bad length varint")
	}
	if l > uint64(len(b)-n) {
		return nil, 0, fmt.Errorf("length %d past end of message", l)
	}
	return b[n : n+int(l)], n + int(l), nil
}

func skip(b []byte, wt int) (int, error) {
	switch wt {
	case wireVarint:
		_, n := binary.Uvarint(b)
		if n <= 0 {
			return 0, errors.New("bad varint")
		}
		return n, nil
	case wire64:
		if len(b) < 8 {
			return 0, errTruncated
		}
		return 8, nil
	case wire32:
		if len(b) < 4 {
			return 0, errTruncated
		}
		return 4, nil
	case wireBytes:
		_, n, err := lenDelim(b)
		return n, err
	}
	return 0, fmt.Errorf("unsupported wire type %d", wt)
}
