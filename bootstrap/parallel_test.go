package bootstrap

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tessera-tsdb/tessera/dbnode/rpc"
)

// parallel runs every index once, never more than limit at once.
func TestParallelRunsEachOnceWithinLimit(t *testing.T) {
	var running, peak, calls atomic.Int64
	seen := make([]atomic.Int32, 100)
	err := parallel(context.Background(), 3, len(seen), func(ctx context.Context, i int) error {
		n := running.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		seen[i].Add(1)
		calls.Add(1)
		running.Add(-1)
		return nil
	})
	require.NoError(t, err)
	require.EqualValues(t, 100, calls.Load())
	for i := range seen {
		require.EqualValues(t, 1, seen[i].Load(), "index %d", i)
	}
	require.LessOrEqual(t, peak.Load(), int64(3))
}

// The first error is returned, cancels the running calls' ctx and stops
// new ones from starting.
func TestParallelStopsAtFirstError(t *testing.T) {
	boom := errors.New("boom")
	var started atomic.Int64
	err := parallel(context.Background(), 2, 1000, func(ctx context.Context, i int) error {
		started.Add(1)
		if i == 0 {
			return boom
		}
		<-ctx.Done() // only the failure's cancel ends this
		return ctx.Err()
	})
	require.ErrorIs(t, err, boom)
	require.Less(t, started.Load(), int64(1000))
}

// A cancelled parent ctx ends it with the ctx's error.
func TestParallelParentCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := parallel(ctx, 2, 10, func(ctx context.Context, i int) error { return ctx.Err() })
	require.ErrorIs(t, err, context.Canceled)
}

// barrierPeer answers BlockMetadata only once every peer of the test was
// asked: asked one after the other, the first never answers and its ctx
// (a deadline) ends the call.
type barrierPeer struct {
	Peer
	arrived *sync.WaitGroup
	all     <-chan struct{}
}

func (p barrierPeer) BlockMetadata(ctx context.Context, req *rpc.BlockMetadataRequest) (*rpc.BlockMetadataResponse, error) {
	p.arrived.Done()
	select {
	case <-p.all:
		return &rpc.BlockMetadataResponse{}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// The peers' block metadata is asked for at once, answers kept in peer
// order.
func TestBlockMetadataAsksEveryPeerAtOnce(t *testing.T) {
	const peers = 3
	var arrived sync.WaitGroup
	arrived.Add(peers)
	all := make(chan struct{})
	go func() { arrived.Wait(); close(all) }()
	clients := make([]Peer, peers)
	for i := range clients {
		clients[i] = barrierPeer{arrived: &arrived, all: all}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	answers := blockMetadata(ctx, clients, "default", []uint32{1, 2})
	require.Len(t, answers, peers)
	for i, a := range answers {
		require.NoError(t, a.err, "peer %d", i)
		require.NotNil(t, a.BlockMetadataResponse, "peer %d", i)
	}
}
