package commitlog

import (
	"encoding/binary"
	"math"
	"sync/atomic"

	"github.com/tessera-tsdb/tessera/dbnode/encoding"
)

// generations numbers encoder resets across every log in the process, so a
// SeriesRef set by one file's encoder is never taken for a ref of another.
// A SeriesRef keeps 32 bits of it (a storage series is in a smaller size
// class for it): past 2^32-1 resets an encoder gets generation 0 and uses
// its own table instead of the caller's refs, so a number is never reused.
var generations atomic.Uint64

// nextGeneration is the generation of a new file's encoder; 0: none left.
func nextGeneration() uint32 {
	if g := generations.Add(1); g <= math.MaxUint32 {
		return uint32(g)
	}
	return 0
}

// nsState is one namespace's share of a file's ref tables, plus the
// sample time range the file holds for it.
type nsState struct {
	ref    uint32
	name   string
	series map[string]uint32 // series ID -> series ref
	defRec uint64            // the last record that carried this namespace's definition (records count from 1)

	committed, staged       TimeRange // committed: in the file; staged: in records not yet written
	hasCommitted, hasStaged bool
}

// encoder turns batches into records. It holds the per-file ref tables, so
// it belongs to exactly one file and is reset when the flusher moves to a
// new one. Only the flusher goroutine uses it.
type encoder struct {
	byName     map[string]*nsState
	namespaces []*nsState // by ref
	nextSeries uint32
	gen        uint32 // this file's generation: SeriesRefs of others are stale; 0: refs unused
	seq        uint64 // the file's seq, covered by every frame's checksum
	record     uint64 // records encoded into this file

	// Scratch sections of the record being encoded; the series
	// definitions have to precede the samples in the payload, but are only
	// known once every sample has been looked at.
	nsDefs, seriesDefs, samples, hsamples []byte
	hist                                  encoding.HistogramEncoder // one histogram at a time
}

func newEncoder() *encoder {
	e := &encoder{}
	e.reset(0)
	return e
}

// reset forgets every ref: the next record starts a new file, numbered seq.
func (e *encoder) reset(seq uint64) {
	e.seq = seq
	e.byName = make(map[string]*nsState)
	e.namespaces = e.namespaces[:0]
	e.nextSeries = 0
	e.record = 0
	e.gen = nextGeneration()
}

func (e *encoder) namespace(name string) *nsState {
	if ns, ok := e.byName[name]; ok {
		return ns
	}
	ns := &nsState{ref: uint32(len(e.namespaces)), name: name, series: make(map[string]uint32)}
	e.byName[name] = ns
	e.namespaces = append(e.namespaces, ns)
	return ns
}

// defineNamespace puts ns's definition into the record being encoded,
// once per record: every record that defines a series also defines its
// namespace (again), so losing the record that first named a namespace
// costs only the series defined in it, not every later series of that
// namespace.
func (e *encoder) defineNamespace(ns *nsState, nDefs *int) {
	if ns.defRec == e.record {
		return
	}
	ns.defRec = e.record
	e.nsDefs = binary.AppendUvarint(e.nsDefs, uint64(ns.ref))
	e.nsDefs = binary.AppendUvarint(e.nsDefs, uint64(len(ns.name)))
	e.nsDefs = append(e.nsDefs, ns.name...)
	*nDefs++
}

