package encoding

import "github.com/prometheus/prometheus/model/histogram"

// MergeHistogramIterators merges histogram iterators by timestamp, as
// MergeIterators does floats: on equal timestamps the iterator later in
// the argument list wins (pass older data first), and iteration stops at
// the first error of any input. The inputs may hold different kinds
// (integer, float): IsFloat reports the current sample's.
func MergeHistogramIterators(its ...HistogramIterator) HistogramIterator {
	switch len(its) {
	case 0:
		return NewHistogramIterator(nil)
	case 1:
		return its[0]
	}
	return &histMerge{its: its, live: make([]bool, len(its)), cur: -1}
}

// histMerge picks, at each step, the input with the smallest current
// timestamp (the last such input on ties). Inputs are few (a bucket's
// streams, a block's volumes), so a linear scan beats a heap.
type histMerge struct {
	its     []HistogramIterator
	live    []bool
	started bool
	cur     int
	t       int64
	err     error
}

func (m *histMerge) Next() bool {
	if m.err != nil {
		return false
	}
	for i, it := range m.its {
		// Advance the inputs whose head was the last sample: the winner
		// and every input that had the same timestamp.
		if m.started && (!m.live[i] || it.AtT() != m.t) {
			continue
		}
		m.live[i] = it.Next()
		if !m.live[i] {
			if err := it.Err(); err != nil {
				m.err = err
				return false
			}
		}
	}
	m.started = true
	m.cur = -1
	for i, it := range m.its {
		if m.live[i] && (m.cur < 0 || it.AtT() <= m.t) {
			m.cur, m.t = i, it.AtT()
		}
	}
	return m.cur >= 0
}

func (m *histMerge) IsFloat() bool { return m.cur >= 0 && m.its[m.cur].IsFloat() }
func (m *histMerge) AtT() int64    { return m.t }
func (m *histMerge) Err() error    { return m.err }

func (m *histMerge) AtHistogram(h *histogram.Histogram) (int64, *histogram.Histogram) {
	return m.its[m.cur].AtHistogram(h)
}

func (m *histMerge) AtFloatHistogram(h *histogram.FloatHistogram) (int64, *histogram.FloatHistogram) {
	return m.its[m.cur].AtFloatHistogram(h)
}

// EncodeHistograms re-encodes what it yields as streams in timestamp
// order: a new stream starts whenever the kind (integer or float)
// changes, since one stream holds one kind. It returns the streams (each
// its own copy) and the number of samples.
func EncodeHistograms(it HistogramIterator) ([][]byte, int, error) {
	var (
		out [][]byte
		enc HistogramEncoder
	)
	cut := func() {
		if enc.Len() > 0 {
			out = append(out, append([]byte(nil), enc.Bytes()...))
			enc.Reset()
		}
	}
	n, err := EncodeHistogramRuns(it, func() *HistogramEncoder {
		cut()
		return &enc
	})
	if err != nil {
		return nil, 0, err
	}
	cut()
	return out, n, nil
}

// EncodeHistogramRuns appends what it yields, in order, to the encoders
// next returns: one for the first sample and one more whenever the kind
// (integer or float) changes, since a stream holds one kind. It returns
// the number of samples. EncodeHistograms and the storage's compaction of
// a block's streams share it.
func EncodeHistogramRuns(it HistogramIterator, next func() *HistogramEncoder) (int, error) {
	var (
		enc  *HistogramEncoder
		n    int
		ih   *histogram.Histogram
		fh   *histogram.FloatHistogram
		isFl bool
	)
	for it.Next() {
		fl := it.IsFloat()
		if enc == nil || fl != isFl {
			enc = next()
		}
		isFl = fl
		var (
			t   int64
			err error
		)
		if fl {
			t, fh = it.AtFloatHistogram(fh)
			err = enc.AppendFloatHistogram(t, fh)
		} else {
			t, ih = it.AtHistogram(ih)
			err = enc.AppendHistogram(t, ih)
		}
		if err != nil {
			return 0, err
		}
		n++
	}
	return n, it.Err()
}
