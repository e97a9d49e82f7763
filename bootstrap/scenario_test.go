package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/client"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
	"github.com/tessera-tsdb/tessera/dbnode/storage/storagetest"
	"github.com/tessera-tsdb/tessera/ident"
	"github.com/tessera-tsdb/tessera/placement"
	"github.com/uber-go/tally/v4"
)

const (
	numShards = 4
	self      = "me"
	ns        = "default"
)

var (
	now    = time.Date(2024, 1, 1, 12, 0, 0, 0, time.UTC)
	nowMs  = now.UnixMilli()
	blockA = nowMs - (6 * time.Hour).Milliseconds() // flushed blocks (2h, aligned)
	blockB = nowMs - (4 * time.Hour).Milliseconds()
	memT   = nowMs - (90 * time.Minute).Milliseconds() // unflushed samples from here
)

// harness is one bootstrapping node: a real storage engine, a fake
// placement store, and fake peers by endpoint.
type harness struct {
	t     *testing.T
	db    *storage.Database
	store *fakeStore
	peers map[string]*fakePeer
	dials atomic.Int64
	scope tally.TestScope
	b     *Bootstrapper
}

func newHarness(t *testing.T, p placement.Placement, peers map[string]*fakePeer) *harness {
	t.Helper()
	h := &harness{t: t, db: storagetest.Open(t, numShards, func() time.Time { return now }),
		store: &fakeStore{p: p}, peers: peers, scope: tally.NewTestScope("", nil)}
	b, err := New(Options{
		InstanceID: self, DB: h.db, Store: h.store,
		Dial: func(ep string) (Peer, error) {
			h.dials.Add(1)
			if fp, ok := h.peers[ep]; ok {
				return fp, nil
			}
			return nil, fmt.Errorf("no fake peer at %s", ep)
		},
		Workers: 2, ShardsPerFetch: 64,
		MarkAvailableAttempts: 4, MarkAvailableBackoff: time.Millisecond,
		Metrics: h.scope,
	})
	require.NoError(t, err)
	h.b = b
	return h
}

