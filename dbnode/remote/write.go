package remote

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"slices"
	"unicode/utf8"

	"github.com/tessera-tsdb/tessera/ident"
	"github.com/tessera-tsdb/tessera/internal/retain"
	"github.com/tessera-tsdb/tessera/limits"
)

// InputError is a write request that can never succeed: the HTTP layer
// answers it with 400 and the message. Reason, when set, names the kind of
// refusal for the remote_write_errors metric (default "bad_request").
type InputError struct {
	Msg    string
	Reason string
	// Err is the refusal it reports, when it has one (a *limits.Error).
	Err error
}

func (e *InputError) Error() string { return e.Msg }

func (e *InputError) Unwrap() error { return e.Err }

func inputErr(format string, args ...any) error {
	return &InputError{Msg: fmt.Sprintf(format, args...)}
}

// Series is one decoded time series: its canonical ID (aliasing the
// decoder's arena; nil for a Known series) and its samples (aliasing the
// decoder's sample buffer). It is kept small: a request's Series are
// written once and read twice, thousands of them.
type Series struct {
	ID      []byte
	Samples []Sample
	// Known is set when Known recognised the series' label key: its labels
	// were not validated or encoded again, and ID is nil (the caller has
	// the ID of what it recognised).
	Known bool
	// Keyed is set when the series' label key (WriteDecoder.Keys) is a
	// cache key for it: its label fields are all in front of the others.
	Keyed bool
}

// Metadata is what a request says about a metric: its name, type (the
// MetricType number of prompb and of the 2.0 types, which agree: 0
// unknown, 1 counter, 2 gauge, 3 histogram, 4 gaugehistogram, 5 summary,
// 6 info, 7 stateset), unit and help. Series is the index of the 2.0 series
// that carried it (-1 for 1.0 metadata). Its bytes alias the request.
type Metadata struct {
	Series           int
	Type             int32
	Name, Unit, Help []byte
}

// Exemplar is one exemplar of series Series (an index into the decoder's
// Series): its labels are ExemplarPairs[From:To] of the decoder that decoded it,
// aliasing the request.
type Exemplar struct {
	Series   int
	From, To int
	V        float64
	T        int64
}

// exemplarLabels checks an exemplar's labels as OpenMetrics and Prometheus
// do: names non-empty, at most exemplar.ExemplarMaxLabelSetLength (128)
// UTF-8 characters of names and values together.
func exemplarLabels(pairs []ident.Pair, index int, checkUTF8 bool) error {
	n := 0
	for _, p := range pairs {
		if len(p.Name) == 0 {
			return inputErr("timeseries %d: exemplar: empty label name", index)
		}
		if checkUTF8 && (!utf8.Valid(p.Name) || !utf8.Valid(p.Value)) {
			return inputErr("timeseries %d: exemplar: label %q is not valid UTF-8", index, p.Name)
		}
		n += utf8.RuneCount(p.Name) + utf8.RuneCount(p.Value)
	}
	if n > 128 {
		return inputErr("timeseries %d: exemplar labels are %d UTF-8 characters long, over the limit of 128", index, n)
	}
	return nil
}

