package client

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/dbnode/rpc"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
	"github.com/tessera-tsdb/tessera/dbnode/storage/storagetest"
	"github.com/tessera-tsdb/tessera/ident"
	"github.com/tessera-tsdb/tessera/internal/waitfor"
	"github.com/tessera-tsdb/tessera/placement"
	"github.com/uber-go/tally/v4"
)

// fakePeer is an in-memory node: it keeps the samples written to it and
// answers FetchTagged with one (empty) series per stored ID of the asked
// shards. frozen makes every call, Health included, block until its
// context ends, as a SIGSTOPped process does.
type fakePeer struct {
	name string

	mu      sync.Mutex
	frozen  bool
	fail    error
	written []storage.Sample
	inCall  int
}

func (p *fakePeer) setFrozen(v bool) {
	p.mu.Lock()
	p.frozen = v
	p.mu.Unlock()
}

func (p *fakePeer) enter(ctx context.Context) error {
	p.mu.Lock()
	frozen, fail := p.frozen, p.fail
	p.inCall++
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.inCall--
		p.mu.Unlock()
	}()
	if frozen {
		<-ctx.Done()
		return ctx.Err()
	}
	return fail
}

func (p *fakePeer) WriteBatch(ctx context.Context, ns string, samples []storage.Sample) (WriteResult, error) {
	if err := p.enter(ctx); err != nil {
		return WriteResult{}, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range samples {
		s.ID = append([]byte(nil), s.ID...)
		p.written = append(p.written, s)
	}
	return WriteResult{Written: len(samples)}, nil
}

func (p *fakePeer) FetchTagged(ctx context.Context, req *rpc.FetchTaggedRequest) (*rpc.FetchResponse, error) {
	if err := p.enter(ctx); err != nil {
		return nil, err
	}
	asked := map[uint32]bool{}
	for _, sh := range req.Shards {
		asked[sh] = true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	seen := map[string]bool{}
	resp := &rpc.FetchResponse{}
	for _, s := range p.written {
		if asked[s.Shard] && !seen[string(s.ID)] {
			seen[string(s.ID)] = true
			resp.Series = append(resp.Series, rpc.FetchedSeries{ID: s.ID, Shard: s.Shard})
		}
	}
	return resp, nil
}

func (p *fakePeer) Health(ctx context.Context) (*rpc.HealthResponse, error) {
	if err := p.enter(ctx); err != nil {
		return nil, err
	}
	return &rpc.HealthResponse{NodeID: p.name, Ready: true}, nil
}

func (p *fakePeer) Close() error { return nil }

func (p *fakePeer) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.written)
}

// fakeCluster is three fake nodes at RF 3 over 16 shards.
type fakeCluster struct {
	peers map[string]*fakePeer // by endpoint
	m     *Map
}

func newFakeCluster(t testing.TB) *fakeCluster {
	var ins []placement.Instance
	c := &fakeCluster{peers: map[string]*fakePeer{}}
	for i := 1; i <= 3; i++ {
		id := "node" + strconv.Itoa(i)
		ep := "127.0.0.1:900" + strconv.Itoa(i)
		ins = append(ins, placement.Instance{ID: id, IsolationGroup: "rack" + strconv.Itoa(i), Zone: "z", Weight: 1, Endpoint: ep})
		c.peers[ep] = &fakePeer{name: id}
	}
	p, err := placement.Init(ins, 16, 3)
	require.NoError(t, err)
	c.m = NewMap(placement.MarkAllAvailable(p))
	return c
}

func (c *fakeCluster) dial(ep string) (Peer, error) {
	if p := c.peers[ep]; p != nil {
		return p, nil
	}
	return nil, fmt.Errorf("no fake node at %s", ep)
}

