package remote

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"unicode/utf8"

	"github.com/tessera-tsdb/tessera/ident"
	"github.com/tessera-tsdb/tessera/internal/retain"
	"github.com/tessera-tsdb/tessera/internal/unaligned"
	"github.com/tessera-tsdb/tessera/limits"
)

// WriteDecoderV2 decodes remote write 2.0 requests
// (io.prometheus.write.v2.Request) into the same Series the 1.0 decoder
// gives: canonical IDs in one arena, samples in one buffer. Labels arrive
// as references into the request's symbols table; the table is read once
// per request into slices of the request (no copy), checked for valid
// UTF-8 once, and each series' labels are looked up in it, so decoding
// allocates nothing per series or sample once its buffers have grown.
//
// A 2.0 request's label references mean nothing without its own symbols
// table, so they cannot key a cache the way 1.0's label bytes do: by
// default every series has its ID built, and Keys[i].Raw is that ID, for
// a cache keyed by ID. With DeferIDs a cache compares its IDs with the
// series' label strings instead (MatchesID) and only the series it does
// not know have their IDs built. Like WriteDecoder it reuses its buffers between calls and is not safe
// for concurrent use.
type WriteDecoderV2 struct {
	Series []Series
	// Keys[i] is Series[i].ID and its KeyHash.
	Keys []LabelKey
	// Meta holds the metadata the series carried, with the index of the
	// first series that carried it (a repeat of one of the last few
	// entries is left out); its strings alias the request.
	Meta []Metadata
	// Exemplars of the last Decode, their labels in ExemplarPairs.
	Exemplars     []Exemplar
	ExemplarPairs []ident.Pair
	// Limits are applied to the labels of every series, as WriteDecoder
	// applies them to new series (nil: Prometheus' label rules only).
	Limits *limits.Limits
	// DeferLabelChecks leaves the label rules and limits of each series
	// (all but the label count, checked before the labels are sorted) to
	// the caller's CheckSeries: a caller with a cache of the series it
	// checked before checks only the others, as WriteDecoder does for
	// 1.0. Checking every series cost a fifth of a node's CPU under
	// steady 2.0 writes (docs/performance.md, scale30).
	DeferLabelChecks bool
	// DeferIDs (with DeferLabelChecks) leaves every series' ID unbuilt:
	// Series[i].ID and Keys[i].Raw are nil and Keys[i].Hash is LabelsHash
	// of its labels, read from per-symbol hashes without touching the
	// label bytes. The caller compares the series with a cached ID
	// (MatchesID) and builds the IDs of the others (BuildID): building
	// every ID was most of decoding under steady 2.0 writes
	// (docs/performance.md, rw2ids).
	DeferIDs bool
	// Counts of the last Decode.
	NumSamples, NumHistograms int
	// FirstHistogram is the index of the first series carrying native
	// histograms (-1 when none), to name it in a refusal.
	FirstHistogram int
	// AcceptHistograms makes Decode decode native histograms into
	// Histograms; without it they are only counted.
	AcceptHistograms bool
	// Histograms of the last Decode (AcceptHistograms), by series in order.
	Histograms []Histogram

	symbols [][]byte
	symHash []uint64 // DeferIDs: the hash of each symbol's bytes
	// DeferIDs: series i's labels are the symbol references
	// refs[2*spans[i]:2*spans[i+1]] (name, value, ...), as sent, without
	// those WithoutEmpty drops; symbols is kept until the next Decode.
	spans []uint32
	refs  []uint32
	// DeferIDs: symbol r as the ID holds it, its uvarint length and its
	// bytes, is enc[encOff[r]:encOff[r+1]]; enc has wordPad bytes before
	// the first and after the last, so that MatchesID's unchecked word
	// loads stay inside it.
	enc    []byte
	encOff []uint32
	// DeferIDs: the reference of the symbol "__name__" (-1: none), and
	// whether more than one symbol is "__name__" (then names are
	// compared by their bytes).
	nameSym  int64
	nameDups bool
	// maxLabels is the label limit of the Decode (DeferIDs).
	maxLabels int
	msgs      [][]byte
	arena     []byte
	samples   []Sample
	pairs     []ident.Pair
}

