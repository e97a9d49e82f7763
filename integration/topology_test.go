package integration

import (
	"context"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"
	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/dbnode/encoding"
	"github.com/tessera-tsdb/tessera/dbnode/rpc"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
	"github.com/tessera-tsdb/tessera/ident"
	"github.com/tessera-tsdb/tessera/placement"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// loader writes continuously at majority through the given nodes and
// records every acknowledged sample and every failed request.
type loader struct {
	d      *dataset
	stop   chan struct{}
	done   chan struct{}
	mu     sync.Mutex
	errs   []error
	writes int
}

func startLoad(t *testing.T, d *dataset, urls func() []string, series int) *loader {
	l := &loader{d: d, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		ts := time.Now().UnixMilli() - 60_000
		for k := 0; ; k++ {
			select {
			case <-l.stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			us := urls()
			err := d.write(us[k%len(us)], 0, series, ts+int64(k))
			l.mu.Lock()
			l.writes++
			if err != nil {
				l.errs = append(l.errs, err)
			}
			l.mu.Unlock()
		}
	}()
	t.Cleanup(l.finish)
	return l
}

func (l *loader) finish() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	<-l.done
}

func (l *loader) failures() (int, []error) {
	l.finish()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.writes, l.errs
}

// settled waits until the placement has no INITIALIZING and no LEAVING
// copy left.
func settled(t *testing.T, c *clientv3.Client, d time.Duration) placement.Placement {
	var p placement.Placement
	eventually(t, d, "placement settled", func() error {
		p = getPlacement(t, c)
		moving, leaving := 0, 0
		for _, in := range p.Instances {
			for _, s := range in.Shards {
				switch s.State {
				case placement.Initializing:
					moving++
				case placement.Leaving:
					leaving++
				}
			}
		}
		if moving+leaving > 0 {
			return fmt.Errorf("%d INITIALIZING, %d LEAVING copies", moving, leaving)
		}
		return nil
	})
	return p
}

func casPlacement(t *testing.T, c *clientv3.Client, op func(placement.Placement) (placement.Placement, error)) placement.Placement {
	p := getPlacement(t, c)
	next, err := op(p)
	require.NoError(t, err)
	putPlacement(t, c, next)
	return next
}

// checkEachReplica reads every owned shard from each instance alone, over
// node RPC, and finds every acknowledged sample of the shards it owns. A
// write returns once its level is met while the other replicas are still
// being written, so each replica is given a few seconds to converge.
func checkEachReplica(t *testing.T, p placement.Placement, d *dataset) {
	t.Helper()
	checkEachReplicaWith(t, rpc.ClientOptions{}, p, d)
}

// checkEachReplicaWith is checkEachReplica dialling with opts (mutual TLS).
func checkEachReplicaWith(t *testing.T, opts rpc.ClientOptions, p placement.Placement, d *dataset) {
	t.Helper()
	for _, in := range p.Instances {
		var checked int
		// A replica that missed a write (a joining node under load, say)
		// gets it from a hint replayed once it answers, with no deadline
		// the system promises: wait long, as the check passes at once
		// when it holds.
		eventually(t, 60*time.Second, in.ID+" holding every acknowledged sample of its shards", func() error {
			var err error
			checked, err = replicaHolds(opts, in, p.NumShards, d)
			return err
		})
		t.Logf("%s alone: %d acknowledged samples of its shards checked", in.ID, checked)
	}
}

func replicaHolds(opts rpc.ClientOptions, in placement.Instance, numShards uint32, d *dataset) (int, error) {
	opts.Timeout = 30 * time.Second
	c, err := rpc.Dial(in.Endpoint, opts)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	owned := map[uint32]bool{}
	var shards []uint32
	for _, s := range in.Shards {
		owned[s.ID] = true
		shards = append(shards, s.ID)
	}
	resp, err := c.FetchTagged(context.Background(), &rpc.FetchTaggedRequest{
		Namespace: "default", Start: 0, End: math.MaxInt64,
		Matchers: []rpc.Matcher{{Type: uint8(labels.MatchEqual), Name: "__name__", Value: "it_metric"}},
		Shards:   shards,
	})
	if err != nil {
		return 0, fmt.Errorf("fetch from %s: %w", in.ID, err)
	}
	got := map[string]map[int64]float64{}
	for _, s := range resp.Series {
		ls, err := ident.Labels(s.ID)
		if err != nil {
			return 0, err
		}
		m := map[int64]float64{}
		it := encoding.NewIterator(s.Stream)
		for it.Next() {
			ts, v := it.At()
			m[ts] = v
		}
		if err := it.Err(); err != nil {
			return 0, err
		}
		got[ls.Get("series")] = m
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	checked := 0
	for k, samples := range d.series {
		id := ident.FromLabels(labels.FromStrings("__name__", "it_metric", "job", "it", "series", k))
		if !owned[ident.Shard(id, numShards)] {
			continue
		}
		for _, s := range samples {
			v, ok := got[k][s.Timestamp]
			if !ok {
				return checked, fmt.Errorf("%s lacks series %s sample at %d", in.ID, k, s.Timestamp)
			}
			if math.Float64bits(s.Value) != math.Float64bits(v) {
				return checked, fmt.Errorf("%s: series %s at %d: got %v want %v", in.ID, k, s.Timestamp, v, s.Value)
			}
			checked++
		}
	}
	return checked, nil
}

func TestAddNodeUnderLoad(t *testing.T) {
	e, nodes, c := cluster3(t)
	d := newDataset()
	l := startLoad(t, d, func() []string { return []string{nodes[0].url(), nodes[1].url(), nodes[2].url()} }, 200)
	d.waitSamples(t, 2000)
	n4 := startNode(t, nodeConfig(t, "node4", "rack4", e.client))
	start := time.Now()
	casPlacement(t, c, func(p placement.Placement) (placement.Placement, error) { return placement.Add(p, n4.instance()) })
	p := settled(t, c, 120*time.Second)
	t.Logf("node4 added: all shards AVAILABLE in %v", time.Since(start))
	in, ok := p.Instance("node4")
	require.True(t, ok)
	require.NotEmpty(t, in.Shards)
	writes, errs := l.failures()
	require.Empty(t, errs, "of %d writes", writes)
	all := append(nodes, n4)
	for _, n := range all {
		require.NoError(t, d.check(n.url(), 0, math.MaxInt64), "majority read via %s", n.cfg.ID)
	}
	checkEachReplica(t, p, d)
}

func TestRemoveNodeUnderLoad(t *testing.T) {
	_, nodes, c := clusterN(t, 4)
	d := newDataset()
	l := startLoad(t, d, func() []string { return []string{nodes[0].url(), nodes[1].url()} }, 200)
	d.waitSamples(t, 2000)
	casPlacement(t, c, func(p placement.Placement) (placement.Placement, error) { return placement.Remove(p, "node4") })
	p := settled(t, c, 120*time.Second)
	_, still := p.Instance("node4")
	require.False(t, still, "node4 left the placement once its shards moved")
	writes, errs := l.failures()
	require.Empty(t, errs, "of %d writes", writes)
	for _, n := range nodes[:3] {
		require.NoError(t, d.check(n.url(), 0, math.MaxInt64))
	}
	checkEachReplica(t, p, d)
}

func TestReplaceNodeUnderLoad(t *testing.T) {
	e, nodes, c := cluster3(t)
	d := newDataset()
	l := startLoad(t, d, func() []string { return []string{nodes[0].url(), nodes[1].url()} }, 200)
	d.waitSamples(t, 2000)
	n4 := startNode(t, nodeConfig(t, "node4", "rack3", e.client))
	casPlacement(t, c, func(p placement.Placement) (placement.Placement, error) {
		return placement.Replace(p, []string{"node3"}, []placement.Instance{n4.instance()})
	})
	p := settled(t, c, 120*time.Second)
	_, still := p.Instance("node3")
	require.False(t, still)
	in, _ := p.Instance("node4")
	require.Len(t, in.Shards, 4096)
	writes, errs := l.failures()
	require.Empty(t, errs, "of %d writes", writes)
	for _, n := range []*tnode{nodes[0], nodes[1], n4} {
		require.NoError(t, d.check(n.url(), 0, math.MaxInt64))
	}
	checkEachReplica(t, p, d)
}

// slowJoiner is a node whose peer streaming is throttled hard, so it stays
// INITIALIZING long enough to be removed or killed mid-bootstrap.
func slowJoiner(t *testing.T, e *etcdServer, id, group string) *tnode {
	cfg := nodeConfig(t, id, group, e.client)
	cfg.Bootstrap.MaxBytesPerSecond = 1
	return startNode(t, cfg)
}

func TestAddThenRemoveWhileInitializing(t *testing.T) {
	e, nodes, c := cluster3(t)
	d := newDataset()
	l := startLoad(t, d, func() []string { return []string{nodes[0].url(), nodes[1].url(), nodes[2].url()} }, 100)
	d.waitSamples(t, 1000)
	n4 := slowJoiner(t, e, "node4", "rack4")
	before := getPlacement(t, c)
	casPlacement(t, c, func(p placement.Placement) (placement.Placement, error) { return placement.Add(p, n4.instance()) })
	p := getPlacement(t, c)
	require.Greater(t, placement.MovingShards(p), 0)
	// Undo: node4's shards go back to their sources.
	casPlacement(t, c, func(p placement.Placement) (placement.Placement, error) { return placement.Remove(p, "node4") })
	p = settled(t, c, 60*time.Second)
	_, still := p.Instance("node4")
	require.False(t, still)
	for _, in := range before.Instances {
		after, ok := p.Instance(in.ID)
		require.True(t, ok)
		require.Equal(t, len(in.Shards), len(after.Shards), "%s got its shards back", in.ID)
	}
	writes, errs := l.failures()
	require.Empty(t, errs, "of %d writes", writes)
	for _, n := range nodes {
		require.NoError(t, d.check(n.url(), 0, math.MaxInt64))
	}
	checkEachReplica(t, p, d)
}

func TestJoiningNodeStoppedMidBootstrapFinishes(t *testing.T) {
	e, nodes, c := cluster3(t)
	d := newDataset()
	for k := 0; k < 20; k++ {
		require.NoError(t, d.write(nodes[k%3].url(), 0, 200, time.Now().UnixMilli()-60_000+int64(k)))
	}
	l := startLoad(t, d, func() []string { return []string{nodes[0].url(), nodes[1].url(), nodes[2].url()} }, 100)
	n4 := slowJoiner(t, e, "node4", "rack4")
	casPlacement(t, c, func(p placement.Placement) (placement.Placement, error) { return placement.Add(p, n4.instance()) })
	eventually(t, 30*time.Second, "node4 bootstrapping", func() error {
		if err := n4.ready(); err == nil {
			return fmt.Errorf("node4 ready already")
		}
		return nil
	})
	n4.stop()
	require.Greater(t, placement.MovingShards(getPlacement(t, c)), 0, "stopped mid-bootstrap")
	cfg := n4.cfg
	cfg.Bootstrap.MaxBytesPerSecond = 0
	n4 = startNode(t, cfg)
	p := settled(t, c, 120*time.Second)
	eventually(t, 30*time.Second, "node4 ready", n4.ready)
	writes, errs := l.failures()
	require.Empty(t, errs, "of %d writes", writes)
	checkEachReplica(t, p, d)
}

func TestWholeClusterRestart(t *testing.T) {
	_, nodes, c := cluster3(t)
	d := newDataset()
	for k := 0; k < 10; k++ {
		require.NoError(t, d.write(nodes[k%3].url(), 0, 200, time.Now().UnixMilli()-60_000+int64(k)))
	}
	for _, n := range nodes {
		n.stop()
	}
	for i, n := range nodes {
		nodes[i] = startNode(t, n.cfg)
	}
	for _, n := range nodes {
		eventually(t, 60*time.Second, n.cfg.ID+" ready after full restart", n.ready)
	}
	for _, n := range nodes {
		require.NoError(t, d.check(n.url(), 0, math.MaxInt64))
	}
	checkEachReplica(t, getPlacement(t, c), d)
}

// flushedBlocks counts the flushed blocks a node holds over all shards.
func flushedBlocks(t *testing.T, n *tnode) int {
	total := 0
	for sh := uint32(0); sh < 4096; sh++ {
		bs, err := n.n.DB().FlushedBlocks("default", sh)
		require.NoError(t, err)
		total += len(bs)
	}
	return total
}

// TestAddNodeStreamsFlushedBlocks: history old enough to be flushed reaches
// the joining node as sealed blocks written straight to its filesets.
func TestAddNodeStreamsFlushedBlocks(t *testing.T) {
	e, nodes, c := cluster3(t)
	d := newDataset()
	old := time.Now().Add(-3 * time.Hour).UnixMilli()
	for k := 0; k < 10; k++ {
		require.NoError(t, d.write(nodes[0].url(), 0, 200, old+int64(k)*1000))
	}
	// Cold writes to a sealed block are flushed by the next tick (10 s).
	eventually(t, 60*time.Second, "history flushed on node1", func() error {
		if n := flushedBlocks(t, nodes[0]); n == 0 {
			return fmt.Errorf("no flushed block yet")
		}
		return nil
	})
	n4 := startNode(t, nodeConfig(t, "node4", "rack4", e.client))
	casPlacement(t, c, func(p placement.Placement) (placement.Placement, error) { return placement.Add(p, n4.instance()) })
	p := settled(t, c, 120*time.Second)
	require.Greater(t, flushedBlocks(t, n4), 0, "node4 received sealed blocks as filesets")
	checkEachReplica(t, p, d)
}

// TestJoinerCatchesUpWriteItsSourceMissed: an acknowledged write its two
// other owners hold but the shard's LEAVING source does not (its replica
// failed, or a coordinator still routing by the placement before the move
// sent it there after the joiner's stream) reaches the joiner by the
// catch-up it runs after marking the shard AVAILABLE, not only by the
// periodic repair once the sample's block settles.
func TestJoinerCatchesUpWriteItsSourceMissed(t *testing.T) {
	e, _, c := cluster3(t)
	cfg := nodeConfig(t, "node4", "rack4", e.client)
	cfg.Bootstrap.CatchUpAfter = time.Second
	n4 := startNode(t, cfg)
	p := getPlacement(t, c)
	next, err := placement.Add(p, n4.instance())
	require.NoError(t, err)
	in4, ok := next.Instance("node4")
	require.True(t, ok)
	require.NotEmpty(t, in4.Shards)
	shard, source := in4.Shards[0].ID, in4.Shards[0].SourceID
	require.NotEmpty(t, source, "node4's shard %d moves from a source", shard)

	// A series of that shard, written to its owners but the source.
	d := newDataset()
	var key string
	var id []byte
	for i := 0; ; i++ {
		key = fmt.Sprint(i)
		id = ident.FromLabels(labels.FromStrings("__name__", "it_metric", "job", "it", "series", key))
		if ident.Shard(id, p.NumShards) == shard {
			break
		}
	}
	now := time.Now().UnixMilli()
	written := 0
	for _, o := range placement.ShardOwners(p, shard) {
		if o.InstanceID == source {
			continue
		}
		rc, err := rpc.Dial(o.Endpoint, rpc.ClientOptions{Timeout: 30 * time.Second})
		require.NoError(t, err)
		_, err = rc.WriteBatch(context.Background(), "default", []storage.Sample{{ID: id, Shard: shard, T: now, V: 42}})
		rc.Close()
		require.NoError(t, err, "write to %s", o.InstanceID)
		written++
	}
	require.Equal(t, 2, written, "a majority of the shard's three owners")
	d.series[key] = []prompb.Sample{{Timestamp: now, Value: 42}}

	putPlacement(t, c, next)
	p = settled(t, c, 120*time.Second)
	in4, _ = p.Instance("node4")
	eventually(t, 60*time.Second, "node4 holding the write its source missed", func() error {
		_, err := replicaHolds(rpc.ClientOptions{}, in4, p.NumShards, d)
		return err
	})
}