// reconcile runs one round on the store's current placement.
func (h *harness) reconcile() error {
	h.t.Helper()
	p, err := h.store.Placement(context.Background())
	require.NoError(h.t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return h.b.Reconcile(ctx, client.NewMap(p))
}

func (h *harness) counter(name string) int64 {
	if c, ok := h.scope.Snapshot().Counters()[name+"+"]; ok {
		return c.Value()
	}
	return 0
}

// mkPlacement gives self the shards INITIALIZING (nothing to stream from a
// LEAVING copy) and every peer all shards AVAILABLE at endpoint "ep-"+id.
func mkPlacement(shards []uint32, peers ...string) placement.Placement {
	p := placement.Placement{NumShards: numShards, ReplicaFactor: 1 + len(peers), IsSharded: true, Version: 1}
	me := placement.Instance{ID: self, IsolationGroup: "g0", Weight: 1, Endpoint: "ep-" + self}
	for _, s := range shards {
		me.Shards = append(me.Shards, placement.Shard{ID: s, State: placement.Initializing})
	}
	p.Instances = append(p.Instances, me)
	for i, id := range peers {
		in := placement.Instance{ID: id, IsolationGroup: fmt.Sprintf("g%d", i+1), Weight: 1, Endpoint: "ep-" + id}
		for s := uint32(0); s < numShards; s++ {
			in.Shards = append(in.Shards, placement.Shard{ID: s, State: placement.Available})
		}
		p.Instances = append(p.Instances, in)
	}
	return p
}

// ids returns n series IDs that hash into shard.
func ids(shard uint32, n int) []string {
	var out []string
	for k := 0; len(out) < n; k++ {
		id := ident.FromLabels(labels.FromStrings("__name__", "cpu", "host", fmt.Sprintf("h%d", k)))
		if ident.Shard(id, numShards) == shard {
			out = append(out, string(id))
		}
	}
	return out
}

// run returns n samples every 10s from t0, values from seed.
func run(t0 int64, n int, seed float64) []sample {
	out := make([]sample, n)
	for i := range out {
		out[i] = sample{t: t0 + int64(i)*10_000, v: seed + float64(i)}
	}
	return out
}

// readAll reads a series back from the node over every block.
func (h *harness) readAll(id string) []sample {
	h.t.Helper()
	it, err := h.db.Read(ns, []byte(id), blockA-1, nowMs+1)
	require.NoError(h.t, err)
	var out []sample
	for it.Next() {
		t, v := it.At()
		out = append(out, sample{t, v})
	}
	require.NoError(h.t, it.Err())
	return out
}

// requireBlockAsPeer checks the node stored a block byte for byte as the
// peer serves it.
func (h *harness) requireBlockAsPeer(p *fakePeer, shard uint32, start int64) {
	h.t.Helper()
	got, more, err := h.db.ReadBlock(ns, shard, start, nil, 1<<30)
	require.NoError(h.t, err)
	require.False(h.t, more)
	want := p.blocks[blockKey{shard, start}]
	require.Len(h.t, got, len(want))
	for i := range want {
		require.Equal(h.t, want[i].ID, got[i].ID)
		require.Equal(h.t, want[i].Data, got[i].Data, "sealed payload of %s", want[i].ID)
		require.Equal(h.t, int(want[i].Samples), got[i].Samples)
	}
}

// fullPeer is a peer holding, for shards 0 and 1, two flushed blocks of
// three series and three unflushed series.
func fullPeer(t *testing.T) (*fakePeer, map[string][]sample) {
	p := newFakePeer()
	want := map[string][]sample{}
	for _, sh := range []uint32{0, 1} {
		a, b, m := map[string][]sample{}, map[string][]sample{}, map[string][]sample{}
		for i, id := range ids(sh, 3) {
			a[id] = run(blockA+1000, 50, float64(i))
			b[id] = run(blockB, 40, float64(100*i))
			m[id] = run(memT, 30, 0.5+float64(i))
			want[id] = slices.Concat(a[id], b[id], m[id])
		}
		p.addBlock(t, sh, blockA, a)
		p.addBlock(t, sh, blockB, b)
		p.addUnflushed(t, sh, m)
	}
	return p, want
}

func (h *harness) requireData(want map[string][]sample) {
	h.t.Helper()
	for id, ss := range want {
		require.Equal(h.t, ss, h.readAll(id), "series %s", id)
	}
}

func (h *harness) requireMarked(shards ...uint32) {
	h.t.Helper()
	for _, sh := range shards {
		st, ok := h.store.state(self, sh)
		require.True(h.t, ok, "shard %d", sh)
		require.Equal(h.t, placement.Available, st, "shard %d", sh)
		require.Equal(h.t, Done, h.b.State(sh), "shard %d", sh)
	}
}

// (a) Replicas whose digests agree are read once per block, and the block
// lands byte for byte.
func TestDigestsAgreeReadOnePeerPerBlock(t *testing.T) {
	p1, want := fullPeer(t)
	p2, _ := fullPeer(t)
	h := newHarness(t, mkPlacement([]uint32{0, 1}, "p1", "p2"), map[string]*fakePeer{"ep-p1": p1, "ep-p2": p2})
	require.NoError(t, h.reconcile())
	for _, sh := range []uint32{0, 1} {
		for _, start := range []int64{blockA, blockB} {
			// pageSeries 1, three series: one peer pages it whole, the
			// other is never asked.
			require.Equal(t, 3, p1.pagesOf(sh, start)+p2.pagesOf(sh, start), "block %d of shard %d", start, sh)
			require.True(t, p1.pagesOf(sh, start) == 0 || p2.pagesOf(sh, start) == 0, "both peers read for block %d of shard %d", start, sh)
			h.requireBlockAsPeer(p1, sh, start)
		}
	}
	h.requireData(want)
	h.requireMarked(0, 1)
	require.Equal(t, [][]uint32{{0, 1}}, h.store.markCalls())
	require.Equal(t, int64(2), h.counter("shards_bootstrapped"))
}

// (b) Digests differ: each distinct copy is read and merged; the union
// lands.
func TestDigestsDifferEachCopyReadAndMerged(t *testing.T) {
	const sh = 2
	id := ids(sh, 2)
	p1, p2 := newFakePeer(), newFakePeer()
	// p1 missed the end of series 0; p2 missed its start and all of series 1.
	p1.addBlock(t, sh, blockA, map[string][]sample{id[0]: run(blockA, 20, 0), id[1]: run(blockA, 10, 7)})
	p2.addBlock(t, sh, blockA, map[string][]sample{id[0]: run(blockA+100_000, 20, 10)})
	h := newHarness(t, mkPlacement([]uint32{sh}, "p1", "p2"), map[string]*fakePeer{"ep-p1": p1, "ep-p2": p2})
	require.NoError(t, h.reconcile())

	require.Equal(t, 2, p1.pagesOf(sh, blockA))
	require.Equal(t, 1, p2.pagesOf(sh, blockA))
	// Series 0: samples 0..9 from p1 only, 10..19 on both (same values),
	// 20..29 from p2 only.
	require.Equal(t, run(blockA, 30, 0), h.readAll(id[0]))
	require.Equal(t, run(blockA, 10, 7), h.readAll(id[1]))
	h.requireMarked(sh)
}

// (c) A peer dies in the middle of a block or of the unflushed data: the
// round fails and the shard goes back to pending; the next round (the
// peer back, or another peer) completes it, nothing lost or duplicated.
func TestPeerDiesMidPage(t *testing.T) {
	for _, tc := range []struct {
		name     string
		dieAfter int  // pages served before dying
		failover bool // round 2 streams from a second peer, p1 stays dead
	}{
		// Metadata then FetchBlock: page 1 of shard 0's first block, then dead.
		{name: "in a block, peer comes back", dieAfter: 1},
		{name: "in a block, another peer", dieAfter: 1, failover: true},
		// 4 blocks x 3 pages + 1 unflushed page, then dead: some unflushed
		// samples are loaded already when it dies.
		{name: "in unflushed data, peer comes back", dieAfter: 13},
		{name: "in unflushed data, another peer", dieAfter: 13, failover: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p1, want := fullPeer(t)
			p1.dieAfterPages = tc.dieAfter
			p2, _ := fullPeer(t)
			h := newHarness(t, mkPlacement([]uint32{0, 1}, "p1"), map[string]*fakePeer{"ep-p1": p1, "ep-p2": p2})
			// Both shards in one fetch so they share the failure.
			err := h.reconcile()
			require.ErrorIs(t, err, errPeerDown)
			require.ErrorContains(t, err, "peer p1")
			require.Equal(t, Pending, h.b.State(0))
			require.Equal(t, Pending, h.b.State(1))
			require.Empty(t, h.store.markCalls())
			require.Equal(t, int64(2), h.counter("shard_failures"))
			st, _ := h.store.state(self, 0)
			require.Equal(t, placement.Initializing, st)

			if tc.failover {
				h.store.mu.Lock()
				h.store.p = mkPlacement([]uint32{0, 1}, "p1", "p2")
				h.store.mu.Unlock()
			} else {
				p1.revive()
			}
			require.NoError(t, h.reconcile())
			h.requireData(want)
			for _, sh := range []uint32{0, 1} {
				h.requireBlockAsPeer(p1, sh, blockA)
				h.requireBlockAsPeer(p1, sh, blockB)
			}
			h.requireMarked(0, 1)
			if tc.failover {
				require.NotZero(t, p2.pagesOf(0, blockA))
			}
		})
	}
}