func (c *fakeCluster) session(t *testing.T, read ReadLevel, write WriteLevel, health HealthOptions) *Session {
	s, err := NewSession(Options{
		Topology: NewTopologyFromMap(c.m), ReadLevel: read, WriteLevel: write, Pairing: true,
		HedgeAfter: 20 * time.Millisecond, RequestTimeout: 30 * time.Second, MaxBatch: 1000,
		Health: health, Dial: c.dial,
	})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

func samplesOf(n int) []storage.Sample {
	out := make([]storage.Sample, 0, 2*n)
	for i := 0; i < n; i++ {
		id := ident.FromLabels(labels.FromStrings("__name__", "m", "i", strconv.Itoa(i)))
		for j := 0; j < 2; j++ {
			out = append(out, storage.Sample{ID: id, Shard: ident.Shard(id, 16), T: int64(1000 + j), V: float64(i)})
		}
	}
	return out
}

var everything = []*labels.Matcher{labels.MustNewMatcher(labels.MatchRegexp, "__name__", ".+")}

func TestSessionWritesEveryReplicaAndReads(t *testing.T) {
	c := newFakeCluster(t)
	s := c.session(t, ReadMajority, WriteMajority, HealthOptions{})
	in := samplesOf(50)
	require.NoError(t, s.WriteBatch(context.Background(), "default", in))
	for _, p := range c.peers {
		waitfor.Condition(t, 10*time.Second, 5*time.Millisecond, p.name+" written", func() error {
			if n := p.count(); n != len(in) {
				return fmt.Errorf("%d of %d samples", n, len(in))
			}
			return nil
		})
	}
	out, err := s.Query(context.Background(), "default", everything, 0, 2000)
	require.NoError(t, err)
	require.Len(t, out, 50)
}

func TestSessionRejectsBadInput(t *testing.T) {
	c := newFakeCluster(t)
	s := c.session(t, ReadMajority, WriteMajority, HealthOptions{})
	err := s.WriteBatch(context.Background(), "default", []storage.Sample{{ID: []byte("x"), Shard: 99}})
	require.ErrorContains(t, err, "shard 99")
	_, err = NewSession(Options{Topology: NewTopologyFromMap(c.m), ReadLevel: ReadOne, WriteLevel: WriteOne, HedgeAfter: time.Second, MaxBatch: 1})
	require.ErrorContains(t, err, "RequestTimeout")
	_, err = NewSession(Options{Topology: NewTopologyFromMap(c.m), ReadLevel: ReadOne, HedgeAfter: time.Second, RequestTimeout: time.Second, MaxBatch: 1})
	require.ErrorContains(t, err, "WriteLevel")
}

func TestSessionErrorNamesFailedReplica(t *testing.T) {
	c := newFakeCluster(t)
	c.peers["127.0.0.1:9003"].fail = errors.New("disk full")
	s := c.session(t, ReadAll, WriteAll, HealthOptions{})
	err := s.WriteBatch(context.Background(), "default", samplesOf(5))
	require.ErrorContains(t, err, "write consistency all not met")
	require.ErrorContains(t, err, "node3 (127.0.0.1:9003): disk full")
	_, err = s.Query(context.Background(), "default", everything, 0, 2000)
	require.ErrorContains(t, err, "read consistency all not met")
	require.ErrorContains(t, err, "node3 (127.0.0.1:9003): disk full")
}

// TestSessionFrozenReplica: one of three replicas freezes. Reads at
// unstrict_majority and majority and writes at majority keep succeeding
// through the hedge; once health probes mark it down, level all fails
// fast, naming it, and a call already waiting on it is cancelled.
func TestSessionFrozenReplica(t *testing.T) {
	c := newFakeCluster(t)
	health := HealthOptions{Interval: 20 * time.Millisecond, Timeout: 50 * time.Millisecond, Failures: 2}
	all := c.session(t, ReadAll, WriteAll, health)
	require.NoError(t, all.WriteBatch(context.Background(), "default", samplesOf(20)))
	frozen := c.peers["127.0.0.1:9001"]
	frozen.setFrozen(true)

	for _, level := range []ReadLevel{ReadOne, ReadUnstrictMajority, ReadMajority} {
		s := c.session(t, level, WriteMajority, health)
		out, err := s.Query(context.Background(), "default", everything, 0, 2000)
		require.NoError(t, err, level.String())
		require.Len(t, out, 20)
		require.NoError(t, s.WriteBatch(context.Background(), "default", samplesOf(3)))
		// Close delivers the writes still on their way; the one to the
		// frozen replica ends when the probes mark it down.
		require.NoError(t, s.Close())
	}

	// A read at all asks the frozen replica and waits, until the probes
	// mark it down and cancel the call (well before the 30 s timeout).
	start := time.Now()
	_, err := all.Query(context.Background(), "default", everything, 0, 2000)
	require.ErrorContains(t, err, "node1 (127.0.0.1:9001): not answering health checks since")
	require.Less(t, time.Since(start), 15*time.Second)
	// Now it is known down: calls fail at once.
	start = time.Now()
	err = all.WriteBatch(context.Background(), "default", samplesOf(1))
	require.ErrorContains(t, err, "node1 (127.0.0.1:9001): not answering health checks since")
	_, err = all.Query(context.Background(), "default", everything, 0, 2000)
	require.ErrorContains(t, err, "not answering health checks")
	require.Less(t, time.Since(start), 15*time.Second)
	frozen.mu.Lock()
	inCall := frozen.inCall
	frozen.mu.Unlock()
	require.LessOrEqual(t, inCall, 1, "at most the current probe waits on the frozen node")

	// It comes back: the first successful probe marks it up.
	frozen.setFrozen(false)
	waitfor.Condition(t, 15*time.Second, 10*time.Millisecond, "reads at all succeed again", func() error {
		_, err := all.Query(context.Background(), "default", everything, 0, 2000)
		return err
	})
}

func TestHealthRecord(t *testing.T) {
	h := newHealth("n", "e:1")
	t0 := time.Unix(1000, 0)
	down, up := h.record(errors.New("slow"), t0, 3)
	require.False(t, down || up)
	require.NoError(t, h.Down())
	h.record(nil, t0.Add(time.Second), 3) // a success resets the streak
	h.record(errors.New("a"), t0.Add(2*time.Second), 3)
	h.record(errors.New("b"), t0.Add(3*time.Second), 3)
	ctx, cancel, err := h.guard(context.Background())
	require.NoError(t, err)
	defer cancel()
	down, _ = h.record(errors.New("c"), t0.Add(4*time.Second), 3)
	require.True(t, down)
	var de *HostDownError
	require.ErrorAs(t, h.Down(), &de)
	require.Equal(t, t0.Add(2*time.Second), de.Since, "down since the first failure of the streak")
	<-ctx.Done() // the call in flight is cancelled
	require.ErrorAs(t, callErr(ctx, ctx.Err()), &de)
	_, _, err = h.guard(context.Background())
	require.ErrorAs(t, err, &de)
	_, up = h.record(nil, t0.Add(5*time.Second), 3)
	require.True(t, up)
	_, cancel2, err := h.guard(context.Background())
	require.NoError(t, err)
	cancel2()
}

// fakeLocal is this node's storage: it hands every sample a ref, as
// storage.Database.WriteBatch does.
type fakeLocal struct {
	mu   sync.Mutex
	refs map[string]storage.SeriesRef
}

func (l *fakeLocal) WriteBatch(_ string, samples []storage.Sample) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range samples {
		r := l.refs[string(samples[i].ID)]
		if r == 0 {
			// a ref of no series: storage would tell it stale
			r = storage.SeriesRef(uint64(len(l.refs)+1)<<32 | uint64(len(l.refs)+1))
			l.refs[string(samples[i].ID)] = r
		}
		samples[i].Ref = r
	}
	return nil
}