// decodeExemplar reads an exemplar message whose labels come either as
// Label messages (1.0: field 1) or as references into syms (2.0: packed
// field 1), appending them to pairs. Value is field 2, timestamp field 3
// in both.
func decodeExemplar(b []byte, syms [][]byte, pairs []ident.Pair) (e Exemplar, out []ident.Pair, err error) {
	var name []byte
	nrefs := 0
	for i := 0; i < len(b); {
		field, wt, n := tag(b[i:])
		if n <= 0 {
			return e, pairs, errors.New("malformed field tag")
		}
		i += n
		switch {
		case field == 1 && wt == wireBytes && syms == nil:
			m, l, err := lenDelim(b[i:])
			if err != nil {
				return e, pairs, err
			}
			i += l
			name, value, err := decodeLabel(m)
			if err != nil {
				return e, pairs, fmt.Errorf("label: %w", err)
			}
			pairs = append(pairs, ident.Pair{Name: name, Value: value})
		case field == 1 && wt == wireBytes: // 2.0 labels_refs, packed
			m, l, err := lenDelim(b[i:])
			if err != nil {
				return e, pairs, err
			}
			i += l
			for j := 0; j < len(m); {
				v, k := binary.Uvarint(m[j:])
				if k <= 0 {
					return e, pairs, errors.New("bad label reference varint")
				}
				j += k
				if v >= uint64(len(syms)) {
					return e, pairs, fmt.Errorf("label reference %d past the %d symbols", v, len(syms))
				}
				if nrefs&1 == 0 {
					name = syms[v]
				} else {
					pairs = append(pairs, ident.Pair{Name: name, Value: syms[v]})
				}
				nrefs++
			}
		case field == 2 && wt == wire64:
			if len(b)-i < 8 {
				return e, pairs, errTruncated
			}
			e.V = math.Float64frombits(binary.LittleEndian.Uint64(b[i:]))
			i += 8
		case field == 3 && wt == wireVarint:
			v, l := binary.Uvarint(b[i:])
			if l <= 0 {
				return e, pairs, errors.New("bad timestamp varint")
			}
			e.T = int64(v)
			i += l
		default:
			l, err := skip(b[i:], wt)
			if err != nil {
				return e, pairs, err
			}
			i += l
		}
	}
	if nrefs&1 != 0 {
		return e, pairs, fmt.Errorf("odd number (%d) of label references", nrefs)
	}
	return e, pairs, nil
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
	// AcceptHistograms makes Decode decode native histograms into
	// Histograms; without it a request carrying any is refused whole
	// (for a backend that cannot store them end to end).
	AcceptHistograms bool
	// Histograms of the last Decode, by series in order.
	Histograms []Histogram
	// Meta is the metadata of the last Decode (WriteRequest.metadata),
	// aliasing the request.
	Meta []Metadata
	// Exemplars of the last Decode, their labels in ExemplarPairs.
	Exemplars     []Exemplar
	ExemplarPairs []ident.Pair
	// Keys are the label keys of Series, by index, valid until the next
	// Decode (a key is only a cache key where Series[i].Keyed).
	Keys  []LabelKey
	msgs  [][]byte
	known []bool

	// Known, when set, is asked which series it has seen before their
	// labels are validated and encoded. It gets the label keys of every
	// series of the request at once, so it can look them all up in one
	// sweep (independent lookups, whose cache misses the CPU overlaps), and
	// sets known[i] for a series whose ID it has: one it saw decoded from
	// exactly these label bytes (decoding is a function of the bytes). It
	// must not keep keys or known.
	Known func(keys []LabelKey, known []bool)

	// Limits are applied to the labels of every series Known does not
	// know (nil: Prometheus' label rules only).
	Limits *limits.Limits
}

// Release drops the buffers grown over retain.MaxBytes, so that a pooled
// decoder does not keep the peak of the largest request it decoded, and
// reports whether it dropped any. Call it between requests.
func (d *WriteDecoder) Release() bool {
	var over bool
	retain.Trim(&over, &d.Series)
	retain.Trim(&over, &d.arena)
	retain.Trim(&over, &d.samples)
	retain.Trim(&over, &d.pairs)
	retain.Trim(&over, &d.Histograms)
	retain.Trim(&over, &d.Meta)
	retain.Trim(&over, &d.Exemplars)
	retain.Trim(&over, &d.ExemplarPairs)
	retain.Trim(&over, &d.Keys)
	retain.Trim(&over, &d.msgs)
	retain.Trim(&over, &d.known)
	return over
}

// LabelKey identifies a series by the raw bytes of its labels in a
// request (its label fields, aliasing the request) and their KeyHash.
type LabelKey struct {
	Raw  []byte
	Hash uint64
}

// keySeed seeds KeyHash for this process.
var keySeed = maphash.MakeSeed()

// KeyHash hashes label bytes for in-memory maps (the series cache). It is
// the runtime's AES-based hash, about 2.5x faster than xxhash on ~100-byte
// label sets, and seeded per process: keys never leave the process, and a
// client cannot craft label sets that collide on purpose (a collision only
// costs a cache miss, but a flood of them would cost every hit).
func KeyHash(raw []byte) uint64 { return maphash.Bytes(keySeed, raw) }

