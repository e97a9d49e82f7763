package integration

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/client"
	"github.com/tessera-tsdb/tessera/placement"
)

// TestReadOneHedgesPastAFrozenReplica freezes one replica (SIGSTOP on a
// real tessera process: connections open, nothing answers) and reads at
// level one through a session that may ask it first: the hedge asks the
// next replica after the stage timeout, so the read returns everything
// long before the 20 s request timeout.
func TestReadOneHedgesPastAFrozenReplica(t *testing.T) {
	e := startEtcd(t)
	n1 := startNode(t, nodeConfig(t, "node1", "rack1", e.client))
	n2 := startNode(t, nodeConfig(t, "node2", "rack2", e.client))
	n3, cmd := startBinaryReplica(t, "node3", "rack3", e.client)

	c := etcdClient(t, e.client)
	p, err := placement.Init([]placement.Instance{n1.instance(), n2.instance(), n3.instance()}, 4096, 3)
	require.NoError(t, err)
	putPlacement(t, c, p)
	for _, n := range []*tnode{n1, n2, n3} {
		eventually(t, 60*time.Second, n.cfg.ID+" ready", n.ready)
	}
	d := newDataset()
	now := time.Now().UnixMilli()
	require.NoError(t, d.write(n1.url(), 0, 300, now-1000))

	settledMap := client.NewMap(getPlacement(t, c))
	// The session prefers its "local" instance first; naming node3 (with no
	// local storage) makes every shard ask node3 first.
	s, err := client.NewSession(client.Options{
		LocalID:  "node3",
		Topology: client.NewTopologyFromMap(settledMap), ReadLevel: client.ReadOne, WriteLevel: client.WriteMajority,
		HedgeAfter: 100 * time.Millisecond, RequestTimeout: 20 * time.Second, MaxBatch: 16384,
	})
	require.NoError(t, err)
	defer s.Close()
	ms := []*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, "__name__", "it_metric")}
	res, err := s.Query(context.Background(), "default", ms, now-60_000, now+1)
	require.NoError(t, err) // connections to every replica are up now
	require.Len(t, res, 300)

	require.NoError(t, cmd.Process.Signal(syscall.SIGSTOP))
	for i := 0; i < 3; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		res, err := s.Query(ctx, "default", ms, now-60_000, now+1)
		cancel()
		require.NoError(t, err, "a read at level one must not wait for the frozen replica")
		require.Len(t, res, 300)
	}
}
