package commitlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/tessera-tsdb/tessera/dbnode/encoding"
)

var errMalformed = errors.New("malformed record")

type seriesDef struct {
	ns   uint32
	id   []byte
	lost bool // defined in a record that replay had to skip
}

type nsDef struct {
	name string
	lost bool // defined in a record that replay had to skip
}

// decoder reads the records of one file. It mirrors encoder: the ref
// tables grow as definitions are read and are never shared across files.
type decoder struct {
	namespaces []nsDef
	series     []seriesDef
	ids        arena[byte] // backing store for series IDs handed to replay
	out        []Entry     // the entries of the last decoded record
	outNs      []uint32    // namespace ref of each entry in out
	hout       []HistEntry // the histogram entries of the last decoded record
	houtNs     []uint32    // namespace ref of each entry in hout

	// version is the file's: records of version 3 end with a histogram
	// section. guess (a file whose header is damaged) tries 3, then 2.
	version uint32
	guess   bool

	// gap is set once a record of the file was skipped: the definitions
	// it held are unknown, so refs may jump ahead (the skipped refs are
	// lost) and samples of a lost series are dropped, counted in
	// unresolved, instead of failing their record.
	gap        bool
	limit      uint64 // bound on refs skipped at once: the file's size (a definition takes >= 3 bytes)
	unresolved int    // entries of the last decoded record dropped for a lost definition
	filled     []int  // lost namespace refs the record being decoded named, undone if it fails
}

// skipped tells the decoder that the record(s) before the next one were
// lost: from now on refs may refer to definitions it never saw.
func (d *decoder) skipped() { d.gap = true }

// decode parses one record payload into d.out. It checks every ref, so a
// record that passed its checksum but does not fit the file's tables (a
// bug or a checksum collision) is reported instead of replayed wrongly.
// A record that fails leaves the tables as they were, so the decoder can
// go on with the next record.
func (d *decoder) decode(p []byte) error {
	if !d.guess {
		return d.decodeVersion(p, d.version)
	}
	// A version 3 record never decodes as version 2 (its histogram count
	// would be trailing bytes) nor a version 2 one as 3 (it lacks the
	// count), so trying both cannot mistake one for the other.
	if err := d.decodeVersion(p, 3); err == nil {
		return nil
	}
	return d.decodeVersion(p, 2)
}

func (d *decoder) decodeVersion(p []byte, version uint32) error {
	nNsBefore, nSeriesBefore := len(d.namespaces), len(d.series)
	d.filled = d.filled[:0]
	err := d.decodeRecord(p, version)
	if err != nil {
		for _, ref := range d.filled {
			if ref < nNsBefore {
				d.namespaces[ref] = nsDef{lost: true}
			}
		}
		d.namespaces, d.series = d.namespaces[:nNsBefore], d.series[:nSeriesBefore]
		d.out, d.outNs, d.unresolved = d.out[:0], d.outNs[:0], 0
		clear(d.hout)
		d.hout, d.houtNs = d.hout[:0], d.houtNs[:0]
	}
	return err
}

func (d *decoder) decodeRecord(p []byte, version uint32) error {
	d.out, d.outNs, d.unresolved = d.out[:0], d.outNs[:0], 0
	clear(d.hout)
	d.hout, d.houtNs = d.hout[:0], d.houtNs[:0]
	r := reader{b: p}

	nNs := r.count()
	for i := uint64(0); i < nNs && r.err == nil; i++ {
		ref := r.uvarint()
		name := r.bytes()
		if r.err != nil {
			break
		}
		next := uint64(len(d.namespaces))
		switch {
		case ref < next && d.namespaces[ref].lost:
			d.namespaces[ref] = nsDef{name: string(name)} // first named in a skipped record
			d.filled = append(d.filled, int(ref))
			continue
		case ref < next:
			// Defined again (every record that defines series names their
			// namespaces): it must be the same name.
			if d.namespaces[ref].name != string(name) {
				return fmt.Errorf("%w: namespace ref %d redefined as %q, was %q", errMalformed, ref, name, d.namespaces[ref].name)
			}
			continue
		case ref > next && !(d.gap && ref-next <= d.limit):
			return fmt.Errorf("%w: namespace ref %d, want at most %d", errMalformed, ref, next)
		}
		for uint64(len(d.namespaces)) < ref {
			d.namespaces = append(d.namespaces, nsDef{lost: true})
		}
		d.namespaces = append(d.namespaces, nsDef{name: string(name)})
	}

	nSeries := r.count()
	for i := uint64(0); i < nSeries && r.err == nil; i++ {
		ref := r.uvarint()
		ns := r.uvarint()
		id := r.bytes()
		if r.err != nil {
			break
		}
		next := uint64(len(d.series))
		if ref != next && !(d.gap && ref > next && ref-next <= d.limit) {
			return fmt.Errorf("%w: series ref %d, want %d", errMalformed, ref, next)
		}
		if ref > math.MaxUint32 {
			// The encoder numbers series with uint32 (SeriesRef), and
			// replay hands the ref on as Entry.Series.
			return fmt.Errorf("%w: series ref %d past 32 bits", errMalformed, ref)
		}
		lost := false
		switch {
		case ns < uint64(len(d.namespaces)):
			lost = d.namespaces[ns].lost
		case d.gap:
			lost = true // its namespace was defined in a skipped record
		default:
			return fmt.Errorf("%w: series uses undefined namespace ref %d", errMalformed, ns)
		}
		for uint64(len(d.series)) < ref {
			d.series = append(d.series, seriesDef{lost: true})
		}
		def := seriesDef{ns: uint32(ns), lost: lost}
		if !lost {
			def.id = d.ids.alloc(len(id))
			copy(def.id, id)
		}
		d.series = append(d.series, def)
	}

	nSamples := r.count()
	t := int64(0)
	for i := uint64(0); i < nSamples && r.err == nil; i++ {
		ref := r.uvarint()
		t += r.varint()
		v := math.Float64frombits(r.uint64())
		if r.err != nil {
			break
		}
		if ref >= uint64(len(d.series)) || d.series[ref].lost {
			if !d.gap {
				return fmt.Errorf("%w: undefined series ref %d", errMalformed, ref)
			}
			d.unresolved++
			continue
		}
		s := d.series[ref]
		d.out = append(d.out, Entry{Namespace: d.namespaces[s.ns].name, ID: s.id, T: t, V: v, Series: uint32(ref)})
		d.outNs = append(d.outNs, s.ns)
	}
	if r.err != nil {
		return r.err
	}
	if version >= 3 {
		if err := d.decodeHistograms(&r); err != nil {
			return err
		}
	}
	if len(r.b) != 0 {
		return fmt.Errorf("%w: %d trailing bytes", errMalformed, len(r.b))
	}
	return nil
}