// (d) The mark-available CAS is lost once: it is retried without streaming
// anything again.
func TestMarkAvailableCASLostIsRetriedWithoutRestreaming(t *testing.T) {
	p1, want := fullPeer(t)
	h := newHarness(t, mkPlacement([]uint32{0, 1}, "p1"), map[string]*fakePeer{"ep-p1": p1})
	h.store.failures = []error{fmt.Errorf("%w: placement changed concurrently on every attempt", placement.ErrCASConflict)}
	require.NoError(t, h.reconcile())

	require.Equal(t, [][]uint32{{0, 1}, {0, 1}}, h.store.markCalls())
	require.Equal(t, 3, p1.pagesOf(0, blockA), "block re-streamed")
	require.Equal(t, 1, p1.metadataReqs)
	require.Equal(t, 6, p1.unflushedReqs, "unflushed data re-streamed") // 3 pages per shard
	require.Equal(t, int64(1), h.counter("mark_available_retries"))
	h.requireMarked(0, 1)
	h.requireData(want)
}

// The placement changes under the CAS: one shard moved away (the CAS as
// asked is refused) and is dropped from the retry; the rest is marked.
func TestMarkAvailableDropsShardsThatMovedAway(t *testing.T) {
	p1, _ := fullPeer(t)
	h := newHarness(t, mkPlacement([]uint32{0, 1}, "p1"), map[string]*fakePeer{"ep-p1": p1})
	h.store.beforeMark = func(call int, p *placement.Placement) {
		if call == 1 { // an operator moved shard 1 off this node meanwhile
			next := mkPlacement([]uint32{0}, "p1")
			next.Version = p.Version + 1
			*p = next
		}
	}
	require.NoError(t, h.reconcile())
	require.Equal(t, [][]uint32{{0, 1}, {0}}, h.store.markCalls())
	h.requireMarked(0)
	require.Equal(t, Absent, h.b.State(1))
}

// The CAS went through but its reply was lost: the re-read placement shows
// the shards AVAILABLE, they are done without another CAS.
func TestMarkAvailableReplyLost(t *testing.T) {
	p1, _ := fullPeer(t)
	h := newHarness(t, mkPlacement([]uint32{0, 1}, "p1"), map[string]*fakePeer{"ep-p1": p1})
	h.store.failures = []error{context.DeadlineExceeded}
	h.store.applyAnd = true
	require.NoError(t, h.reconcile())
	require.Len(t, h.store.markCalls(), 1)
	h.requireMarked(0, 1)
}