// span is where one series being decoded starts in the arena and the
// sample buffer; known is set when only its samples were decoded (Known
// recognised it); split when its label fields are not all in front
// (Keys[i] is then no cache key).
type span struct {
	idFrom, sFrom, hFrom int
	known, split         bool
	// whether the series carries what is not stored (refused after its
	// labels are decoded, so the refusal can name the series)
	histograms bool
}

// protobuf wire types
const (
	wireVarint = 0
	wire64     = 1
	wireBytes  = 2
	wire32     = 5
)

var errTruncated = errors.New("truncated")

// Reasons of the refusals of data this node does not store (InputError.Reason).
const ReasonHistograms = "native_histograms"

// unsupported is the refusal of a request carrying data of a kind this
// node does not store. The whole request is refused, floats included:
// Prometheus drops a request answered 4xx and retries one answered 5xx, so
// a 400 that writes nothing is the only answer that is both honest and
// final (a partial write answered 2xx would lose the rest silently).
func unsupported(reason, what, hint string) error {
	return &InputError{Reason: reason, Msg: fmt.Sprintf(
		"%s: not supported yet (this node does not store them); the whole request was refused and nothing was written: %s", what, hint)}
}

// Decode parses a decompressed prompb.WriteRequest. A request carrying
// native histograms is refused whole (InputError with a Reason): they are
// not stored yet, and acknowledging them would lose them silently.
// Metadata is returned in Meta, exemplars in Exemplars. Series must have a __name__, label names must be
// non-empty, unique and valid UTF-8 like their values.
func (d *WriteDecoder) Decode(b []byte) error {
	d.Series = d.Series[:0]
	d.arena = d.arena[:0]
	d.samples = d.samples[:0]
	d.NumSamples = 0
	clear(d.Histograms)
	d.Histograms = d.Histograms[:0]
	d.Meta = d.Meta[:0]
	d.Exemplars, d.ExemplarPairs = d.Exemplars[:0], d.ExemplarPairs[:0]
	// First the series' messages and label keys, then what Known knows
	// of them all, then each series in full.
	msgs, keys := d.msgs[:0], d.Keys[:0]
	for i := 0; i < len(b); {
		field, wt, msg, n, err := nextField(b[i:])
		if err != nil {
			return inputErr("bad protobuf: at byte %d: %v", i, err)
		}
		if field == 1 && wt == wireBytes {
			raw := msg[:labelRun(msg)]
			msgs = append(msgs, msg)
			keys = append(keys, LabelKey{Raw: raw, Hash: KeyHash(raw)})
		} else if field == 3 && wt == wireBytes {
			m, err := decodeMetadataV1(msg)
			if err != nil {
				clear(msgs) // nothing keeps the request past a refusal
				d.msgs, d.Keys = msgs[:0], keys[:0]
				return inputErr("bad metadata %d: %v", len(d.Meta), err)
			}
			d.Meta = append(d.Meta, m)
		}
		i += n
	}
	d.msgs, d.Keys = msgs, keys
	// The series count is known now: a request over the limit is refused
	// before its series are decoded (250,000 of them took seconds each).
	if err := d.Limits.CheckRequest(len(msgs), 0); err != nil {
		clear(msgs)
		d.msgs, d.Keys = msgs[:0], keys[:0]
		return err
	}
	known := d.known[:0]
	if d.Known != nil {
		known = slices.Grow(known, len(keys))[:len(keys)]
		clear(known)
		d.Known(keys, known)
	}
	d.known = known
	// Each series is appended as soon as it is decoded. Its ID and samples
	// slice the arena and sample buffer as they are then: when a buffer
	// grows later, earlier series keep slicing the old array, whose bytes
	// nothing writes again, so they stay right without a fix-up pass.
	series := slices.Grow(d.Series[:0], len(msgs))
	for i, msg := range msgs {
		sp := span{idFrom: len(d.arena), sFrom: len(d.samples), hFrom: len(d.Histograms)}
		if err := d.decodeSeries(msg, i, len(keys[i].Raw), i < len(known) && known[i], &sp); err != nil {
			d.Series = series[:0]
			return err
		}
		out := Series{Samples: d.samples[sp.sFrom:len(d.samples):len(d.samples)], Known: sp.known, Keyed: !sp.split}
		if !out.Known {
			out.ID = d.arena[sp.idFrom:len(d.arena):len(d.arena)]
		}
		series = append(series, out)
	}
	d.Series = series
	d.NumSamples = len(d.samples)
	clear(d.msgs) // Keys and Series still alias the request until the next Decode
	return nil
}

