package client

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/dbnode/query"
	"github.com/tessera-tsdb/tessera/dbnode/rpc"
)

// partsPushingPeer is a pushingPeer that also answers several parts in
// one call (as the node RPC client does), counting calls of each kind.
type partsPushingPeer struct {
	*pushingPeer
	partCalls, singleCalls atomic.Int64
}

func (p *partsPushingPeer) Pushdown(ctx context.Context, req *query.Request, shards []uint32) (*query.Result, error) {
	p.singleCalls.Add(1)
	return p.pushingPeer.Pushdown(ctx, req, shards)
}

func (p *partsPushingPeer) PushdownParts(ctx context.Context, req *query.Request, parts []rpc.PartRequest) ([]*query.Result, error) {
	p.partCalls.Add(1)
	out := make([]*query.Result, len(parts))
	for i, pt := range parts {
		r := *req
		r.DigestOnly = pt.DigestOnly
		res, err := p.pushingPeer.Pushdown(ctx, &r, pt.Shards)
		if err != nil {
			return nil, err
		}
		out[i] = res
	}
	return out, nil
}

// At majority each host is asked two parts of the query: one call for
// both, each part answered as asked (one in full, one its digest), and
// the answer is the whole one.
func TestPushAsksAHostsPartsInOneCall(t *testing.T) {
	c := newFakeCluster(t)
	_, peers := c.pushSession(t, ReadMajority, nil)
	wrapped := map[string]*partsPushingPeer{}
	for ep, p := range peers {
		wrapped[ep] = &partsPushingPeer{pushingPeer: p}
	}
	s, err := NewSession(Options{
		Topology: NewTopologyFromMap(c.m), ReadLevel: ReadMajority, WriteLevel: WriteAll,
		HedgeAfter: time.Minute, RequestTimeout: 30 * time.Second, MaxBatch: 1000,
		Dial: func(ep string) (Peer, error) { return wrapped[ep], nil },
		Evaluate: func(context.Context, *query.Request, func(uint32) bool) (*query.Result, error) {
			return nil, query.ErrDeclined
		},
	})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	writeEverywhere(t, c, s, 60)
	res, err := s.Push(context.Background(), countReq)
	require.NoError(t, err)
	v, ok := res.Groups[0].Value(query.AggCount, 0)
	require.True(t, ok)
	require.Equal(t, 60.0, v)
	full := 0
	for _, p := range wrapped {
		require.Equal(t, int64(1), p.partCalls.Load(), "%s: one call for its parts", p.name)
		require.Zero(t, p.singleCalls.Load(), p.name)
		require.NotEqual(t, len(p.full), len(p.shards), "%s answered one part for its digest only", p.name)
		full += len(p.full)
	}
	require.Equal(t, 16, full, "each shard answered in full once")
}
