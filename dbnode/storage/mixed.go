package storage

import (
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/tessera-tsdb/tessera/dbnode/encoding"
)

// MixedIterator walks a series' float and native histogram samples
// (SeriesIterator.Values and .Histograms, each in time order) as one
// sequence in time order, in chunkenc.Iterator's terms, reporting ValFloat, ValHistogram or
// ValFloatHistogram per sample, as Prometheus' own iterators do for a
// series that changed type. The PromQL API and remote read use it.
//
// At a timestamp holding both a float and a histogram (a conflicting
// write Prometheus' TSDB would have refused as a duplicate) the histogram
// is returned and the float skipped: one sample per timestamp, as the
// engine requires.
//
// It has every method of chunkenc.Iterator but Seek (go vet wants a
// method named Seek to be io.Seeker's): promapi adds it.
type MixedIterator struct {
	fl encoding.Iterator
	h  encoding.HistogramIterator // nil: floats only

	fOK, hOK bool // a lookahead sample is available from fl (ft, fv) / h (ht)
	ft, ht   int64
	fv       float64

	state mixState
	cur   chunkenc.ValueType
	err   error
}

type mixState uint8

const (
	mixFresh   mixState = iota // no Next or Seek yet
	mixPending                 // the current sample was peeked, not yet returned
	mixAt                      // the current sample is returned
	mixDone                    // exhausted (or failed: see Err)
)

// NewMixedIterator returns an iterator over fl and h (nil: no histograms).
func NewMixedIterator(fl encoding.Iterator, h encoding.HistogramIterator) *MixedIterator {
	return &MixedIterator{fl: fl, h: h}
}

func (it *MixedIterator) advFloat() {
	if it.fOK = it.fl.Next(); it.fOK {
		it.ft, it.fv = it.fl.At()
	} else if err := it.fl.Err(); err != nil && it.err == nil {
		it.err = err
	}
}

func (it *MixedIterator) advHist() {
	if it.h == nil {
		return
	}
	if it.hOK = it.h.Next(); it.hOK {
		it.ht = it.h.AtT()
	} else if err := it.h.Err(); err != nil && it.err == nil {
		it.err = err
	}
}

// Peek reads the first sample and keeps it pending, so a caller learns
// whether the series has any sample without consuming it. Call it before
// any Next or Seek.
func (it *MixedIterator) Peek() chunkenc.ValueType {
	vt := it.Next()
	if vt != chunkenc.ValNone {
		it.state = mixPending
	}
	return vt
}

func (it *MixedIterator) Next() chunkenc.ValueType {
	switch it.state {
	case mixDone:
		return chunkenc.ValNone
	case mixPending:
		it.state = mixAt
		return it.cur
	case mixFresh:
		it.advFloat()
		it.advHist()
	default:
		if it.cur == chunkenc.ValFloat {
			it.advFloat()
		} else {
			it.advHist()
		}
	}
	for it.fOK && it.hOK && it.ft == it.ht {
		it.advFloat() // the histogram wins the timestamp
	}
	switch {
	case it.err != nil, !it.fOK && !it.hOK:
		it.state = mixDone
		return chunkenc.ValNone
	case it.hOK && (!it.fOK || it.ht < it.ft):
		it.cur = chunkenc.ValHistogram
		if it.h.IsFloat() {
			it.cur = chunkenc.ValFloatHistogram
		}
	default:
		it.cur = chunkenc.ValFloat
	}
	it.state = mixAt
	return it.cur
}

func (it *MixedIterator) At() (int64, float64) { return it.ft, it.fv }

func (it *MixedIterator) AtHistogram(h *histogram.Histogram) (int64, *histogram.Histogram) {
	return it.h.AtHistogram(h)
}

func (it *MixedIterator) AtFloatHistogram(fh *histogram.FloatHistogram) (int64, *histogram.FloatHistogram) {
	return it.h.AtFloatHistogram(fh)
}

func (it *MixedIterator) AtT() int64 {
	if it.cur == chunkenc.ValFloat {
		return it.ft
	}
	return it.ht
}

// AtST reports no start timestamp: Tessera does not store them.
func (it *MixedIterator) AtST() int64 { return 0 }

func (it *MixedIterator) Err() error { return it.err }

// Current is the type of the current sample without moving: ValNone
// before the first Next (or after Peek, until Next) and once exhausted.
func (it *MixedIterator) Current() chunkenc.ValueType {
	if it.state != mixAt {
		return chunkenc.ValNone
	}
	return it.cur
}