// Decode parses a decompressed io.prometheus.write.v2.Request. Native
// histograms are counted (NumHistograms) but not decoded: the caller
// decides what to do with a request carrying them. Exemplars are returned
// in Exemplars, metadata in Meta. Start (created) timestamps of samples are read and ignored, as
// Prometheus does by default (it only turns one into a zero sample with
// the created-timestamp-zero-ingestion feature flag). A series must have
// an even number of label references, each within the symbols table,
// naming valid labels with a __name__ (the 1.0 rules).
func (d *WriteDecoderV2) Decode(b []byte) error {
	d.Series, d.Keys, d.Meta = d.Series[:0], d.Keys[:0], d.Meta[:0]
	d.arena, d.samples = d.arena[:0], d.samples[:0]
	d.NumSamples, d.NumHistograms = 0, 0
	d.FirstHistogram = -1
	clear(d.Histograms)
	d.Histograms = d.Histograms[:0]
	d.Exemplars, d.ExemplarPairs = d.Exemplars[:0], d.ExemplarPairs[:0]
	clear(d.symbols)
	syms, msgs := d.symbols[:0], d.msgs[:0]
	d.refs, d.spans, d.symHash = d.refs[:0], d.spans[:0], d.symHash[:0]
	deferIDs := d.DeferIDs && d.DeferLabelChecks
	defer func() {
		// Nothing keeps the request but Series, Keys, Meta and, with
		// DeferIDs, the symbols (until the next Decode or Release).
		clear(msgs)
		d.symbols, d.msgs = syms, msgs[:0]
		if !deferIDs {
			clear(syms)
			d.symbols = syms[:0]
		}
	}()
	for i := 0; i < len(b); {
		field, wt, msg, n, err := nextField(b[i:])
		if err != nil {
			return inputErr("bad protobuf: at byte %d: %v", i, err)
		}
		switch {
		case field == 4 && wt == wireBytes:
			if !utf8.Valid(msg) {
				return inputErr("symbol %d %q is not valid UTF-8", len(syms), msg)
			}
			syms = append(syms, msg)
		case field == 5 && wt == wireBytes:
			msgs = append(msgs, msg)
		case field <= 3:
			// Fields 1 to 3 are reserved in 2.0 and are 1.0's fields: a 1.0
			// request sent with the 2.0 content type.
			return inputErr("bad request: field %d is not part of io.prometheus.write.v2.Request (a remote write 1.0 body sent as 2.0?)", field)
		}
		i += n
	}
	if len(syms) > 0 && len(syms[0]) > 0 {
		// The spec: "symbols[0] MUST be an empty string". A sender that
		// broke it numbered its references differently from ours: every
		// label it sent might be read as another.
		return inputErr("symbols[0] is %q: remote write 2.0 requires the first symbol to be the empty string", truncateSym(syms[0]))
	}
	if err := d.Limits.CheckRequest(len(msgs), 0); err != nil {
		return err // before decoding the series, as WriteDecoder
	}
	series := slices.Grow(d.Series, len(msgs))
	keys := slices.Grow(d.Keys, len(msgs))
	if deferIDs {
		d.maxLabels = d.Limits.Config().MaxLabelNamesPerSeries
		enc := append(d.enc[:0], make([]byte, wordPad)...)
		off := d.encOff[:0]
		d.nameSym, d.nameDups = -1, false
		for r, sym := range syms {
			if string(sym) == "__name__" {
				d.nameDups = d.nameSym >= 0
				d.nameSym = int64(r)
			}
			d.symHash = append(d.symHash, KeyHash(sym))
			off = append(off, uint32(len(enc)))
			enc = append(binary.AppendUvarint(enc, uint64(len(sym))), sym...)
		}
		if uint64(len(enc)) > math.MaxUint32-2*wordPad {
			return inputErr("bad request: symbols of %d bytes", len(enc))
		}
		d.enc, d.encOff = append(enc, make([]byte, wordPad)...), append(off, uint32(len(enc)))
		d.spans = append(d.spans, 0)
	}
	for i, msg := range msgs {
		idFrom, sFrom := len(d.arena), len(d.samples)
		h, err := d.decodeSeries(msg, i, syms, deferIDs)
		if err != nil {
			d.Series, d.Keys = series[:0], keys[:0]
			return err
		}
		smp := d.samples[sFrom:len(d.samples):len(d.samples)]
		if deferIDs {
			d.spans = append(d.spans, uint32(len(d.refs)/2))
			series = append(series, Series{Samples: smp, Keyed: true})
			keys = append(keys, LabelKey{Hash: h})
			continue
		}
		id := d.arena[idFrom:len(d.arena):len(d.arena)]
		series = append(series, Series{ID: id, Samples: smp, Keyed: true})
		keys = append(keys, LabelKey{Raw: id, Hash: KeyHash(id)})
	}
	d.Series, d.Keys = series, keys
	d.NumSamples = len(d.samples)
	return nil
}

