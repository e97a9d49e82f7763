package bootstrap

import (
	"testing"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/dbnode/encoding"
	"github.com/tessera-tsdb/tessera/dbnode/rpc"
)

func bootHist(i int) *histogram.Histogram {
	return &histogram.Histogram{Count: uint64(i + 1), Sum: float64(i), PositiveSpans: []histogram.Span{{Length: 1}},
		PositiveBuckets: []int64{int64(i + 1)}}
}

// A shard streamed from a peer brings its native histograms: flushed ones
// inside block payload containers (stored as they are), unflushed ones as
// histogram streams, loaded beside the floats.
func TestBootstrapStreamsHistograms(t *testing.T) {
	p, want := fullPeer(t)
	id := ids(0, 4)[3] // a fourth series of shard 0, with histograms
	var blockEnc, memEnc encoding.HistogramEncoder
	for i := 0; i < 5; i++ {
		require.NoError(t, blockEnc.AppendHistogram(blockA+1000+int64(i)*10_000, bootHist(i)))
		require.NoError(t, memEnc.AppendFloatHistogram(memT+int64(i)*10_000, bootHist(10+i).ToFloat(nil)))
	}
	floats := stream(t, run(blockA+500, 3, 7))
	sealed, err := encoding.Seal(floats)
	require.NoError(t, err)
	payload := encoding.AppendPayload(nil, sealed, [][]byte{append([]byte(nil), blockEnc.Bytes()...)})
	k := blockKey{0, blockA}
	p.blocks[k] = append(p.blocks[k], rpc.BlockSeries{ID: []byte(id), Data: payload, Samples: 8})
	p.unflushed[0] = append(p.unflushed[0], rpc.FetchedSeries{ID: []byte(id), Shard: 0,
		Histograms: [][]byte{append([]byte(nil), memEnc.Bytes()...)}})

	h := newHarness(t, mkPlacement([]uint32{0, 1}, "p1"), map[string]*fakePeer{"ep-p1": p})
	require.NoError(t, h.reconcile())
	h.requireMarked(0, 1)
	h.requireData(want)
	h.requireBlockAsPeer(p, 0, blockA)
	require.Len(t, h.readAll(id), 3)
	it, err := h.db.ReadHistograms(ns, []byte(id), blockA-1, nowMs+1)
	require.NoError(t, err)
	var n, nf int
	for it.Next() {
		n++
		if it.IsFloat() {
			nf++
		}
	}
	require.NoError(t, it.Err())
	require.Equal(t, 10, n)
	require.Equal(t, 5, nf)
}