func (l *fakeLocal) Query(context.Context, string, []*labels.Matcher, int64, int64, storage.QueryOptions) ([]storage.SeriesIterator, error) {
	return nil, nil
}

// A coordinator that owns every shard itself hands the local write's refs
// back to its caller (the HTTP series cache), as a single node does, so
// the next write of a series skips the shard's series lookup.
func TestSessionHandsLocalRefsBack(t *testing.T) {
	c := newFakeCluster(t)
	local := &fakeLocal{refs: map[string]storage.SeriesRef{}}
	s, err := NewSession(Options{
		LocalID: "node1", Local: local,
		Topology: NewTopologyFromMap(c.m), ReadLevel: ReadMajority, WriteLevel: WriteAll, Pairing: true,
		HedgeAfter: 20 * time.Millisecond, RequestTimeout: 30 * time.Second, MaxBatch: 1000, Dial: c.dial,
	})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	in := samplesOf(20)
	require.NoError(t, s.WriteBatch(context.Background(), "default", in))
	for i, smp := range in {
		require.NotZero(t, smp.Ref, "sample %d has no ref after a write at all", i)
		require.Equal(t, local.refs[string(smp.ID)], smp.Ref, "sample %d", i)
	}
	require.Zero(t, c.peers["127.0.0.1:9001"].count(), "the local node was written over RPC")
}