// decodeSeries decodes series index into d.samples and the rest; its ID
// into d.arena, or, deferIDs, its label references into d.refs and the
// hash of its labels into h.
func (d *WriteDecoderV2) decodeSeries(b []byte, index int, syms [][]byte, deferIDs bool) (h uint64, err error) {
	d.pairs = d.pairs[:0]
	refsFrom := len(d.refs)
	// Kept in locals for the loops: through d, each label would reload
	// them (d.refs is appended to).
	symHash, allRefs := d.symHash, d.refs
	nameSym, nameDups := d.nameSym, d.nameDups
	var name, metric []byte // metric: the value of __name__ (DeferIDs)
	var nameRef uint64
	nrefs := 0 // label references read so far: a pair is complete every second
	nsyms := uint64(len(syms))
	hasMeta := false
	var meta Metadata
	for i := 0; i < len(b); {
		field, wt, msg, n, err := nextField(b[i:])
		if err != nil {
			return 0, inputErr("bad protobuf: timeseries %d: %v", index, err)
		}
		i += n
		switch {
		case field == 1 && wt == wireBytes: // labels_refs, packed
			for j := 0; j < len(msg); {
				var v uint64
				if c := msg[j]; c < 0x80 { // references below 128: one byte
					v = uint64(c)
					j++
				} else {
					var n int
					if v, n = binary.Uvarint(msg[j:]); n <= 0 {
						return 0, inputErr("bad protobuf: timeseries %d: bad label reference varint", index)
					}
					j += n
				}
				if v >= nsyms {
					return 0, inputErr("timeseries %d: label reference %d past the %d symbols", index, v, nsyms)
				}
				if nrefs&1 == 0 {
					name, nameRef = syms[v], v
				} else {
					if !deferIDs {
						d.pairs = append(d.pairs, ident.Pair{Name: name, Value: syms[v]})
					} else if len(syms[v]) > 0 || len(name) == 0 { // what WithoutEmpty keeps
						h += pairHash(symHash, nameRef, v)
						allRefs = append(allRefs, uint32(nameRef), uint32(v))
						if int64(nameRef) == nameSym || nameDups && string(name) == "__name__" {
							metric = syms[v]
						}
					}
				}
				nrefs++
			}
		case field == 1 && wt == wireVarint: // labels_refs, unpacked
			v, _ := binary.Uvarint(b[i-n+tagLen(b[i-n:]):])
			if v >= nsyms {
				return 0, inputErr("timeseries %d: label reference %d past the %d symbols", index, v, nsyms)
			}
			if nrefs&1 == 0 {
				name, nameRef = syms[v], v
			} else {
				if !deferIDs {
					d.pairs = append(d.pairs, ident.Pair{Name: name, Value: syms[v]})
				} else if len(syms[v]) > 0 || len(name) == 0 { // what WithoutEmpty keeps
					h += pairHash(symHash, nameRef, v)
					allRefs = append(allRefs, uint32(nameRef), uint32(v))
					if int64(nameRef) == nameSym || nameDups && string(name) == "__name__" {
						metric = syms[v]
					}
				}
			}
			nrefs++
		case field == 2 && wt == wireBytes: // Sample
			// decodeSample's fast path (value, then timestamp), inline
			if len(msg) >= 11 && msg[0] == 0x09 && msg[9] == 0x10 {
				if t, n := binary.Uvarint(msg[10:]); n > 0 && 10+n == len(msg) {
					d.samples = append(d.samples, Sample{T: int64(t), V: math.Float64frombits(binary.LittleEndian.Uint64(msg[1:9]))})
					break
				}
			}
			s, err := decodeSample(msg)
			if err != nil {
				return 0, inputErr("bad protobuf: timeseries %d: sample: %v", index, err)
			}
			d.samples = append(d.samples, s)
		case field == 3 && wt == wireBytes: // Histogram
			d.NumHistograms++
			if d.FirstHistogram < 0 {
				d.FirstHistogram = index
			}
			if d.AcceptHistograms {
				h, err := decodeHistogramV2(msg, index)
				if err != nil {
					return 0, inputErr("bad protobuf: timeseries %d: histogram: %v", index, err)
				}
				d.Histograms = append(d.Histograms, h)
			}
		case field == 4 && wt == wireBytes: // Exemplar
			from := len(d.ExemplarPairs)
			e, pairs, err := decodeExemplar(msg, syms, d.ExemplarPairs)
			d.ExemplarPairs = pairs
			if err != nil {
				return 0, inputErr("bad protobuf: timeseries %d: exemplar: %v", index, err)
			}
			if err := exemplarLabels(d.ExemplarPairs[from:], index, false); err != nil {
				return 0, err
			}
			e.Series, e.From, e.To = index, from, len(d.ExemplarPairs)
			d.Exemplars = append(d.Exemplars, e)
		case field == 5 && wt == wireBytes: // Metadata
			refs, err := decodeMetadata(msg, len(syms))
			if err != nil {
				return 0, inputErr("bad protobuf: timeseries %d: metadata: %v", index, err)
			}
			meta = refs.resolve(syms)
			hasMeta = meta.Type != 0 || len(meta.Unit) > 0 || len(meta.Help) > 0
		}
	}
	d.refs = allRefs
	if nrefs&1 != 0 {
		return 0, inputErr("timeseries %d: odd number (%d) of label references", index, nrefs)
	}
	if deferIDs {
		// The labels stay references: pairs are made only to name a
		// series refused, and the metric's name is looked up by them.
		refs := d.refs[refsFrom:]
		if d.maxLabels > 0 && len(refs)/2 > d.maxLabels {
			if err := d.Limits.CheckLabelCount(d.pairsOf(refs, syms)); err != nil {
				return 0, &InputError{Msg: fmt.Sprintf("timeseries %d: %v", index, err), Err: err}
			}
		}
		if hasMeta {
			meta.Series, meta.Name = index, metric
			d.addMeta(meta)
		}
		return h, nil
	}
	d.pairs = ident.WithoutEmpty(d.pairs)
	pairs := d.pairs
	if d.DeferLabelChecks {
		if err := d.Limits.CheckLabelCount(pairs); err != nil {
			return 0, &InputError{Msg: fmt.Sprintf("timeseries %d: %v", index, err), Err: err}
		}
		sortPairs(pairs) // the ID is built from sorted labels either way
	} else if err := validateLabels(d.Limits, pairs, index); err != nil {
		return 0, err
	}
	if hasMeta {
		meta.Series = index
		for _, p := range pairs {
			if string(p.Name) == "__name__" {
				meta.Name = p.Value
			}
		}
		d.addMeta(meta)
	}
	d.arena = ident.AppendSortedPairs(d.arena, pairs)
	return 0, nil
}

