package storage

import (
	"bytes"
	"fmt"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/tessera-tsdb/tessera/dbnode/encoding"
)

// HistogramWins is the repair merge rule for two native histograms at the
// same timestamp, the histogram counterpart of Wins: each is encoded as a
// one-sample histogram stream (docs/format/histogram.md) behind a kind
// byte (0 integer, 1 float), and the larger byte string wins. The stream
// form is a deterministic function of every field, so this is a total
// order on histograms: every replica picks the same one whichever side
// it sees first, and replicas converge. Equal encodings do not win.
func HistogramWins(candH *histogram.Histogram, candFH *histogram.FloatHistogram, curH *histogram.Histogram, curFH *histogram.FloatHistogram) bool {
	a, errA := histogramKey(candH, candFH)
	b, errB := histogramKey(curH, curFH)
	if errA != nil || errB != nil {
		return false // an unencodable histogram was refused on write
	}
	return bytes.Compare(a, b) > 0
}

func histogramKey(h *histogram.Histogram, fh *histogram.FloatHistogram) ([]byte, error) {
	enc := encoding.NewHistogramEncoder()
	var err error
	kind := byte(0)
	if fh != nil {
		kind = 1
		err = enc.AppendFloatHistogram(0, fh)
	} else {
		err = enc.AppendHistogram(0, h)
	}
	if err != nil {
		return nil, err
	}
	return append([]byte{kind}, enc.Bytes()...), nil
}

// repairHistograms appends to batch the histogram samples of peer
// series s that win over (or are missing from) the local series.
func (db *Database) repairHistograms(nsName string, s RepairInput, batch []HistogramSample) ([]HistogramSample, error) {
	id, shard := s.ID, db.Shard(s.ID)
	err := repairKind(s.Histograms, func(p *HistogramSample) int64 { return p.T },
		func(lo, hi int64) (encoding.HistogramIterator, error) { return db.ReadHistograms(nsName, id, lo, hi) },
		func(it encoding.HistogramIterator, p *HistogramSample) bool {
			var h *histogram.Histogram
			var fh *histogram.FloatHistogram
			if it.IsFloat() {
				_, fh = it.AtFloatHistogram(nil)
			} else {
				_, h = it.AtHistogram(nil)
			}
			return HistogramWins(p.H, p.FH, h, fh)
		},
		func(p *HistogramSample) {
			batch = append(batch, HistogramSample{ID: id, Shard: shard, T: p.T, H: p.H, FH: p.FH})
		})
	if err != nil {
		return nil, fmt.Errorf("read local histograms of %q: %w", id, err)
	}
	return batch, nil
}