// A CAS failing on every attempt sends the shards back to pending with
// the error; the next round streams and marks them.
func TestMarkAvailableGivesUpAfterAttempts(t *testing.T) {
	p1, want := fullPeer(t)
	h := newHarness(t, mkPlacement([]uint32{0, 1}, "p1"), map[string]*fakePeer{"ep-p1": p1})
	for range 4 {
		h.store.failures = append(h.store.failures, placement.ErrCASConflict)
	}
	err := h.reconcile()
	require.ErrorIs(t, err, placement.ErrCASConflict)
	require.ErrorContains(t, err, "after 4 attempts")
	require.Len(t, h.store.markCalls(), 4)
	require.Equal(t, Pending, h.b.State(0))
	require.NoError(t, h.reconcile())
	h.requireMarked(0, 1)
	h.requireData(want)
}

// (e) No peers (a brand-new cluster): the shards are marked available at
// once, nobody is dialled.
func TestNoPeersMarksAvailableAtOnce(t *testing.T) {
	h := newHarness(t, mkPlacement([]uint32{0, 1, 2, 3}), nil)
	require.NoError(t, h.reconcile())
	require.Equal(t, [][]uint32{{0, 1, 2, 3}}, h.store.markCalls())
	require.Zero(t, h.dials.Load())
	h.requireMarked(0, 1, 2, 3)
	pr := h.b.Progress()
	require.Equal(t, Progress{ShardsTotal: 4, ShardsDone: 4, RoundShards: 4, RoundStreamed: 4},
		Progress{ShardsTotal: pr.ShardsTotal, ShardsDone: pr.ShardsDone, Running: pr.Running,
			RoundShards: pr.RoundShards, RoundStreamed: pr.RoundStreamed, Samples: pr.Samples, Bytes: pr.Bytes, ETA: pr.ETA})

	// The watch shows the CAS: the shards are settled and forgotten.
	require.NoError(t, h.reconcile())
	require.Len(t, h.store.markCalls(), 1)
	require.Equal(t, Absent, h.b.State(0))
}

// (f) An illegal transition returns an error, is counted, and leaves the
// state alone; the node does not panic.
func TestIllegalTransitionReturnsError(t *testing.T) {
	h := newHarness(t, mkPlacement([]uint32{0}), nil)
	err := h.b.set(0, Done)
	require.ErrorIs(t, err, ErrIllegalTransition)
	require.ErrorContains(t, err, "shard 0")
	require.ErrorContains(t, err, "absent -> done")
	require.Equal(t, Absent, h.b.State(0))

	require.NoError(t, h.b.set(0, Pending))
	moved, err := h.b.setAll([]uint32{0}, Bootstrapped)
	require.ErrorIs(t, err, ErrIllegalTransition)
	require.Empty(t, moved)
	require.Equal(t, Pending, h.b.State(0))
	require.Equal(t, int64(2), h.counter("illegal_transitions"))

	// The round that follows still bootstraps the shard.
	require.NoError(t, h.reconcile())
	h.requireMarked(0)
}

// Every transition in the whitelist names its event, and none leaves a
// state for itself.
func TestTransitionsNameTheirEvent(t *testing.T) {
	for k, ev := range transitions {
		require.NotEqual(t, k[0], k[1])
		require.NotEmpty(t, ev, "%v -> %v", k[0], k[1])
	}
}

func TestNewNamesMissingOptions(t *testing.T) {
	ok := Options{InstanceID: "a", DB: storagetest.Open(t, 1, nil), Store: &fakeStore{},
		Dial:    func(string) (Peer, error) { return nil, errors.New("x") },
		Workers: 1, ShardsPerFetch: 1, MarkAvailableAttempts: 1, MarkAvailableBackoff: time.Millisecond}
	_, err := New(ok)
	require.NoError(t, err)
	for _, tc := range []struct {
		want string
		mod  func(*Options)
	}{
		{"InstanceID", func(o *Options) { o.InstanceID = "" }},
		{"DB", func(o *Options) { o.DB = nil }},
		{"Store", func(o *Options) { o.Store = nil }},
		{"Dial", func(o *Options) { o.Dial = nil }},
		{"Workers", func(o *Options) { o.Workers = 0 }},
		{"ShardsPerFetch", func(o *Options) { o.ShardsPerFetch = -1 }},
		{"MaxBytesPerSecond", func(o *Options) { o.MaxBytesPerSecond = -1 }},
		{"MarkAvailableAttempts", func(o *Options) { o.MarkAvailableAttempts = 0 }},
		{"MarkAvailableBackoff", func(o *Options) { o.MarkAvailableBackoff = 0 }},
	} {
		o := ok
		tc.mod(&o)
		_, err := New(o)
		require.ErrorContains(t, err, tc.want)
	}
}
