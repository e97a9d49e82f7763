package client

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/client/hints"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
	"github.com/tessera-tsdb/tessera/dbnode/storage/storagetest"
	"github.com/tessera-tsdb/tessera/internal/waitfor"
)

// TestSessionSharedEncodingReachesReplicas: a coordinator holding every
// series (RF 3 on three nodes, samples carrying their storage refs)
// encodes each batch once for both remote replicas; a replica written
// with WriteBatch (no streams) gets the batch decoded back from that
// encoding, and a failing one gets it as hints, replayed once it answers:
// both end up holding every sample.
func TestSessionSharedEncodingReachesReplicas(t *testing.T) {
	c := newFakeCluster(t)
	db := storagetest.Open(t, 16, nil)
	ns := storagetest.Namespace().Name
	st := openStore(t, t.TempDir(), hints.Options{})
	s, err := NewSession(Options{
		LocalID: "node1", Local: db,
		Topology: NewTopologyFromMap(c.m), ReadLevel: ReadMajority, WriteLevel: WriteMajority, Pairing: true,
		HedgeAfter: 20 * time.Millisecond, RequestTimeout: 10 * time.Second, MaxBatch: 1000, Dial: c.dial,
		Hints: HintOptions{Store: st},
	})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	failing := c.peers["127.0.0.1:9003"]
	failing.mu.Lock()
	failing.fail = errors.New("disk on fire")
	failing.mu.Unlock()

	now := time.Now().Add(-time.Minute).UnixMilli()
	var all []storage.Sample
	for k := 0; k < 5; k++ {
		in := batchAt(k)
		for i := range in {
			in[i].T = now + in[i].T
		}
		if k > 0 {
			// As the HTTP series cache does: the refs of the earlier write.
			require.NoError(t, db.WriteBatch(ns, in))
			for i := range in {
				require.NotZero(t, in[i].Ref.Seq())
			}
		}
		require.NoError(t, s.WriteBatch(context.Background(), ns, in))
		all = append(all, in...)
	}
	require.NoError(t, c.peers["127.0.0.1:9002"].holds(all))
	waitfor.Condition(t, 10*time.Second, 10*time.Millisecond, "every batch hinted", func() error {
		if n := records(st, "node3"); n < 5 {
			return fmt.Errorf("%d records", n)
		}
		return nil
	})
	failing.mu.Lock()
	failing.fail = nil
	failing.mu.Unlock()
	waitfor.Condition(t, 20*time.Second, 10*time.Millisecond, "node3 caught up", func() error { return failing.holds(all) })
}
