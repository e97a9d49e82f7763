package client

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/client/hints"
	"github.com/tessera-tsdb/tessera/dbnode/rpc"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
	"github.com/tessera-tsdb/tessera/dbnode/vfs"
	"github.com/tessera-tsdb/tessera/internal/waitfor"
	"github.com/tessera-tsdb/tessera/placement"
	"github.com/uber-go/tally/v4"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func (p *fakePeer) setFail(err error) {
	p.mu.Lock()
	p.fail = err
	p.mu.Unlock()
}

// holds says whether the peer has every sample of want (ID, timestamp,
// value bits).
func (p *fakePeer) holds(want []storage.Sample) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	have := map[string]float64{}
	for _, s := range p.written {
		have[fmt.Sprintf("%s@%d", s.ID, s.T)] = s.V
	}
	missing := 0
	for _, s := range want {
		if v, ok := have[fmt.Sprintf("%s@%d", s.ID, s.T)]; !ok || v != s.V {
			missing++
		}
	}
	if missing > 0 {
		return fmt.Errorf("%s misses %d of %d samples", p.name, missing, len(want))
	}
	return nil
}

func openStore(t *testing.T, dir string, o hints.Options) *hints.Store {
	t.Helper()
	o.MaxBytes, o.MaxAge = 1<<30, time.Hour
	st, err := hints.Open(dir, o)
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	return st
}

