package bootstrap

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/client"
	"github.com/tessera-tsdb/tessera/dbnode/rpc"
	"github.com/tessera-tsdb/tessera/internal/waitfor"
)

// gatedPeer is a fakePeer whose unflushed data of one shard is held back
// until release is closed: the round is stopped half-way, for as long as
// the test looks.
type gatedPeer struct {
	*fakePeer
	shard   uint32
	release chan struct{}
}

func (p *gatedPeer) FetchUnflushed(ctx context.Context, req *rpc.FetchUnflushedRequest) (*rpc.FetchUnflushedResponse, error) {
	if req.Shard == p.shard {
		select {
		case <-p.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return p.fakePeer.FetchUnflushed(ctx, req)
}

// Progress moves while a round runs: with shard 0 streamed and shard 1
// held back, it shows the round running, one of two shards streamed, the
// samples and bytes so far, a rate and an estimate of the time left.
// (Before, progress was published only before and after a whole round:
// the same point read 0 of 0 and nothing streamed.)
func TestProgressMovesDuringTheRound(t *testing.T) {
	fp, want := fullPeer(t)
	gp := &gatedPeer{fakePeer: fp, shard: 1, release: make(chan struct{})}
	h := newHarness(t, mkPlacement([]uint32{0, 1}, "p1"), nil)
	b, err := New(Options{
		InstanceID: self, DB: h.db, Store: h.store,
		Dial:    func(string) (Peer, error) { return gp, nil },
		Workers: 1, ShardsPerFetch: 1, // shard 0, then shard 1
		MarkAvailableAttempts: 1, MarkAvailableBackoff: time.Millisecond,
		Metrics: h.scope,
	})
	require.NoError(t, err)
	h.b = b

	p, err := h.store.Placement(context.Background())
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- b.Reconcile(context.Background(), client.NewMap(p)) }()

	var mid Progress
	waitfor.Condition(t, 20*time.Second, 5*time.Millisecond, "shard 0 streamed while shard 1 is held back", func() error {
		if mid = b.Progress(); mid.RoundStreamed != 1 {
			return fmt.Errorf("progress %+v", mid)
		}
		return nil
	})
	require.True(t, mid.Running)
	require.Equal(t, 2, mid.RoundShards)
	require.Equal(t, 2, mid.ShardsTotal)
	require.Zero(t, mid.ShardsDone, "nothing marked available before the round's CAS")
	require.Positive(t, mid.Samples)
	require.Positive(t, mid.Bytes)
	require.Positive(t, mid.BytesPerSecond)
	require.Positive(t, mid.ETA, "one of two shards streamed: time left is known")
	gauges := h.scope.Snapshot().Gauges()
	require.Equal(t, 1.0, gauges["progress.round_shards_streamed+"].Value())
	require.Equal(t, 2.0, gauges["progress.round_shards+"].Value())

	close(gp.release)
	require.NoError(t, <-done)
	end := b.Progress()
	require.False(t, end.Running)
	require.Equal(t, 2, end.ShardsDone)
	require.Equal(t, 2, end.RoundStreamed)
	require.Greater(t, end.Samples, mid.Samples, "shard 1's samples counted too")
	require.Zero(t, end.ETA)
	h.requireData(want)
}

func TestETA(t *testing.T) {
	require.Equal(t, time.Duration(-1), eta(time.Second, 0, 10))
	require.Equal(t, 9*time.Second, eta(time.Second, 1, 10))
	require.Equal(t, time.Duration(0), eta(time.Second, 10, 10))
}
