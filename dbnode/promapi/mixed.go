package promapi

import (
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/tessera-tsdb/tessera/dbnode/encoding"
)

// mixedIterator adapts a series' float and native histogram samples (two
// storage iterators, each in time order) to one chunkenc.Iterator in time
// order, reporting ValFloat, ValHistogram or ValFloatHistogram per sample,
// as Prometheus' own iterators do for a series that changed type.
//
// At a timestamp holding both a float and a histogram (a conflicting
// write Prometheus' TSDB would have refused as a duplicate) the histogram
// is returned and the float skipped: one sample per timestamp, as the
// engine requires.
//
// Seek follows the chunkenc contract like floatIterator's.
type mixedIterator struct {
	fl encoding.Iterator
	h  encoding.HistogramIterator // nil: floats only

	fOK, hOK bool // a lookahead sample is available from fl (ft, fv) / h (ht)
	ft, ht   int64
	fv       float64

	state iterState
	cur   chunkenc.ValueType
	err   error
}

func newMixedIterator(fl encoding.Iterator, h encoding.HistogramIterator) *mixedIterator {
	return &mixedIterator{fl: fl, h: h}
}

func (it *mixedIterator) advFloat() {
	if it.fOK = it.fl.Next(); it.fOK {
		it.ft, it.fv = it.fl.At()
	} else if err := it.fl.Err(); err != nil && it.err == nil {
		it.err = err
	}
}

func (it *mixedIterator) advHist() {
	if it.h == nil {
		return
	}
	if it.hOK = it.h.Next(); it.hOK {
		it.ht = it.h.AtT()
	} else if err := it.h.Err(); err != nil && it.err == nil {
		it.err = err
	}
}

// peek reads the first sample and keeps it pending: the series set learns
// whether the series has any sample in range without consuming it.
func (it *mixedIterator) peek() chunkenc.ValueType {
	vt := it.Next()
	if vt != chunkenc.ValNone {
		it.state = iterPending
	}
	return vt
}

func (it *mixedIterator) Next() chunkenc.ValueType {
	switch it.state {
	case iterDone:
		return chunkenc.ValNone
	case iterPending:
		it.state = iterAt
		return it.cur
	case iterFresh:
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
		it.state = iterDone
		return chunkenc.ValNone
	case it.hOK && (!it.fOK || it.ht < it.ft):
		it.cur = chunkenc.ValHistogram
		if it.h.IsFloat() {
			it.cur = chunkenc.ValFloatHistogram
		}
	default:
		it.cur = chunkenc.ValFloat
	}
	it.state = iterAt
	return it.cur
}

func (it *mixedIterator) Seek(t int64) chunkenc.ValueType {
	switch it.state {
	case iterDone:
		return chunkenc.ValNone
	case iterAt:
		if it.AtT() >= t {
			return it.cur
		}
	}
	for {
		vt := it.Next()
		if vt == chunkenc.ValNone || it.AtT() >= t {
			return vt
		}
	}
}

func (it *mixedIterator) At() (int64, float64) { return it.ft, it.fv }

func (it *mixedIterator) AtHistogram(h *histogram.Histogram) (int64, *histogram.Histogram) {
	return it.h.AtHistogram(h)
}

func (it *mixedIterator) AtFloatHistogram(fh *histogram.FloatHistogram) (int64, *histogram.FloatHistogram) {
	return it.h.AtFloatHistogram(fh)
}

func (it *mixedIterator) AtT() int64 {
	if it.cur == chunkenc.ValFloat {
		return it.ft
	}
	return it.ht
}

// AtST reports no start timestamp: Tessera does not store them.
func (it *mixedIterator) AtST() int64 { return 0 }

func (it *mixedIterator) Err() error { return it.err }