// pairHash is the hash of one label (name and value the symbols of refs n
// and v) in a series' hash (DeferIDs), which sums those of the labels the
// ID is built from: equal label sets, whatever their order or symbol
// references, hash alike.
func pairHash(symHash []uint64, n, v uint64) uint64 {
	x := symHash[n]*0x9e3779b97f4a7c15 ^ symHash[v]
	x ^= x >> 31
	x *= 0xd6e8feb86659fd93
	return x ^ x>>32
}

// MatchesID reports whether series i of the last Decode (DeferIDs) is the
// series of id: its labels, as sent, are id's labels in id's order. A
// series whose labels are id's but not in its (sorted) order does not
// match; the caller builds its ID (BuildID) as for a new series.
//
// It runs on every series of every steady 2.0 request. id must be the
// concatenation of the symbols' ID forms (enc) in the order of the
// series' references; each is compared inline in one or two 8-byte words
// (masked to its length), as labelsAreID compares 1.0's labels: through
// a memequal call per name and per value (after reading each length's
// varint) it cost most of the 2.0 cache lookup (docs/performance.md,
// rw2cpu).
func (d *WriteDecoderV2) MatchesID(i int, id []byte) bool {
	enc, off := d.enc, d.encOff
	j := 0 // id[:j] matched so far
	for _, r := range d.refs[2*d.spans[i] : 2*d.spans[i+1]] {
		s, e := int(off[r]), int(off[r+1]) // wordPad <= s < e <= len(enc)-wordPad
		n := e - s
		je := j + n
		if je > len(id) {
			return false
		}
		// encEqual's common cases, inline (it is too big to be inlined).
		if n <= 8 && je >= 8 {
			if (unaligned.Load64(enc, e-8)^unaligned.Load64(id, je-8))>>(64-8*uint(n)) != 0 {
				return false
			}
		} else if n > 8 && n <= 16 {
			if unaligned.Load64(enc, s) != unaligned.Load64(id, j) || unaligned.Load64(enc, e-8) != unaligned.Load64(id, je-8) {
				return false
			}
		} else if !encEqual(enc, id, s, e, j, je) {
			return false
		}
		j = je
	}
	return j == len(id)
}

