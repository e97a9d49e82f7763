package client

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/dbnode/query"
	"github.com/tessera-tsdb/tessera/internal/waitfor"
)

// pushingPeer is a fakePeer that answers pushdowns: a count of its
// distinct series in the asked shards, with their IDs' hashes as the
// digest (plus skew, to make it disagree), and records the shards.
type pushingPeer struct {
	*fakePeer
	skew   uint64
	mu     sync.Mutex
	shards []uint32
	full   []uint32 // the shards it answered in full (not DigestOnly)
}

func (p *pushingPeer) Pushdown(ctx context.Context, req *query.Request, shards []uint32) (*query.Result, error) {
	if err := p.enter(ctx); err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.shards = append(p.shards, shards...)
	if !req.DigestOnly {
		p.full = append(p.full, shards...)
	}
	p.mu.Unlock()
	asked := map[uint32]bool{}
	for _, sh := range shards {
		asked[sh] = true
	}
	p.fakePeer.mu.Lock()
	defer p.fakePeer.mu.Unlock()
	var ids [][]byte
	for _, s := range p.written {
		if asked[s.Shard] {
			ids = append(ids, s.ID)
		}
	}
	res := countResult(ids)
	res.Digest += p.skew
	if req.DigestOnly {
		res.Groups, res.DigestOnly = nil, true
	}
	return res, nil
}

// countResult is count() over the distinct series ids at one step.
func countResult(ids [][]byte) *query.Result {
	seen := map[string]bool{}
	res := &query.Result{Steps: 1}
	for _, id := range ids {
		if !seen[string(id)] {
			seen[string(id)] = true
			res.Digest += xxhash.Sum64(id)
		}
	}
	res.Series = len(seen)
	if len(seen) > 0 {
		res.Groups = []query.Partial{{Labels: labels.EmptyLabels(), Count: []float64{float64(len(seen))}}}
	}
	return res
}

func (c *fakeCluster) pushSession(t *testing.T, read ReadLevel, raw func(context.Context, query.Reader, *query.Request) (*query.Result, error)) (*Session, map[string]*pushingPeer) {
	peers := map[string]*pushingPeer{}
	for ep, p := range c.peers {
		peers[ep] = &pushingPeer{fakePeer: p}
	}
	s, err := NewSession(Options{
		Topology: NewTopologyFromMap(c.m), ReadLevel: read, WriteLevel: WriteAll,
		HedgeAfter: time.Minute, RequestTimeout: 30 * time.Second, MaxBatch: 1000,
		Dial: func(ep string) (Peer, error) {
			if p := peers[ep]; p != nil {
				return p, nil
			}
			return nil, fmt.Errorf("no fake node at %s", ep)
		},
		// Never called: this session has no local storage.
		Evaluate: func(context.Context, *query.Request, func(uint32) bool) (*query.Result, error) {
			return nil, fmt.Errorf("no local shards")
		},
		EvaluateReader: raw,
	})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s, peers
}

func writeEverywhere(t *testing.T, c *fakeCluster, s *Session, n int) {
	require.NoError(t, s.WriteBatch(context.Background(), "default", samplesOf(n)))
	for _, p := range c.peers {
		waitfor.Condition(t, 10*time.Second, 5*time.Millisecond, p.name+" written", func() error {
			if got := p.count(); got != 2*n {
				return fmt.Errorf("%d of %d samples", got, 2*n)
			}
			return nil
		})
	}
}

var countReq = &query.Request{Namespace: "default", Matchers: everything,
	Steps: query.Steps{Start: 2000, End: 2000, Lookback: 300_000}, Pushdown: query.Pushdown{Agg: query.AggCount}}

// At read level one, every shard is computed by exactly one replica and
// the three replicas compute over about a third of the shards each.
func TestPushSplitsShardsAmongReplicas(t *testing.T) {
	c := newFakeCluster(t)
	s, peers := c.pushSession(t, ReadOne, nil)
	writeEverywhere(t, c, s, 60)
	res, err := s.Push(context.Background(), countReq)
	require.NoError(t, err)
	v, ok := res.Groups[0].Value(query.AggCount, 0)
	require.True(t, ok)
	require.Equal(t, 60.0, v)
	var all []uint32
	for _, p := range peers {
		require.InDelta(t, 16/3, len(p.shards), 1, "%s computed shards %v", p.name, p.shards)
		all = append(all, p.shards...)
	}
	slices.Sort(all)
	require.Len(t, all, 16)
	require.Equal(t, 16, len(slices.Compact(all)), "a shard computed twice: %v", all)
}

// At majority every shard is computed by two replicas; where they
// disagree only those parts are read raw and computed by the session,
// and the answer is still the whole one.
func TestPushFallsBackPerPartOnDisagreement(t *testing.T) {
	c := newFakeCluster(t)
	var mu sync.Mutex
	var rawShards []uint32
	raw := func(ctx context.Context, r query.Reader, req *query.Request) (*query.Result, error) {
		its, err := r.Query(ctx, req.Namespace, req.Matchers, 0, 2000)
		if err != nil {
			return nil, err
		}
		var ids [][]byte
		mu.Lock()
		defer mu.Unlock()
		for _, it := range its {
			ids = append(ids, it.ID)
			rawShards = append(rawShards, it.Shard)
		}
		return countResult(ids), nil
	}
	s, peers := c.pushSession(t, ReadMajority, raw)
	writeEverywhere(t, c, s, 60)
	peers["127.0.0.1:9003"].skew = 1
	res, err := s.Push(context.Background(), countReq)
	require.NoError(t, err)
	v, _ := res.Groups[0].Value(query.AggCount, 0)
	require.Equal(t, 60.0, v)
	asked := map[uint32]int{}
	for _, p := range peers {
		for _, sh := range p.shards {
			asked[sh]++
		}
	}
	full := map[uint32]int{}
	for _, p := range peers {
		for _, sh := range p.full {
			full[sh]++
		}
	}
	for sh := uint32(0); sh < 16; sh++ {
		require.Equal(t, 2, asked[sh], "shard %d", sh)
		require.Equal(t, 1, full[sh], "shard %d: one replica answers in full, the other its digest", sh)
	}
	third := map[uint32]bool{}
	for _, sh := range peers["127.0.0.1:9003"].shards {
		third[sh] = true
	}
	require.NotEmpty(t, rawShards, "no part read raw")
	for _, sh := range rawShards {
		require.True(t, third[sh], "shard %d read raw, but node3 did not compute it", sh)
	}
	require.Less(t, len(third), 16, "node3 computed every shard: nothing was split")

	// Without a raw evaluator the whole query declines.
	s2, peers2 := c.pushSession(t, ReadMajority, nil)
	peers2["127.0.0.1:9003"].skew = 1
	_, err = s2.Push(context.Background(), countReq)
	require.ErrorIs(t, err, query.ErrDeclined)
}