func (c *fakeCluster) hintedSession(t *testing.T, topo *Topology, st *hints.Store, health HealthOptions, sc tally.Scope) *Session {
	t.Helper()
	if topo == nil {
		topo = NewTopologyFromMap(c.m)
	}
	s, err := NewSession(Options{
		Topology: topo, ReadLevel: ReadMajority, WriteLevel: WriteMajority, Pairing: true,
		HedgeAfter: 20 * time.Millisecond, RequestTimeout: 10 * time.Second, MaxBatch: 1000,
		Health: health, Dial: c.dial, Hints: HintOptions{Store: st}, Metrics: sc,
	})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

// sessionWithNode3 starts a hinted session whose node3 is node3.
func (c *fakeCluster) sessionWithNode3(t *testing.T, st *hints.Store, node3 Peer) *Session {
	t.Helper()
	s, err := NewSession(Options{
		Topology: NewTopologyFromMap(c.m), ReadLevel: ReadMajority, WriteLevel: WriteMajority,
		HedgeAfter: 20 * time.Millisecond, RequestTimeout: 10 * time.Second, MaxBatch: 1000,
		Hints: HintOptions{Store: st},
		Dial: func(ep string) (Peer, error) {
			if ep == "127.0.0.1:9003" {
				return node3, nil
			}
			return c.dial(ep)
		},
	})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

func records(st *hints.Store, target string) int {
	for _, s := range st.Status() {
		if s.Target == target {
			return s.Records
		}
	}
	return 0
}

func batchAt(k int) []storage.Sample {
	in := samplesOf(20)
	for i := range in {
		in[i].T += int64(10 * k)
		in[i].V += float64(k)
	}
	return in
}

// A frozen replica misses writes at majority; they are hinted, and
// replayed once it answers again, so it ends up with every sample.
func TestHintsReplayToReplicaThatWasFrozen(t *testing.T) {
	c := newFakeCluster(t)
	st := openStore(t, t.TempDir(), hints.Options{})
	health := HealthOptions{Interval: 20 * time.Millisecond, Timeout: 50 * time.Millisecond, Failures: 2}
	s := c.hintedSession(t, nil, st, health, nil)
	frozen := c.peers["127.0.0.1:9003"]
	frozen.setFrozen(true)
	var all []storage.Sample
	for k := 0; k < 30; k++ {
		in := batchAt(k)
		require.NoError(t, s.WriteBatch(context.Background(), "default", in))
		all = append(all, in...)
	}
	waitfor.Condition(t, 20*time.Second, 10*time.Millisecond, "every missed write hinted", func() error {
		if n := records(st, "node3"); n < 30 {
			return fmt.Errorf("%d records", n)
		}
		return nil
	})
	require.Zero(t, records(st, "node1"))
	frozen.setFrozen(false)
	waitfor.Condition(t, 20*time.Second, 10*time.Millisecond, "node3 caught up", func() error { return frozen.holds(all) })
	waitfor.Condition(t, 10*time.Second, 10*time.Millisecond, "queue empty", func() error {
		if n := records(st, "node3"); n > 0 {
			return fmt.Errorf("%d records left", n)
		}
		return nil
	})
	for _, p := range c.peers {
		require.NoError(t, p.holds(all))
	}
}

// A replica answering with an error gets hints too; they are kept, in
// order, across a restart of the coordinator (a new session over the same
// directory), and replayed by it.
func TestHintsSurviveCoordinatorRestart(t *testing.T) {
	c := newFakeCluster(t)
	dir := t.TempDir()
	st := openStore(t, dir, hints.Options{})
	sc := tally.NewTestScope("", nil)
	s := c.hintedSession(t, nil, st, HealthOptions{}, sc)
	failing := c.peers["127.0.0.1:9002"]
	failing.setFail(status.Error(codes.Unavailable, "disk busy"))
	var all []storage.Sample
	for k := 0; k < 10; k++ {
		in := batchAt(k)
		require.NoError(t, s.WriteBatch(context.Background(), "default", in))
		all = append(all, in...)
	}
	// The failed replica's hint is durable before the write returns
	// when the failure came first: here it came right away, so the
	// records are there as soon as the failures were counted.
	waitfor.Condition(t, 10*time.Second, 10*time.Millisecond, "hinted", func() error {
		if n := records(st, "node2"); n < 10 {
			return fmt.Errorf("%d records", n)
		}
		return nil
	})
	require.NoError(t, s.Close())
	require.NoError(t, st.Close())
	require.Error(t, failing.holds(all))

	failing.setFail(nil)
	st2 := openStore(t, dir, hints.Options{})
	require.Equal(t, 10, records(st2, "node2"))
	c.hintedSession(t, nil, st2, HealthOptions{}, nil)
	waitfor.Condition(t, 20*time.Second, 10*time.Millisecond, "node2 caught up after the restart", func() error { return failing.holds(all) })
	snap := sc.Snapshot().Counters()
	var hinted int64
	for _, ct := range snap {
		if ct.Name() == "hinted_samples" {
			hinted = ct.Value()
		}
	}
	require.Equal(t, int64(len(all)), hinted)
}

// refusingPeer refuses every write for shards it does not hold, as a
// replica whose placement moved them away does.
type refusingPeer struct {
	*fakePeer
	refuse map[uint32]bool
}

func (p *refusingPeer) WriteBatch(ctx context.Context, ns string, samples []storage.Sample) (WriteResult, error) {
	var refused []uint32
	for _, s := range samples {
		if p.refuse[s.Shard] {
			refused = append(refused, s.Shard)
		}
	}
	if len(refused) > 0 {
		return WriteResult{}, &rpc.Error{Addr: "fake", Method: "WriteBatch",
			Status: status.New(codes.FailedPrecondition, "shard not held"), Shards: refused}
	}
	return p.fakePeer.WriteBatch(ctx, ns, samples)
}

// Hints for shards the target no longer holds are dropped (counted), the
// rest replayed; hints for a target that left the placement are dropped.
func TestHintsDropShardsTheTargetNoLongerHolds(t *testing.T) {
	c := newFakeCluster(t)
	dir := t.TempDir()
	sc := tally.NewTestScope("", nil)
	st := openStore(t, dir, hints.Options{Metrics: sc})
	q, err := st.Queue("node3")
	require.NoError(t, err)
	in := samplesOf(40)
	require.NoError(t, q.Append("default", in))
	target := c.peers["127.0.0.1:9003"]
	refused := map[uint32]bool{in[0].Shard: true}
	rp := &refusingPeer{fakePeer: target, refuse: refused}
	var want []storage.Sample
	for _, s := range in {
		if !refused[s.Shard] {
			want = append(want, s)
		}
	}
	c.sessionWithNode3(t, st, rp)
	waitfor.Condition(t, 10*time.Second, 10*time.Millisecond, "replayed", func() error {
		if records(st, "node3") > 0 {
			return errors.New("records left")
		}
		return target.holds(want)
	})
	target.mu.Lock()
	for _, w := range target.written {
		require.False(t, refused[w.Shard], "a refused shard was written")
	}
	target.mu.Unlock()

	// The target leaves the placement: its hints have nobody to go to.
	q1, err := st.Queue("node1")
	require.NoError(t, err)
	require.NoError(t, q1.Append("default", in))
	var ins []placement.Instance
	for _, in := range c.m.Placement.Instances {
		if in.ID != "node1" {
			in.Shards = nil
			ins = append(ins, in)
		}
	}
	ins = append(ins, placement.Instance{ID: "node4", IsolationGroup: "rack1", Zone: "z", Weight: 1, Endpoint: "127.0.0.1:9004"})
	p, err := placement.Init(ins, 16, 3)
	require.NoError(t, err)
	topo := NewTopologyFromMap(NewMap(placement.MarkAllAvailable(p)))
	c.peers["127.0.0.1:9004"] = &fakePeer{name: "node4"}
	s2, err := NewSession(Options{
		Topology: topo, ReadLevel: ReadMajority, WriteLevel: WriteMajority,
		HedgeAfter: 20 * time.Millisecond, RequestTimeout: 10 * time.Second, MaxBatch: 1000,
		Hints: HintOptions{Store: st}, Dial: c.dial,
	})
	require.NoError(t, err)
	t.Cleanup(func() { s2.Close() })
	waitfor.Condition(t, 10*time.Second, 10*time.Millisecond, "node1's hints dropped", func() error {
		if n := records(st, "node1"); n > 0 {
			return fmt.Errorf("%d records", n)
		}
		return nil
	})
}

// A hint that cannot be stored does not fail a write that met its level:
// it is counted, and the replica simply failed.
func TestHintWriteFailureIsCountedNotFatal(t *testing.T) {
	c := newFakeCluster(t)
	fs := vfs.NewFaulty(vfs.OS())
	st := openStore(t, t.TempDir(), hints.Options{FS: fs})
	sc := tally.NewTestScope("", nil)
	s := c.hintedSession(t, nil, st, HealthOptions{}, sc)
	c.peers["127.0.0.1:9001"].setFail(status.Error(codes.Unavailable, "down"))
	fs.Set(func(op vfs.Op, _ string, _ int) (bool, int) { return op == vfs.OpSync, 0 })
	require.NoError(t, s.WriteBatch(context.Background(), "default", samplesOf(5)))
	waitfor.Condition(t, 10*time.Second, 10*time.Millisecond, "hint failure counted", func() error {
		for _, ct := range sc.Snapshot().Counters() {
			if ct.Name() == "hint_errors" && ct.Value() > 0 {
				return nil
			}
		}
		return errors.New("no hint_errors")
	})
	// Two failing replicas: the level is missed, hints or not.
	c.peers["127.0.0.1:9002"].setFail(status.Error(codes.Unavailable, "down"))
	fs.Set(nil)
	require.Error(t, s.WriteBatch(context.Background(), "default", samplesOf(5)))
}

// A write returns at majority while its delivery to a slow replica is
// still running; when that delivery times out after the return, the
// samples are hinted all the same, and replayed.
func TestHintsDetachedDeliveryThatTimesOut(t *testing.T) {
	c := newFakeCluster(t)
	st := openStore(t, t.TempDir(), hints.Options{})
	s, err := NewSession(Options{
		Topology: NewTopologyFromMap(c.m), ReadLevel: ReadMajority, WriteLevel: WriteMajority,
		HedgeAfter: 20 * time.Millisecond, RequestTimeout: 300 * time.Millisecond, MaxBatch: 1000,
		Dial: c.dial, Hints: HintOptions{Store: st},
	})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	slow := c.peers["127.0.0.1:9001"]
	slow.setFrozen(true)
	in := samplesOf(10)
	require.NoError(t, s.WriteBatch(context.Background(), "default", in))
	waitfor.Condition(t, 10*time.Second, 10*time.Millisecond, "the late failure hinted", func() error {
		if records(st, "node1") == 0 {
			return errors.New("no hint yet")
		}
		return nil
	})
	slow.setFrozen(false)
	waitfor.Condition(t, 10*time.Second, 10*time.Millisecond, "node1 has the write", func() error { return slow.holds(in) })
}

// fillPeer is a fake node that supports fill-only writes, as *rpc.Client
// does: it keeps the value it holds at a series and timestamp.
type fillPeer struct {
	*fakePeer
	fills int
}

func (p *fillPeer) WriteBatchFill(ctx context.Context, ns string, samples []storage.Sample) (WriteResult, error) {
	if err := p.enter(ctx); err != nil {
		return WriteResult{}, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fills++
	held := map[string]bool{}
	for _, s := range p.written {
		held[fmt.Sprintf("%s@%d", s.ID, s.T)] = true
	}
	for _, s := range samples {
		if !held[fmt.Sprintf("%s@%d", s.ID, s.T)] {
			s.ID = append([]byte(nil), s.ID...)
			p.written = append(p.written, s)
		}
	}
	return WriteResult{Written: len(samples)}, nil
}

// Replays write fill-only where the peer can: a hint older than a value
// the target received since does not overwrite it.
func TestHintsReplayFillOnly(t *testing.T) {
	c := newFakeCluster(t)
	st := openStore(t, t.TempDir(), hints.Options{})
	q, err := st.Queue("node3")
	require.NoError(t, err)
	old := samplesOf(5)
	require.NoError(t, q.Append("default", old))
	target := &fillPeer{fakePeer: c.peers["127.0.0.1:9003"]}
	newer := append([]storage.Sample(nil), old[0])
	newer[0].V = 42
	_, err = target.fakePeer.WriteBatch(context.Background(), "default", newer)
	require.NoError(t, err)
	c.sessionWithNode3(t, st, target)
	waitfor.Condition(t, 10*time.Second, 10*time.Millisecond, "replayed", func() error {
		if records(st, "node3") > 0 {
			return errors.New("records left")
		}
		return target.holds(old[1:])
	})
	target.mu.Lock()
	defer target.mu.Unlock()
	require.Positive(t, target.fills)
	for _, w := range target.written {
		if string(w.ID) == string(old[0].ID) && w.T == old[0].T {
			require.Equal(t, 42.0, w.V, "the newer value was overwritten by the replay")
		}
	}
}

// The replay's pacing is a rate: a write's own duration counts towards
// its share of time, and idle time earns no burst.
func TestHintPaceDue(t *testing.T) {
	t0 := time.Unix(1000, 0)
	const rate = 1 << 20
	// 1 MiB at 1 MiB/s started at t0: the next may start at t0+1s, even
	// though the write itself took 400 ms (the old pacing slept a full
	// second after it, holding the replay to 1/1.4 of the rate).
	due := paceDue(time.Time{}, t0, rate, rate)
	require.Equal(t, t0.Add(time.Second), due)
	// The next write starts on time: due moves on by its share.
	require.Equal(t, t0.Add(1500*time.Millisecond), paceDue(due, due, rate/2, rate))
	// A write after a pause (backoff, an empty queue) starts its own
	// share from when it was sent.
	late := t0.Add(time.Minute)
	require.Equal(t, late.Add(time.Second), paceDue(due, late, rate, rate))
}
