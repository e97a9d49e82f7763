package storage

import (
	"bytes"
	"fmt"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/tessera-tsdb/tessera/dbnode/encoding"
)

// RepairHistogramInput is one series' native histograms as a peer holds
// them over the compared range, sorted by timestamp (ID and Shard of the
// samples are ignored: the series is ID).
type RepairHistogramInput struct {
	ID      []byte
	Samples []HistogramSample
}

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

// RepairHistograms merges peers' native histograms of series into this
// node, as RepairSeries merges floats: a sample is written when the node
// has none at its timestamp, or has one the peer's HistogramWins over. It
// reads each series' local histograms over the peer's time span first;
// what is written goes in one LoadHistograms batch (durable when it
// returns, accepted even when cold writes are off).
func (db *Database) RepairHistograms(nsName string, in []RepairHistogramInput) (RepairResult, error) {
	return repairAll(in,
		func(s RepairHistogramInput, batch []HistogramSample) ([]HistogramSample, error) {
			return db.repairHistogramCandidates(nsName, s, batch)
		},
		func(batch []HistogramSample) error { return db.LoadHistograms(nsName, batch) })
}

func (db *Database) repairHistogramCandidates(nsName string, s RepairHistogramInput, batch []HistogramSample) ([]HistogramSample, error) {
	peer := s.Samples
	if len(peer) == 0 {
		return batch, nil
	}
	it, err := db.ReadHistograms(nsName, s.ID, peer[0].T, peer[len(peer)-1].T)
	if err != nil {
		return nil, fmt.Errorf("read local histograms of %q: %w", s.ID, err)
	}
	id, shard := s.ID, db.Shard(s.ID)
	add := func(p HistogramSample) {
		batch = append(batch, HistogramSample{ID: id, Shard: shard, T: p.T, H: p.H, FH: p.FH})
	}
	i := 0
	for it.Next() {
		t := it.AtT()
		for ; i < len(peer) && peer[i].T < t; i++ {
			add(peer[i])
		}
		if i < len(peer) && peer[i].T == t {
			var h *histogram.Histogram
			var fh *histogram.FloatHistogram
			if it.IsFloat() {
				_, fh = it.AtFloatHistogram(nil)
			} else {
				_, h = it.AtHistogram(nil)
			}
			if HistogramWins(peer[i].H, peer[i].FH, h, fh) {
				add(peer[i])
			}
			i++
		}
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("read local histograms of %q: %w", s.ID, err)
	}
	for ; i < len(peer); i++ {
		add(peer[i])
	}
	return batch, nil
}
