package promapi

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/client"
	"github.com/tessera-tsdb/tessera/dbnode/query"
	"github.com/tessera-tsdb/tessera/dbnode/rpc"
	tstorage "github.com/tessera-tsdb/tessera/dbnode/storage"
	"github.com/tessera-tsdb/tessera/ident"
	"github.com/tessera-tsdb/tessera/placement"
	"github.com/uber-go/tally/v4"
	"pgregory.net/rapid"
)

// clusterShards is the generated cluster's shard count: few, so that a
// handful of series spread over every part of the split.
const clusterShards = 16

// clusterData is the data set every replica of the generated cluster
// holds (RF 3 on three nodes), replaced per drawn case.
type clusterData struct {
	mu     sync.Mutex
	series []memSeries
}

// clusterReplica is one node of the generated cluster as the session sees
// it: it answers Pushdown with Evaluate over the series of the shards
// asked for, read in its own order (each replica rotates the series, as
// replicas' postings follow their own insertion order, so that the
// digests' independence of order is exercised).
type clusterReplica struct {
	data   *clusterData
	rotate int
}

func (r clusterReplica) Pushdown(ctx context.Context, req *query.Request, shards []uint32) (*query.Result, error) {
	want := map[uint32]bool{}
	for _, sh := range shards {
		want[sh] = true
	}
	r.data.mu.Lock()
	series := r.data.series
	r.data.mu.Unlock()
	part := &memBackend{}
	for i := range series {
		s := series[(i+r.rotate)%len(series)]
		if want[ident.Shard(ident.FromLabels(s.lset), clusterShards)] {
			part.add(s.lset, s.samples...)
		}
	}
	return Evaluate(ctx, part, req, testOptions(Options{Parallelism: 2}))
}

var errRawOnly = errors.New("the generated cluster's raw reads go to the whole data set")

func (clusterReplica) WriteBatch(context.Context, string, []tstorage.Sample) (client.WriteResult, error) {
	return client.WriteResult{}, errRawOnly
}

func (clusterReplica) FetchTagged(context.Context, *rpc.FetchTaggedRequest) (*rpc.FetchResponse, error) {
	return nil, errRawOnly
}

func (clusterReplica) Health(context.Context) (*rpc.HealthResponse, error) {
	return &rpc.HealthResponse{Ready: true}, nil
}

func (clusterReplica) Close() error { return nil }

// clusterPusher answers pushed-down requests through a client.Session
// over three replicas (its parts, fan-out, digest agreement at majority
// and merge) and raw reads from the whole data set.
type clusterPusher struct {
	*memBackend
	s *client.Session
}

func (c clusterPusher) Push(ctx context.Context, req *query.Request) (*query.Result, error) {
	return c.s.Push(ctx, req)
}

// threeNodes is a genStore whose pushdowns go through a session over a
// three-node RF 3 cluster at read level majority.
func threeNodes(t *testing.T, scope tally.Scope) genStore {
	data := &clusterData{}
	var ins []placement.Instance
	for i := 1; i <= 3; i++ {
		ins = append(ins, placement.Instance{ID: fmt.Sprintf("node%d", i), IsolationGroup: fmt.Sprintf("rack%d", i),
			Zone: "z", Weight: 1, Endpoint: fmt.Sprintf("node%d:1", i)})
	}
	p, err := placement.Init(ins, clusterShards, 3)
	require.NoError(t, err)
	s, err := client.NewSession(client.Options{
		Topology:  client.NewTopologyFromMap(client.NewMap(placement.MarkAllAvailable(p))),
		ReadLevel: client.ReadMajority, WriteLevel: client.WriteMajority, Metrics: scope,
		HedgeAfter: time.Minute, RequestTimeout: time.Minute, MaxBatch: 1000,
		Dial: func(ep string) (client.Peer, error) {
			return clusterReplica{data: data, rotate: int(ep[4] - '0')}, nil
		},
		// Never called: the session has no local storage.
		Evaluate: func(context.Context, *query.Request, func(uint32) bool) (*query.Result, error) {
			return nil, errRawOnly
		},
	})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return func(rt *rapid.T, series []memSeries) (query.Reader, []memSeries) {
		all, _ := inMemory(rt, series)
		data.mu.Lock()
		data.series = series
		data.mu.Unlock()
		return clusterPusher{memBackend: all.(*memBackend), s: s}, series
	}
}

// TestGeneratedQueriesMatchPrometheusCluster is the property through the
// cluster's session: every pushed-down aggregation is computed by the
// replicas over parts of the shards, two replicas per part whose digests
// must agree, and merged by the session (within 1e-12 relative, as for
// the split data set).
func TestGeneratedQueriesMatchPrometheusCluster(t *testing.T) {
	var stats fastStats
	before := genChecked.Load()
	scope := tally.NewTestScope("", nil)
	rapid.Check(t, genPropertyTol(t, &stats, threeNodes(t, scope), true))
	t.Logf("%d queries compared through a three-node session; %d selections pushed down (aggregations and step values) and merged, %d declined to raw series",
		genChecked.Load()-before, stats.pushed.Load(), stats.declined.Load())
	require.Positive(t, stats.pushed.Load(), "the comparison must exercise the pushdown")
	// Replicas reading the same samples in other orders agree.
	pushed := false
	for name, c := range scope.Snapshot().Counters() {
		switch c.Name() {
		case "pushdown_disagreements":
			require.Zero(t, c.Value(), name)
		case "read_pushdown":
			pushed = c.Value() > 0
		}
	}
	require.True(t, pushed, "no pushdown answered by the session")
}
