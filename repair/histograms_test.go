package repair

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
	"github.com/tessera-tsdb/tessera/ident"
)

func repairHist(i int) *histogram.Histogram {
	return &histogram.Histogram{Count: uint64(i + 2), Sum: float64(i), PositiveSpans: []histogram.Span{{Length: 2}},
		PositiveBuckets: []int64{1, int64(i)}}
}

// writeHists writes native histograms at ts to nodes, kind alternating.
func (c *cluster) writeHists(nodes []int, id []byte, ts []int64, off int) {
	c.t.Helper()
	var batch []storage.HistogramSample
	for i, t := range ts {
		s := storage.HistogramSample{ID: id, Shard: ident.Shard(id, testShards), T: t}
		if i%2 == 1 {
			s.FH = repairHist(i + off).ToFloat(nil)
		} else {
			s.H = repairHist(i + off)
		}
		batch = append(batch, s)
	}
	for _, n := range nodes {
		require.NoError(c.t, c.dbs[n].WriteHistograms(testNS, append([]storage.HistogramSample(nil), batch...)))
	}
}

func readHists(t *testing.T, db *storage.Database, id []byte, from, to int64) []string {
	t.Helper()
	it, err := db.ReadHistograms(testNS, id, from, to)
	require.NoError(t, err)
	var out []string
	for it.Next() {
		if it.IsFloat() {
			tt, h := it.AtFloatHistogram(nil)
			out = append(out, fmt.Sprintf("%d f %s", tt, h))
		} else {
			tt, h := it.AtHistogram(nil)
			out = append(out, fmt.Sprintf("%d i %s", tt, h))
		}
	}
	require.NoError(t, it.Err())
	return out
}

// A replica lacking native histogram samples (in a flushed block and in
// memory) gets them from a peer, and two replicas holding different
// histograms at one timestamp converge on the one the merge rule
// (storage.HistogramWins) picks, whichever repairs first.
func TestHistogramsDifferArePulledAndConverge(t *testing.T) {
	c := newCluster(t, 2)
	ids := seed(c, 0, 1)
	h := seriesID("latency", "api")
	ts := every(flushedFrom.Add(10*time.Minute), flushedFrom.Add(70*time.Minute), time.Minute)
	c.writeHists([]int{0, 1}, h, ts[:10], 0)
	c.writeHists([]int{1}, h, ts[10:], 10) // node 0 lacks 50 in the flushed block
	mem := every(memFrom.Add(5*time.Minute), memFrom.Add(15*time.Minute), time.Minute)
	c.writeHists([]int{1}, h, mem, 0)
	c.writeHists([]int{0}, h, mem[:1], 7) // both hold mem[0], different histograms
	// A float series that also holds histograms on node 1, between its
	// floats: a series holds one sample per timestamp.
	between := every(memFrom.Add(5*time.Minute+30*time.Second), memFrom.Add(8*time.Minute), time.Minute)[:3]
	c.writeHists([]int{1}, ids[0], between, 3)
	tickAll(t, c)

	lo, hi := Window(c.dbs[0].Namespaces()[0], c.clk.Now(), time.Minute)
	require.NotEqual(t, readHists(t, c.dbs[1], h, lo, hi-1), readHists(t, c.dbs[0], h, lo, hi-1))
	p, err := c.repairer(0, nil).RunPass(context.Background())
	require.NoError(t, err)
	require.Zero(t, p.Errors)
	require.Equal(t, int64(3), p.SeriesDiffering, "h in both blocks, ids[0] in memory")
	require.GreaterOrEqual(t, p.SamplesRepaired, int64(50+9+3))
	p, err = c.repairer(1, nil).RunPass(context.Background())
	require.NoError(t, err)
	require.Zero(t, p.Errors)

	for _, id := range [][]byte{h, ids[0]} {
		want := readHists(t, c.dbs[1], id, lo, hi-1)
		require.NotEmpty(t, want)
		require.Equal(t, want, readHists(t, c.dbs[0], id, lo, hi-1))
	}
	require.Len(t, readHists(t, c.dbs[0], h, lo, hi-1), 60+10)
	require.Equal(t, readAll(t, c.dbs[1], ids[0], lo, hi-1), readAll(t, c.dbs[0], ids[0], lo, hi-1))

	// Converged: neither finds a difference any more.
	for i := 0; i < 2; i++ {
		p, err = c.repairer(i, nil).RunPass(context.Background())
		require.NoError(t, err)
		require.Zero(t, p.BlocksDiffering, "node %d", i)
	}
}