// wordPad is the zero bytes around the ID forms in enc: a word load
// ending at a form's end or starting at its start stays inside enc.
const wordPad = 8

// encEqual reports whether enc[s:e] equals id[j:je], with e-s == je-j >= 1,
// wordPad bytes of enc on either side of [s, e), and je <= len(id). Up to
// 8 bytes are one word load from each, ending at the segment's end (or,
// within 8 bytes of id's start, starting at its start), masked to the
// segment; up to 16 two words; longer ones memequal.
func encEqual(enc, id []byte, s, e, j, je int) bool {
	n := e - s
	switch {
	case n <= 8 && je >= 8:
		return (unaligned.Load64(enc, e-8)^unaligned.Load64(id, je-8))>>(64-8*uint(n)) == 0
	case n <= 8 && j+8 <= len(id):
		return (unaligned.Load64(enc, s)^unaligned.Load64(id, j))<<(64-8*uint(n)) == 0
	case n > 8 && n <= 16:
		return unaligned.Load64(enc, s) == unaligned.Load64(id, j) && unaligned.Load64(enc, e-8) == unaligned.Load64(id, je-8)
	}
	return string(enc[s:e]) == string(id[j:je])
}

// pairsOf returns the labels of refs (name, value, ...) into syms in
// d.pairs.
func (d *WriteDecoderV2) pairsOf(refs []uint32, syms [][]byte) []ident.Pair {
	pairs := d.pairs[:0]
	for k := 0; k < len(refs); k += 2 {
		pairs = append(pairs, ident.Pair{Name: syms[refs[k]], Value: syms[refs[k+1]]})
	}
	d.pairs = pairs
	return pairs
}

// BuildID builds the ID of series i of the last Decode (DeferIDs) from its
// labels, sorted, into Series[i].ID and Keys[i].Raw, as Decode builds it
// without DeferIDs.
func (d *WriteDecoderV2) BuildID(i int) {
	pairs := d.pairsOf(d.refs[2*d.spans[i]:2*d.spans[i+1]], d.symbols)
	sortPairs(pairs)
	from := len(d.arena)
	d.arena = ident.AppendSortedPairs(d.arena, pairs)
	id := d.arena[from:len(d.arena):len(d.arena)]
	d.Series[i].ID, d.Keys[i].Raw = id, id
}

