package client

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
	"github.com/tessera-tsdb/tessera/dbnode/storage/storagetest"
	"github.com/tessera-tsdb/tessera/ident"
	"github.com/tessera-tsdb/tessera/placement"
)

// The session stores native histograms only where they are stored end to
// end: a one-node placement written locally. With replicas it says no
// (the node RPC does not carry histograms yet) and refuses a write, so
// the HTTP layer refuses them instead of acknowledging what replicas lose.
func TestSessionStoresHistogramsOnlyAlone(t *testing.T) {
	c := newFakeCluster(t)
	s := c.session(t, ReadMajority, WriteMajority, HealthOptions{})
	require.False(t, s.StoresHistograms())
	id := ident.FromLabels(labels.FromStrings("__name__", "h"))
	h := &histogram.Histogram{Count: 1, PositiveSpans: []histogram.Span{{Length: 1}}, PositiveBuckets: []int64{1}}
	hs := []storage.HistogramSample{{ID: id, Shard: ident.Shard(id, 16), T: time.Now().UnixMilli(), H: h}}
	require.ErrorIs(t, s.WriteHistograms(context.Background(), "default", hs), ErrHistogramsNotStored)
	for _, p := range c.peers {
		require.Zero(t, p.count())
	}

	db := storagetest.Open(t, 16, nil)
	p, err := placement.Init([]placement.Instance{{ID: "solo", IsolationGroup: "r", Zone: "z", Weight: 1, Endpoint: "127.0.0.1:1"}}, 16, 1)
	require.NoError(t, err)
	solo, err := NewSession(Options{
		LocalID: "solo", Local: db, Topology: NewTopologyFromMap(NewMap(placement.MarkAllAvailable(p))),
		ReadLevel: ReadMajority, WriteLevel: WriteMajority, HedgeAfter: time.Second, RequestTimeout: time.Second, MaxBatch: 10,
		Dial: c.dial,
	})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, solo.Close()) })
	require.True(t, solo.StoresHistograms())
	require.NoError(t, solo.WriteHistograms(context.Background(), "default", hs))
	it, err := db.ReadHistograms("default", id, hs[0].T, hs[0].T)
	require.NoError(t, err)
	require.True(t, it.Next())
	require.False(t, it.Next())
	require.NoError(t, it.Err())
}