// decodeSeries decodes one TimeSeries message into the arena and the
// sample buffer, recording in sp what is not there. A known series has
// only its samples decoded.
func (d *WriteDecoder) decodeSeries(b []byte, index, rawLen int, known bool, sp *span) error {
	if known {
		ok, err := d.decodeSamples(b[rawLen:], index)
		if err != nil {
			return err
		}
		if ok {
			sp.known = true
			return nil
		}
		d.Histograms = d.Histograms[:sp.hFrom]
		// A label field after the samples: raw was not all of them.
		d.samples = d.samples[:sp.sFrom]
	}
	d.pairs = d.pairs[:0]
	for i := 0; i < len(b); {
		field, wt, msg, n, err := nextField(b[i:])
		if err != nil {
			return inputErr("bad protobuf: timeseries %d: %v", index, err)
		}
		i += n
		switch {
		case field == 1 && wt == wireBytes: // Label
			if i > rawLen {
				sp.split = true // not all labels in front: no cache key
			}
			name, value, err := decodeLabel(msg)
			if err != nil {
				return inputErr("bad protobuf: timeseries %d: label: %v", index, err)
			}
			d.pairs = append(d.pairs, ident.Pair{Name: name, Value: value})
		case field == 2 && wt == wireBytes: // Sample
			s, err := decodeSample(msg)
			if err != nil {
				return inputErr("bad protobuf: timeseries %d: sample: %v", index, err)
			}
			d.samples = append(d.samples, s)
		case field == 3 && wt == wireBytes: // Exemplar
			from := len(d.ExemplarPairs)
			e, pairs, err := decodeExemplar(msg, nil, d.ExemplarPairs)
			d.ExemplarPairs = pairs
			if err != nil {
				return inputErr("bad protobuf: timeseries %d: exemplar: %v", index, err)
			}
			if err := exemplarLabels(d.ExemplarPairs[from:], index, true); err != nil {
				return err
			}
			e.Series, e.From, e.To = index, from, len(d.ExemplarPairs)
			d.Exemplars = append(d.Exemplars, e)
		case field == 4 && wt == wireBytes: // Histogram
			if !d.AcceptHistograms {
				sp.histograms = true
				continue
			}
			h, err := decodeHistogramV1(msg, index)
			if err != nil {
				return inputErr("bad protobuf: timeseries %d: histogram: %v", index, err)
			}
			d.Histograms = append(d.Histograms, h)
		}
	}
	d.pairs = ident.WithoutEmpty(d.pairs)
	if err := d.validateLabels(d.pairs, index); err != nil {
		return err
	}
	if sp.histograms {
		return unsupported(ReasonHistograms, fmt.Sprintf("timeseries %d %s carries native histogram samples", index, fmtPairs(d.pairs)),
			"set send_native_histograms: false in the remote_write section, or drop the histograms with write_relabel_configs")
	}
	d.arena = ident.AppendSortedPairs(d.arena, d.pairs)
	return nil
}

// decodeSamples decodes the fields after a known series' labels. It
// reports false, decoding no further, at a label field: the labels were
// not all in front, so the series must be decoded in full.
func (d *WriteDecoder) decodeSamples(b []byte, index int) (bool, error) {
	for i := 0; i < len(b); {
		field, wt, msg, n, err := nextField(b[i:])
		if err != nil {
			return false, inputErr("bad protobuf: timeseries %d: %v", index, err)
		}
		i += n
		switch {
		case field == 1 && wt == wireBytes, field == 3, field == 4:
			// A label after the samples, or an exemplar or histogram:
			// the full decode finds them (and refuses histograms unless
			// AcceptHistograms).
			return false, nil
		case field == 2 && wt == wireBytes:
			s, err := decodeSample(msg)
			if err != nil {
				return false, inputErr("bad protobuf: timeseries %d: sample: %v", index, err)
			}
			d.samples = append(d.samples, s)
		}
	}
	return true, nil
}