// CheckSeries applies the label rules and limits to series i of the last
// Decode, as Decode does itself without DeferLabelChecks (same errors).
// With DeferIDs, BuildID(i) first.
func (d *WriteDecoderV2) CheckSeries(i int) error {
	if err := d.Limits.CheckID(d.Series[i].ID); err != nil {
		return &InputError{Msg: fmt.Sprintf("timeseries %d: %v", i, err), Err: err}
	}
	return nil
}

// addMeta appends m to Meta unless one of the last few entries is the
// same: the same symbols (compared by address: a symbol is one slice of
// the request) and type. A 2.0 request repeats its metrics' metadata on
// every series; this keeps Meta to about one entry per metric.
func (d *WriteDecoderV2) addMeta(m Metadata) {
	for i := len(d.Meta) - 1; i >= max(0, len(d.Meta)-8); i-- {
		p := &d.Meta[i]
		if p.Type == m.Type && sameSlice(p.Name, m.Name) && sameSlice(p.Help, m.Help) && sameSlice(p.Unit, m.Unit) {
			return
		}
	}
	d.Meta = append(d.Meta, m)
}

func sameSlice(a, b []byte) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// tagLen is the length of the field tag at the front of b.
func tagLen(b []byte) int {
	_, n := binary.Uvarint(b)
	return n
}

// metaRefs is a v2 Metadata message decoded: its type, and its help and
// unit references plus one (0: not sent).
type metaRefs struct {
	typ        int32
	help, unit uint64
}

// resolve is the Metadata of r (Series and Name aside), its strings in
// syms.
func (r metaRefs) resolve(syms [][]byte) Metadata {
	m := Metadata{Type: r.typ}
	if r.help > 0 {
		m.Help = syms[r.help-1]
	}
	if r.unit > 0 {
		m.Unit = syms[r.unit-1]
	}
	return m
}

// decodeMetadata reads a v2 Metadata message: type (1), help_ref (3),
// unit_ref (4), references into nsyms symbols.
func decodeMetadata(b []byte, nsyms int) (metaRefs, error) {
	var m metaRefs
	for i := 0; i < len(b); {
		field, wt, n := tag(b[i:])
		if n <= 0 {
			return m, errors.New("malformed field tag")
		}
		i += n
		if wt != wireVarint {
			l, err := skip(b[i:], wt)
			if err != nil {
				return m, err
			}
			i += l
			continue
		}
		v, l := binary.Uvarint(b[i:])
		if l <= 0 {
			return m, errors.New("bad varint")
		}
		i += l
		switch field {
		case 1:
			if v > math.MaxInt32 {
				return m, fmt.Errorf("type %d out of range", v)
			}
			m.typ = int32(v)
		case 3, 4:
			if v >= uint64(nsyms) {
				return m, fmt.Errorf("symbol reference %d past the %d symbols", v, nsyms)
			}
			if field == 3 {
				m.help = v + 1
			} else {
				m.unit = v + 1
			}
		}
	}
	return m, nil
}

// Release is WriteDecoder.Release for 2.0.
func (d *WriteDecoderV2) Release() bool {
	var over bool
	retain.Trim(&over, &d.Series)
	retain.Trim(&over, &d.Keys)
	retain.Trim(&over, &d.Meta)
	retain.Trim(&over, &d.Exemplars)
	retain.Trim(&over, &d.ExemplarPairs)
	retain.Trim(&over, &d.Histograms)
	retain.Trim(&over, &d.symbols)
	retain.Trim(&over, &d.msgs)
	retain.Trim(&over, &d.arena)
	retain.Trim(&over, &d.samples)
	retain.Trim(&over, &d.pairs)
	retain.Trim(&over, &d.symHash)
	retain.Trim(&over, &d.spans)
	retain.Trim(&over, &d.refs)
	retain.Trim(&over, &d.enc)
	retain.Trim(&over, &d.encOff)
	clear(d.symbols) // the request's bytes are not held past it
	d.symbols = d.symbols[:0]
	return over
}

// truncateSym shortens a symbol for a message: a symbol may be megabytes.
func truncateSym(b []byte) []byte {
	if len(b) > 64 {
		return b[:64]
	}
	return b
}