// decodeHistograms reads a version 3 record's histogram section: per
// sample its series ref, its timestamp (delta from the previous histogram
// sample of the record) and a one-sample histogram stream
// (docs/format/histogram.md) holding the same timestamp.
func (d *decoder) decodeHistograms(r *reader) error {
	n := r.count()
	t := int64(0)
	for i := uint64(0); i < n && r.err == nil; i++ {
		ref := r.uvarint()
		t += r.varint()
		stream := r.bytes()
		if r.err != nil {
			break
		}
		it := encoding.NewHistogramIterator(stream)
		if !it.Next() {
			if err := it.Err(); err != nil {
				return fmt.Errorf("%w: histogram %d: %v", errMalformed, i, err)
			}
			// An empty stream: the writer could not encode the sample
			// (never acknowledged as stored). Counted, not replayed.
			d.unresolved++
			continue
		}
		var e HistEntry
		var st int64
		if it.IsFloat() {
			st, e.FH = it.AtFloatHistogram(nil)
		} else {
			st, e.H = it.AtHistogram(nil)
		}
		if it.Next() || it.Err() != nil || st != t {
			return fmt.Errorf("%w: histogram %d: not one sample at %d", errMalformed, i, t)
		}
		if ref >= uint64(len(d.series)) || d.series[ref].lost {
			if !d.gap {
				return fmt.Errorf("%w: undefined series ref %d", errMalformed, ref)
			}
			d.unresolved++
			continue
		}
		s := d.series[ref]
		e.Namespace, e.ID, e.T, e.Series = d.namespaces[s.ns].name, s.id, t, uint32(ref)
		d.hout = append(d.hout, e)
		d.houtNs = append(d.houtNs, s.ns)
	}
	return r.err
}

// reader consumes a payload; the first failure sticks in err and every
// later call returns zero values.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: truncated %s", errMalformed, what)
	}
	r.b = nil
}

func (r *reader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail("uvarint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail("varint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

// count reads an item count and rejects one that the remaining bytes
// cannot hold (every item takes at least one byte), so corrupt input never
// drives a huge loop.
func (r *reader) count() uint64 {
	n := r.uvarint()
	if r.err == nil && n > uint64(len(r.b)) {
		r.fail("count")
		return 0
	}
	return n
}

func (r *reader) bytes() []byte {
	n := r.uvarint()
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)) {
		r.fail("bytes")
		return nil
	}
	b := r.b[:n:n]
	r.b = r.b[n:]
	return b
}

func (r *reader) uint64() uint64 {
	if len(r.b) < 8 {
		r.fail("uint64")
		return 0
	}
	v := binary.LittleEndian.Uint64(r.b)
	r.b = r.b[8:]
	return v
}

// addRanges widens rng/seen (indexed by namespace ref, as long as
// d.namespaces) by the entries of the last decoded record.
func (d *decoder) addRanges(rng []TimeRange, seen []bool) {
	add := func(ns uint32, t int64) {
		switch {
		case !seen[ns]:
			rng[ns], seen[ns] = TimeRange{Min: t, Max: t}, true
		case t < rng[ns].Min:
			rng[ns].Min = t
		case t > rng[ns].Max:
			rng[ns].Max = t
		}
	}
	for i, e := range d.out {
		add(d.outNs[i], e.T)
	}
	for i, e := range d.hout {
		add(d.houtNs[i], e.T)
	}
}
