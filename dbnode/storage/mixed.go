package storage

import (
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/tessera-tsdb/tessera/dbnode/encoding"
)

// SampleIterator is the one contract for walking a series' samples:
// every kind (floats, integer and float native histograms) in one
// sequence in time order, Next reporting the kind of the sample it moved
// to, as Prometheus' chunkenc.Iterator does for a series that changed
// type (ValNone at the end, then Err). It is chunkenc.Iterator without
// Seek and AtST (go vet wants a method named Seek to be io.Seeker's):
// promapi adds them for the engine. Remote read, the streamed answer and
// the PromQL API walk series through it (SeriesIterator.Samples).
type SampleIterator interface {
	Next() chunkenc.ValueType
	// At is the current float sample (ValFloat).
	At() (int64, float64)
	// AtHistogram and AtFloatHistogram are the current histogram sample
	// (ValHistogram, ValFloatHistogram; an integer one may be read as a
	// float histogram too), decoded into the argument when not nil.
	AtHistogram(*histogram.Histogram) (int64, *histogram.Histogram)
	AtFloatHistogram(*histogram.FloatHistogram) (int64, *histogram.FloatHistogram)
	// AtT is the current sample's time, of any kind.
	AtT() int64
	Err() error
}

// Samples returns the series' samples of every kind as one
// SampleIterator over its floats (Floats) and Histograms. Either field's
// own iterator is consumed by it.
func (s SeriesIterator) Samples() SampleIterator { return NewMixedIterator(s.Floats(), s.Histograms) }

// MixedIterator is the SampleIterator of a series: it merges the series'
// float and native histogram samples (SeriesIterator.Values and
// .Histograms, each in time order, as their encodings store them) into
// one sequence in time order.
//
// At a timestamp holding both a float and a histogram (a conflicting
// write Prometheus' TSDB would have refused as a duplicate) the histogram
// is returned and the float skipped: one sample per timestamp, as the
// engine requires.
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

var _ SampleIterator = (*MixedIterator)(nil)

type mixState uint8

const (
	mixFresh mixState = iota // no Next yet
	mixAt                    // the current sample is returned
	mixDone                  // exhausted (or failed: see Err)
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

func (it *MixedIterator) Next() chunkenc.ValueType {
	switch it.state {
	case mixDone:
		return chunkenc.ValNone
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

func (it *MixedIterator) Err() error { return it.err }
