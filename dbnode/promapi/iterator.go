package promapi

import (
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/tessera-tsdb/tessera/dbnode/encoding"
	tstorage "github.com/tessera-tsdb/tessera/dbnode/storage"
)

// floatIterator adapts an encoding.Iterator (Next/At only) to
// chunkenc.Iterator, which the promql engine walks with Next and Seek.
//
// It yields ValFloat only: it serves series without native histograms
// (mixedIterator serves the others). Values are passed
// through untouched, so the staleness NaN keeps its exact bits and the
// engine recognises it with value.IsStaleNaN.
//
// Seek follows the chunkenc contract: it moves forward to the first sample
// at or after t, does nothing if the current sample already qualifies, and
// never moves backwards; once exhausted, the iterator stays exhausted.
type floatIterator struct {
	src   encoding.Iterator
	t     int64
	v     float64
	state iterState
}

type iterState uint8

const (
	iterFresh   iterState = iota // no Next or Seek yet
	iterPending                  // t, v hold a sample peeked but not yet returned
	iterAt                       // t, v are the current sample
	iterDone                     // exhausted (or failed: see Err)
)

// newFloatIterator returns an iterator over src. If reuse is a
// *floatIterator it is reset and returned instead of allocating.
func newFloatIterator(reuse chunkenc.Iterator, src encoding.Iterator) *floatIterator {
	it, ok := reuse.(*floatIterator)
	if !ok {
		it = &floatIterator{}
	}
	*it = floatIterator{src: src}
	return it
}

// peekedIterator is an iterator whose first sample (t, v) was already
// read from src (to learn whether the series has any data). A value, so
// that its owner can hold it without an allocation of its own.
func peekedIterator(src encoding.Iterator, t int64, v float64) floatIterator {
	return floatIterator{src: src, t: t, v: v, state: iterPending}
}

func (it *floatIterator) Next() chunkenc.ValueType {
	switch it.state {
	case iterDone:
		return chunkenc.ValNone
	case iterPending:
		it.state = iterAt
		return chunkenc.ValFloat
	}
	if !it.src.Next() {
		it.state = iterDone
		return chunkenc.ValNone
	}
	it.t, it.v = it.src.At()
	it.state = iterAt
	return chunkenc.ValFloat
}

func (it *floatIterator) Seek(t int64) chunkenc.ValueType {
	switch it.state {
	case iterDone:
		return chunkenc.ValNone
	case iterAt:
		if it.t >= t {
			return chunkenc.ValFloat
		}
	}
	for {
		if it.Next() == chunkenc.ValNone {
			return chunkenc.ValNone
		}
		if it.t >= t {
			return chunkenc.ValFloat
		}
	}
}

func (it *floatIterator) At() (int64, float64) { return it.t, it.v }

// AtHistogram and AtFloatHistogram are never called: Next and Seek only
// report ValFloat.
func (it *floatIterator) AtHistogram(*histogram.Histogram) (int64, *histogram.Histogram) {
	return it.t, nil
}

func (it *floatIterator) AtFloatHistogram(*histogram.FloatHistogram) (int64, *histogram.FloatHistogram) {
	return it.t, nil
}

func (it *floatIterator) AtT() int64 { return it.t }

// AtST reports no start timestamp: Tessera does not store them.
func (it *floatIterator) AtST() int64 { return 0 }

func (it *floatIterator) Err() error { return it.src.Err() }

// errIterator is the iterator of a series whose samples could not be read.
type errIterator struct{ err error }

func (e errIterator) Next() bool           { return false }
func (e errIterator) At() (int64, float64) { return 0, 0 }
func (e errIterator) Err() error           { return e.err }

// sampleIterator is a storage.SampleIterator (the one contract for
// walking a series of any kind) as chunkenc.Iterator: with Seek, and with
// Peek to learn whether a series has any sample without consuming it.
// floatIterator is its allocation-free special case for series without
// histograms, the engine's common case.
type sampleIterator struct {
	tstorage.SampleIterator
	cur     chunkenc.ValueType // of the current (or peeked) sample
	pending bool               // cur was peeked, not yet returned
}

func newSampleIterator(src tstorage.SampleIterator) *sampleIterator {
	return &sampleIterator{SampleIterator: src}
}

// Peek reads the first sample and keeps it pending. Call it before any
// Next or Seek.
func (it *sampleIterator) Peek() chunkenc.ValueType {
	vt := it.Next()
	it.pending = vt != chunkenc.ValNone
	return vt
}

func (it *sampleIterator) Next() chunkenc.ValueType {
	if it.pending {
		it.pending = false
		return it.cur
	}
	it.cur = it.SampleIterator.Next()
	return it.cur
}

// Seek follows the chunkenc contract, as floatIterator's does.
func (it *sampleIterator) Seek(t int64) chunkenc.ValueType {
	vt := it.cur
	it.pending = false
	if vt == chunkenc.ValNone || it.AtT() < t {
		for vt = it.Next(); vt != chunkenc.ValNone && it.AtT() < t; vt = it.Next() {
		}
	}
	return vt
}

// AtST reports no start timestamp: Tessera does not store them.
func (it *sampleIterator) AtST() int64 { return 0 }