// labelRun returns the length of the label fields at the front of a
// TimeSeries message (Prometheus writes every label before the samples).
func labelRun(b []byte) int {
	i := 0
	for i < len(b) {
		field, wt, _, n, err := nextField(b[i:])
		if err != nil || field != 1 || wt != wireBytes {
			break
		}
		i += n
	}
	return i
}

// nextField reads one field: its number, wire type, the message bytes of
// a length-delimited field, and the bytes it spans. Prometheus writes
// labels and samples as messages shorter than 128 bytes, so the common
// case is a one-byte tag and a one-byte length, read without the varint
// path.
func nextField(b []byte) (field, wt int, msg []byte, n int, err error) {
	if len(b) >= 2 && b[0]&7 == wireBytes && b[0] < 0x80 && b[1] < 0x80 && 2+int(b[1]) <= len(b) {
		return int(b[0] >> 3), wireBytes, b[2 : 2+int(b[1])], 2 + int(b[1]), nil
	}
	field, wt, n = tag(b)
	if n <= 0 {
		return 0, 0, nil, 0, errors.New("malformed field tag")
	}
	if wt == wireBytes {
		m, l, err := lenDelim(b[n:])
		if err != nil {
			return 0, 0, nil, 0, fmt.Errorf("field %d: %w", field, err)
		}
		return field, wt, m, n + l, nil
	}
	l, err := skip(b[n:], wt)
	if err != nil {
		return 0, 0, nil, 0, fmt.Errorf("field %d: %w", field, err)
	}
	return field, wt, nil, n + l, nil
}

// validateLabels sorts pairs by name and applies Prometheus' rules and
// the label limits (limits.CheckLabels, the validation the node RPC path
// shares).
func (d *WriteDecoder) validateLabels(pairs []ident.Pair, index int) error {
	return validateLabels(d.Limits, pairs, index)
}

func validateLabels(l *limits.Limits, pairs []ident.Pair, index int) error {
	err := l.CheckLabelCount(pairs) // before the quadratic sort
	if err == nil {
		sortPairs(pairs)
		err = l.CheckLabels(pairs)
	}
	if err != nil {
		return &InputError{Msg: fmt.Sprintf("timeseries %d: %v", index, err), Err: err}
	}
	return nil
}

// fmtPairs formats labels for an error message.
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

// sortPairs is an insertion sort: label sets are small and usually sorted
// already, so this is one pass without allocating.
func sortPairs(p []ident.Pair) {
	for i := 1; i < len(p); i++ {
		for j := i; j > 0 && string(p[j].Name) < string(p[j-1].Name); j-- {
			p[j], p[j-1] = p[j-1], p[j]
		}
	}
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

// decodeMetadataV1 reads a prompb.MetricMetadata: type (1),
// metric_family_name (2), help (4), unit (5). A name is required: metadata
// is kept per metric name.
func decodeMetadataV1(b []byte) (Metadata, error) {
	m := Metadata{Series: -1}
	for i := 0; i < len(b); {
		field, wt, n := tag(b[i:])
		if n <= 0 {
			return m, errors.New("malformed field tag")
		}
		i += n
		switch {
		case field == 1 && wt == wireVarint:
			v, l := binary.Uvarint(b[i:])
			if l <= 0 {
				return m, errors.New("bad type varint")
			}
			if v > math.MaxInt32 {
				return m, fmt.Errorf("type %d out of range", v)
			}
			m.Type = int32(v)
			i += l
		case wt == wireBytes && (field == 2 || field == 4 || field == 5):
			v, l, err := lenDelim(b[i:])
			if err != nil {
				return m, err
			}
			if !utf8.Valid(v) {
				return m, fmt.Errorf("field %d is not valid UTF-8", field)
			}
			switch field {
			case 2:
				m.Name = v
			case 4:
				m.Help = v
			case 5:
				m.Unit = v
			}
			i += l
		default:
			l, err := skip(b[i:], wt)
			if err != nil {
				return m, err
			}
			i += l
		}
	}
	if len(m.Name) == 0 {
		return m, errors.New("no metric_family_name")
	}
	return m, nil
}