// appendRecord appends one framed record holding batch and hist to dst.
// Refs it defines stay defined for the rest of the file, so a caller whose
// record never reaches the file must reset the encoder (the flusher
// rotates). A histogram the stream encoding refuses (callers check with
// encoding.CheckHistogram first) is written as an empty stream, which
// replay counts and skips rather than failing the record.
func (e *encoder) appendRecord(dst []byte, batch []Entry, hist []HistEntry) []byte {
	e.nsDefs, e.seriesDefs, e.samples, e.hsamples = e.nsDefs[:0], e.seriesDefs[:0], e.samples[:0], e.hsamples[:0]
	e.record++
	var nNs, nSeries int
	var ns *nsState
	prevT := int64(0)
	for i := range batch {
		en := &batch[i]
		if ns == nil || en.Namespace != ns.name {
			ns = e.namespace(en.Namespace)
		}
		// The float path, per sample: the lookup and the range update
		// stay inline (seriesRef and stage only for what is rare).
		ref, ok := e.lookup(ns, en.ID, en.Ref)
		if !ok {
			ref = e.seriesRef(ns, en.ID, en.Ref, &nNs, &nSeries)
		}
		switch {
		case !ns.hasStaged:
			ns.staged, ns.hasStaged = TimeRange{Min: en.T, Max: en.T}, true
		case en.T < ns.staged.Min:
			ns.staged.Min = en.T
		case en.T > ns.staged.Max:
			ns.staged.Max = en.T
		}
		e.samples = binary.AppendUvarint(e.samples, uint64(ref))
		e.samples = binary.AppendVarint(e.samples, en.T-prevT)
		e.samples = binary.LittleEndian.AppendUint64(e.samples, math.Float64bits(en.V))
		prevT = en.T
	}
	prevT = 0
	for i := range hist {
		en := &hist[i]
		if ns == nil || en.Namespace != ns.name {
			ns = e.namespace(en.Namespace)
		}
		ref := e.seriesRef(ns, en.ID, en.Ref, &nNs, &nSeries)
		ns.stage(en.T)
		e.hsamples = binary.AppendUvarint(e.hsamples, uint64(ref))
		e.hsamples = binary.AppendVarint(e.hsamples, en.T-prevT)
		e.hsamples = binary.AppendUvarint(e.hsamples, uint64(e.encodeHist(en)))
		e.hsamples = append(e.hsamples, e.hist.Bytes()...)
		prevT = en.T
	}

	start := len(dst)
	dst = OpenFrame(dst)
	dst = binary.AppendUvarint(dst, uint64(nNs))
	dst = append(dst, e.nsDefs...)
	dst = binary.AppendUvarint(dst, uint64(nSeries))
	dst = append(dst, e.seriesDefs...)
	dst = binary.AppendUvarint(dst, uint64(len(batch)))
	dst = append(dst, e.samples...)
	dst = binary.AppendUvarint(dst, uint64(len(hist)))
	dst = append(dst, e.hsamples...)
	SealFrame(dst, start, e.seq)
	return dst
}

// encodeHist encodes en's histogram alone into e.hist and returns the
// length of e.hist.Bytes().
func (e *encoder) encodeHist(en *HistEntry) int {
	e.hist.Reset()
	var err error
	if en.H != nil {
		err = e.hist.AppendHistogram(en.T, en.H)
	} else {
		err = e.hist.AppendFloatHistogram(en.T, en.FH)
	}
	if err != nil {
		e.hist.Reset()
	}
	return len(e.hist.Bytes())
}

// seriesRef returns the ref of the series (namespace ns, id) in this file,
// defining it (and its namespace) in the record being encoded if needed.
func (e *encoder) seriesRef(ns *nsState, id []byte, refp *SeriesRef, nNs, nSeries *int) uint32 {
	ref, ok := e.lookup(ns, id, refp)
	if ok {
		return ref
	}
	e.defineNamespace(ns, nNs)
	ref = e.nextSeries
	e.nextSeries++
	if refp != nil && e.gen != 0 {
		*refp = SeriesRef{gen: e.gen, ref: ref}
	} else {
		ns.series[string(id)] = ref
	}
	e.seriesDefs = binary.AppendUvarint(e.seriesDefs, uint64(ref))
	e.seriesDefs = binary.AppendUvarint(e.seriesDefs, uint64(ns.ref))
	e.seriesDefs = binary.AppendUvarint(e.seriesDefs, uint64(len(id)))
	e.seriesDefs = append(e.seriesDefs, id...)
	*nSeries++
	return ref
}

// stage widens the namespace's range of records not yet written by t.
func (ns *nsState) stage(t int64) {
	switch {
	case !ns.hasStaged:
		ns.staged, ns.hasStaged = TimeRange{Min: t, Max: t}, true
	case t < ns.staged.Min:
		ns.staged.Min = t
	case t > ns.staged.Max:
		ns.staged.Max = t
	}
}

// lookup returns the ref of the series in this file, if it has one: from
// the caller's SeriesRef when given, else from the namespace's table.
func (e *encoder) lookup(ns *nsState, id []byte, refp *SeriesRef) (uint32, bool) {
	if refp != nil && e.gen != 0 {
		return refp.ref, refp.gen == e.gen
	}
	ref, ok := ns.series[string(id)]
	return ref, ok
}

// commit folds the staged ranges into the committed ones: the records
// encoded since the last commit are now in the file.
func (e *encoder) commit() {
	for _, ns := range e.namespaces {
		if !ns.hasStaged {
			continue
		}
		if !ns.hasCommitted {
			ns.committed, ns.hasCommitted = ns.staged, true
		} else {
			ns.committed.Min = min(ns.committed.Min, ns.staged.Min)
			ns.committed.Max = max(ns.committed.Max, ns.staged.Max)
		}
		ns.hasStaged = false
	}
}

// ranges returns the committed per-namespace time ranges of the file.
func (e *encoder) ranges() map[string]TimeRange {
	m := make(map[string]TimeRange, len(e.namespaces))
	for _, ns := range e.namespaces {
		if ns.hasCommitted {
			m[ns.name] = ns.committed
		}
	}
	return m
}