// A write waits for, and can fail on, only the replicas of the shards it
// writes: with six nodes, three failing nodes that own none of the
// batch's shards neither fail a majority write nor receive anything.
func TestSessionWriteAsksOnlyOwnersOfItsShards(t *testing.T) {
	var ins []placement.Instance
	peers := map[string]*fakePeer{}
	for i := 1; i <= 6; i++ {
		id := "node" + strconv.Itoa(i)
		ep := "127.0.0.1:90" + strconv.Itoa(10+i)
		ins = append(ins, placement.Instance{ID: id, IsolationGroup: "rack" + strconv.Itoa((i-1)%3), Zone: "z", Weight: 1, Endpoint: ep})
		peers[ep] = &fakePeer{name: id}
	}
	p, err := placement.Init(ins, 16, 3)
	require.NoError(t, err)
	m := NewMap(placement.MarkAllAvailable(p))

	in := samplesOf(1)
	owners := map[string]bool{}
	for _, o := range m.Owners.Owners(in[0].Shard) {
		owners[o.InstanceID] = true
	}
	var others []string
	for ep, fp := range peers {
		if !owners[fp.name] {
			fp.fail = errors.New("disk on fire")
			others = append(others, ep)
		}
	}
	// The premise: some shard's majority is among the failing nodes, so a
	// write that waited on every group would fail.
	premise := false
	for sh := uint32(0); sh < 16 && !premise; sh++ {
		n := 0
		for _, o := range m.Owners.Owners(sh) {
			if !owners[o.InstanceID] {
				n++
			}
		}
		premise = n >= 2
	}
	require.True(t, premise, "placement has no shard mostly on the failing nodes")

	s, err := NewSession(Options{
		Topology: NewTopologyFromMap(m), ReadLevel: ReadMajority, WriteLevel: WriteMajority, Pairing: true,
		HedgeAfter: 20 * time.Millisecond, RequestTimeout: 30 * time.Second, MaxBatch: 1000,
		Dial: func(ep string) (Peer, error) { return peers[ep], nil },
	})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	require.NoError(t, s.WriteBatch(context.Background(), "default", in))
	for _, ep := range others {
		require.Zero(t, peers[ep].count(), "%s owns none of the batch's shards but was written", peers[ep].name)
	}
}

// distribute gives each host exactly the samples of its shards, in batch
// order, with IDs copied out of the caller's buffers; remote hosts that
// get every sample share one slice, the local host never shares (its
// write sets refs).
func TestDistribute(t *testing.T) {
	check := func(t *testing.T, m *Map, local string, in []storage.Sample) [][]storage.Sample {
		t.Helper()
		r := newRouting(m, local)
		li := -1
		if hi, ok := r.hostIdx[local]; ok {
			li = hi
		}
		perHost, chunk, err := distribute(r, in, li, make([]bool, len(r.groups)))
		require.NoError(t, err)
		require.Nil(t, chunk, "samples without refs are not worth encoding once")
		for hi, inst := range r.hosts {
			var want []storage.Sample
			for _, s := range in {
				for _, o := range m.Owners.Owners(s.Shard) {
					if o.InstanceID == inst {
						want = append(want, s)
					}
				}
			}
			require.Equal(t, want, perHost[hi], inst)
			for _, s := range perHost[hi] {
				require.NotSame(t, &in[0].ID[0], &s.ID[0], "IDs must not alias the caller's")
			}
		}
		return perHost
	}

	c := newFakeCluster(t) // RF 3 on three nodes: everyone gets everything
	in := samplesOf(5)
	perHost := check(t, c.m, "node1", in)
	r := newRouting(c.m, "node1")
	l, a, b := perHost[r.hostIdx["node1"]], perHost[r.hostIdx["node2"]], perHost[r.hostIdx["node3"]]
	require.Same(t, &a[0], &b[0], "remote hosts share the full batch")
	require.NotSame(t, &l[0], &a[0], "the local host has its own copy")
	require.Same(t, &a[0].ID[0], &a[1].ID[0], "one ID copy per run of a series")

	// Six nodes: each host gets some samples.
	var ins []placement.Instance
	for i := 1; i <= 6; i++ {
		ins = append(ins, placement.Instance{ID: "node" + strconv.Itoa(i), IsolationGroup: "rack" + strconv.Itoa((i-1)%3), Zone: "z", Weight: 1, Endpoint: "127.0.0.1:90" + strconv.Itoa(10+i)})
	}
	p, err := placement.Init(ins, 16, 3)
	require.NoError(t, err)
	check(t, NewMap(placement.MarkAllAvailable(p)), "node1", samplesOf(40))
	check(t, NewMap(placement.MarkAllAvailable(p)), "nobody", samplesOf(40))

	// A sample with a storage ref takes the series' own ID, no copy.
	db := storagetest.Open(t, c.m.Placement.NumShards, nil)
	refd := samplesOf(3)
	for i := range refd {
		refd[i].T = time.Now().Add(-time.Minute).UnixMilli() + int64(i)
	}
	require.NoError(t, db.WriteBatch(storagetest.Namespace().Name, refd))
	refd[0].ID = append([]byte(nil), refd[0].ID...) // the caller's bytes
	perHost, chunk, err := distribute(newRouting(c.m, "node1"), refd, r.hostIdx["node1"], make([]bool, len(r.groups)))
	require.NoError(t, err)
	refID := func(ref storage.SeriesRef) []byte {
		id := storage.SeriesID(ref)
		require.NotNil(t, id)
		return id
	}
	require.Same(t, &refID(refd[0].Ref)[0], &perHost[r.hostIdx["node1"]][0].ID[0])
	// The remote hosts, which get every sample, get them encoded once
	// and no slice; the encoding gives the batch back, IDs the series'.
	require.NotNil(t, chunk)
	require.Nil(t, perHost[r.hostIdx["node2"]])
	require.Nil(t, perHost[r.hostIdx["node3"]])
	back := chunk.AppendSamples(nil)
	require.Len(t, back, len(refd))
	for i := range refd {
		require.Same(t, &refID(refd[i].Ref)[0], &back[i].ID[0])
		require.Equal(t, refd[i].Shard, back[i].Shard)
		require.Equal(t, refd[i].T, back[i].T)
		require.Equal(t, refd[i].V, back[i].V)
		require.Equal(t, refd[i].Ref, back[i].Ref)
	}
}

// TestSessionCountsReadBytes: a read at majority (no hedge within the
// test) receives every series from exactly two replicas, and counts their
// bytes (the fake replicas answer IDs without samples).
func TestSessionCountsReadBytes(t *testing.T) {
	c := newFakeCluster(t)
	sc := tally.NewTestScope("", nil)
	s, err := NewSession(Options{
		Topology: NewTopologyFromMap(c.m), ReadLevel: ReadMajority, WriteLevel: WriteAll, Pairing: true,
		HedgeAfter: time.Minute, RequestTimeout: 30 * time.Second, MaxBatch: 1000, Dial: c.dial, Metrics: sc,
	})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	in := samplesOf(50)
	require.NoError(t, s.WriteBatch(context.Background(), "default", in))
	_, err = s.Query(context.Background(), "default", everything, 0, 2000)
	require.NoError(t, err)
	var ids int64
	for i := 0; i < len(in); i += 2 {
		ids += int64(len(in[i].ID))
	}
	var got int64
	for _, ct := range sc.Snapshot().Counters() {
		if ct.Name() == "read_received_bytes" {
			got = ct.Value()
		}
	}
	require.Equal(t, 2*ids, got, "two replicas' IDs")
}
