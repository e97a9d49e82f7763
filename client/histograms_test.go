package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/client/hints"
	"github.com/tessera-tsdb/tessera/dbnode/httpapi"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
	"github.com/tessera-tsdb/tessera/dbnode/storage/storagetest"
	"github.com/tessera-tsdb/tessera/ident"
	"github.com/tessera-tsdb/tessera/internal/waitfor"
	"github.com/tessera-tsdb/tessera/placement"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The session stores native histograms on a one-node placement (locally)
// and with replicas (to every owner); a replica that cannot store them
// (here a peer without a batch Write, as an older node) fails the
// write by name rather than being acknowledged.
func TestSessionStoresHistograms(t *testing.T) {
	c := newFakeCluster(t)
	s := c.session(t, ReadMajority, WriteMajority, HealthOptions{})
	require.True(t, s.StoresHistograms())
	id := ident.FromLabels(labels.FromStrings("__name__", "h"))
	h := &histogram.Histogram{Count: 1, PositiveSpans: []histogram.Span{{Length: 1}}, PositiveBuckets: []int64{1}}
	hs := []storage.HistogramSample{{ID: id, Shard: ident.Shard(id, 16), T: time.Now().UnixMilli(), H: h}}
	var refused *HistogramRefusedError
	require.ErrorAs(t, s.WriteHistograms(context.Background(), "default", hs), &refused)
	for _, p := range c.peers {
		require.Zero(t, p.count())
	}
	hc := newHistCluster(t)
	hsess := hc.session(t, hc.steady, WriteMajority, true)
	require.True(t, hsess.StoresHistograms())
	require.NoError(t, hsess.WriteHistograms(context.Background(), "default", hs))
	empty, err := NewTopology(nil, "")
	require.NoError(t, err)
	noPlacement, err := NewSession(Options{Topology: empty, ReadLevel: ReadOne, WriteLevel: WriteOne,
		HedgeAfter: time.Second, RequestTimeout: time.Second, MaxBatch: 1, Dial: c.dial})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, noPlacement.Close()) })
	require.False(t, noPlacement.StoresHistograms())
	require.ErrorIs(t, noPlacement.WriteHistograms(context.Background(), "default", hs), ErrHistogramsNotStored)

	db := storagetest.Open(t, 16, nil)
	p, err := placement.Init([]placement.Instance{{ID: "solo", IsolationGroup: "r", Zone: "z", Weight: 1, Endpoint: "127.0.0.1:1"}}, 16, 1)
	require.NoError(t, err)
	solo, err := NewSession(Options{
		LocalID: "solo", Local: db, Topology: NewTopologyFromMap(NewMap(placement.MarkAllAvailable(p))),
		ReadLevel: ReadMajority, WriteLevel: WriteMajority, HedgeAfter: time.Second, RequestTimeout: time.Second, MaxBatch: 10,
		Dial: c.dial,
	})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, solo.Close()) })
	require.True(t, solo.StoresHistograms())
	require.NoError(t, solo.WriteHistograms(context.Background(), "default", hs))
	it, err := db.ReadHistograms("default", id, hs[0].T, hs[0].T)
	require.NoError(t, err)
	require.True(t, it.Next())
	require.False(t, it.Next())
	require.NoError(t, it.Err())
}

// writeHists writes samples by placement m through the session's one
// write path, placement retries included.
func writeHists(s *Session, samples []storage.HistogramSample, m *Map) error {
	ctx := context.Background()
	return s.routeAgain(ctx, m, func(m *Map) error {
		return s.writeOnce(ctx, "default", storage.Batch{Histograms: samples}, m)
	})
}

// histPeer is a fake node that also stores native histograms; old makes
// it refuse them as a node older than the HISTOGRAMS_V1 payload does.
// floatFail and histFail fail the writes of one kind only.
type histPeer struct {
	*fakePeer
	old                 bool
	floatFail, histFail error
	gate                chan struct{} // non-nil: histogram writes wait until it is closed

	hmu   sync.Mutex
	hists []storage.HistogramSample
}

// Write stores a batch of every kind, as one request: floats first, then
// histograms, as a node older than histograms does with the fallback
// (floats stored, histograms refused).
func (p *histPeer) Write(ctx context.Context, ns string, b storage.Batch) (WriteResult, error) {
	if err := p.enter(ctx); err != nil {
		return WriteResult{}, err
	}
	if p.gate != nil && len(b.Histograms) > 0 {
		select {
		case <-p.gate:
		case <-ctx.Done():
			return WriteResult{}, ctx.Err()
		}
	}
	if len(b.Floats) > 0 {
		if _, err := p.WriteBatch(ctx, ns, b.Floats); err != nil {
			return WriteResult{}, err
		}
	}
	if len(b.Histograms) == 0 {
		return WriteResult{Written: b.Len()}, nil
	}
	if p.histFail != nil {
		return WriteResult{}, p.histFail
	}
	if p.old {
		return WriteResult{}, status.Error(codes.InvalidArgument, "write payload format 30 (PAYLOAD_FORMAT_30) unknown to this node")
	}
	p.hmu.Lock()
	defer p.hmu.Unlock()
	for _, s := range b.Histograms {
		s.ID = append([]byte(nil), s.ID...)
		p.hists = append(p.hists, s)
	}
	return WriteResult{Written: b.Len()}, nil
}

func (p *histPeer) WriteBatch(ctx context.Context, ns string, samples []storage.Sample) (WriteResult, error) {
	if p.floatFail != nil {
		return WriteResult{}, p.floatFail
	}
	return p.fakePeer.WriteBatch(ctx, ns, samples)
}

// holdsHistograms says whether p has every sample of want (ID, time,
// histogram equal).
func (p *histPeer) holdsHistograms(want []storage.HistogramSample) error {
	p.hmu.Lock()
	defer p.hmu.Unlock()
	missing := 0
	for _, w := range want {
		found := false
		for _, h := range p.hists {
			if string(h.ID) == string(w.ID) && h.T == w.T && h.H.Equals(w.H) {
				found = true
				break
			}
		}
		if !found {
			missing++
		}
	}
	if missing > 0 {
		return fmt.Errorf("%s misses %d of %d histogram samples", p.name, missing, len(want))
	}
	return nil
}

func (p *histPeer) histCount() int {
	p.hmu.Lock()
	defer p.hmu.Unlock()
	return len(p.hists)
}

// histCluster is four fake histogram nodes: node1-3 own 16 shards at RF 3;
// moving replaces node3 by node4 (node3 LEAVING, node4 INITIALIZING).
type histCluster struct {
	peers          map[string]*histPeer // by instance
	steady, moving *Map
}

func newHistCluster(t *testing.T) *histCluster { return newHistClusterB(t) }

func newHistClusterB(t testing.TB) *histCluster {
	c := &histCluster{peers: map[string]*histPeer{}}
	var ins []placement.Instance
	for i := 1; i <= 4; i++ {
		id := "node" + strconv.Itoa(i)
		c.peers[id] = &histPeer{fakePeer: &fakePeer{name: id}}
		in := placement.Instance{ID: id, IsolationGroup: "rack" + strconv.Itoa(i), Zone: "z", Weight: 1, Endpoint: "127.0.0.1:900" + strconv.Itoa(i)}
		if i < 4 {
			ins = append(ins, in)
			continue
		}
		p, err := placement.Init(ins, 16, 3)
		require.NoError(t, err)
		p = placement.MarkAllAvailable(p)
		c.steady = NewMap(p)
		p, err = placement.Replace(p, []string{"node3"}, []placement.Instance{in})
		require.NoError(t, err)
		c.moving = NewMap(p)
	}
	return c
}

func (c *histCluster) session(t *testing.T, m *Map, level WriteLevel, pairing bool) *Session {
	return c.hintedSession(t, m, level, pairing, nil)
}

func (c *histCluster) options(m *Map, level WriteLevel, pairing bool, st *hints.Store) Options {
	return Options{
		Hints:    HintOptions{Store: st},
		Topology: NewTopologyFromMap(m), ReadLevel: ReadMajority, WriteLevel: level, Pairing: pairing,
		HedgeAfter: 20 * time.Millisecond, RequestTimeout: 30 * time.Second, MaxBatch: 3,
		Dial: func(ep string) (Peer, error) {
			for _, p := range c.peers {
				if "127.0.0.1:900"+p.name[len("node"):] == ep {
					return p, nil
				}
			}
			return nil, fmt.Errorf("no fake node at %s", ep)
		},
	}
}

func (c *histCluster) hintedSession(t *testing.T, m *Map, level WriteLevel, pairing bool, st *hints.Store) *Session {
	s, err := NewSession(c.options(m, level, pairing, st))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

func histogramsOf(n int) []storage.HistogramSample {
	var out []storage.HistogramSample
	for i := 0; i < n; i++ {
		id := ident.FromLabels(labels.FromStrings("__name__", "h", "i", strconv.Itoa(i)))
		for j := 0; j < 2; j++ {
			h := &histogram.Histogram{Count: uint64(i + j + 1), Sum: float64(i), Schema: 0,
				PositiveSpans: []histogram.Span{{Length: 1}}, PositiveBuckets: []int64{int64(i + j + 1)}}
			out = append(out, storage.HistogramSample{ID: id, Shard: ident.Shard(id, 16), T: int64(1000 + j), H: h})
		}
	}
	return out
}

// A histogram batch meets its shards' write level exactly as floats do:
// every owner is written, INITIALIZING/LEAVING pairs count as one replica
// with Pairing, and an error names the owners that failed.
func TestSessionWritesHistogramsAtLevel(t *testing.T) {
	failing := errors.New("disk full")
	for _, tc := range []struct {
		name    string
		moving  bool
		level   WriteLevel
		pairing bool
		fail    []string
		old     []string
		wantErr string // "" for success
	}{
		{name: "majority", level: WriteMajority},
		{name: "majority, one failing", level: WriteMajority, fail: []string{"node3"}},
		{name: "majority, two failing", level: WriteMajority, fail: []string{"node2", "node3"}, wantErr: "write consistency majority not met"},
		{name: "one, two failing", level: WriteOne, fail: []string{"node2", "node3"}},
		{name: "all, one failing", level: WriteAll, fail: []string{"node1"}, wantErr: "node1 (127.0.0.1:9001): disk full"},
		{name: "all", level: WriteAll},
		{name: "moving pair counts one", moving: true, level: WriteMajority, pairing: true, fail: []string{"node2"}},
		{name: "moving without pairing", moving: true, level: WriteMajority, fail: []string{"node2"}, wantErr: "not met"},
		{name: "moving, initializing alone does not count", moving: true, level: WriteMajority, pairing: true, fail: []string{"node2", "node3"}, wantErr: "not met"},
		{name: "moving, all with pair", moving: true, level: WriteAll, pairing: true},
		{name: "moving, all, initializing failing", moving: true, level: WriteAll, pairing: true, fail: []string{"node4"}, wantErr: "node4"},
		{name: "older replica refuses, level met anyway", level: WriteMajority, old: []string{"node3"}, wantErr: "native histograms refused by replica node3 (127.0.0.1:9003)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newHistCluster(t)
			m := c.steady
			if tc.moving {
				m = c.moving
			}
			for _, n := range tc.fail {
				c.peers[n].fail = failing
			}
			for _, n := range tc.old {
				c.peers[n].old = true
			}
			s := c.session(t, m, tc.level, tc.pairing)
			in := histogramsOf(20)
			err := writeHists(s, in, m)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
			} else {
				require.NoError(t, err)
			}
			// Every owner that answers gets every sample of its shards,
			// whatever the level.
			for id, p := range c.peers {
				var want []storage.HistogramSample
				for _, smp := range in {
					if ownsShard(m, id, smp.Shard) {
						want = append(want, smp)
					}
				}
				if p.fail != nil || p.old {
					require.Zero(t, p.histCount(), id)
					continue
				}
				waitfor.Condition(t, 10*time.Second, 5*time.Millisecond, id+" written", func() error {
					return p.holdsHistograms(want)
				})
			}
		})
	}
}

// A batch of floats and histograms meets its level once: an owner counts
// only when it stored its share of both kinds. Here each kind alone has
// two owners of three (a majority), but only node1 stored both, so the
// write is not acknowledged, naming the owner that failed each kind; a
// batch every owner stores whole is, and reaches each of them.
func TestSessionMixedBatchOneLevelCount(t *testing.T) {
	c := newHistCluster(t)
	c.peers["node2"].histFail = errors.New("histogram disk full")
	c.peers["node3"].floatFail = errors.New("float disk full")
	s := c.session(t, c.steady, WriteMajority, false)
	hs := histogramsOf(4)
	var fs []storage.Sample
	for i, h := range hs {
		fs = append(fs, storage.Sample{ID: h.ID, Shard: h.Shard, T: h.T, V: float64(i)})
	}
	err := s.Write(context.Background(), "default", storage.Batch{Floats: fs, Histograms: hs})
	require.ErrorContains(t, err, "write consistency majority not met")
	require.ErrorContains(t, err, "histogram disk full")
	require.ErrorContains(t, err, "float disk full")

	c = newHistCluster(t)
	s = c.session(t, c.steady, WriteMajority, false)
	require.NoError(t, s.Write(context.Background(), "default", storage.Batch{Floats: fs, Histograms: hs}))
	for _, id := range []string{"node1", "node2", "node3"} {
		p := c.peers[id]
		waitfor.Condition(t, 10*time.Second, 5*time.Millisecond, id+" written", func() error {
			if err := p.holdsHistograms(hs); err != nil {
				return err
			}
			return p.holds(fs)
		})
	}
}

// A write of a shard the placement does not have is refused by name, and
// the caller's buffers may be reused as soon as the write returned.
func TestSessionHistogramsBadShardAndBufferReuse(t *testing.T) {
	c := newHistCluster(t)
	s := c.session(t, c.steady, WriteMajority, true)
	err := writeHists(s, []storage.HistogramSample{{ID: []byte("x"), Shard: 99, H: &histogram.Histogram{}}}, c.steady)
	require.ErrorContains(t, err, "histogram sample of shard 99")

	// node1-3 are known to store histograms after one write; then node3
	// is written only after the next write returned.
	require.NoError(t, writeHists(s, histogramsOf(1), c.steady))
	gate := make(chan struct{})
	c.peers["node3"].gate = gate
	in := histogramsOf(5)
	keep := make([]storage.HistogramSample, len(in))
	for i, smp := range in {
		keep[i] = smp
		keep[i].ID = append([]byte(nil), smp.ID...)
		keep[i].H = smp.H.Copy()
	}
	require.NoError(t, writeHists(s, in, c.steady))
	for i := range in {
		for j := range in[i].ID {
			in[i].ID[j] = 'z'
		}
		in[i].H.Count = 999
		in[i].H.PositiveBuckets[0] = 999
	}
	close(gate)
	waitfor.Condition(t, 10*time.Second, 5*time.Millisecond, "node3 written", func() error {
		return c.peers["node3"].holdsHistograms(keep)
	})
}

// A replica that misses a histogram write at majority gets it from its
// hint queue once it answers again; a target that refuses the format has
// its histogram hints dropped, counted, instead of blocking its queue.
func TestHistogramHintsReplayToReplicaThatFailed(t *testing.T) {
	c := newHistCluster(t)
	st := openStore(t, t.TempDir(), hints.Options{})
	s := c.hintedSession(t, c.steady, WriteMajority, true, st)
	node3 := c.peers["node3"]
	node3.setFail(status.Error(codes.Unavailable, "disk busy"))
	var all []storage.HistogramSample
	for k := 0; k < 5; k++ {
		in := histogramsOf(10)
		for i := range in {
			in[i].T += int64(10 * k)
		}
		require.NoError(t, writeHists(s, in, c.steady))
		all = append(all, in...)
	}
	waitfor.Condition(t, 10*time.Second, 10*time.Millisecond, "hinted", func() error {
		if n := records(st, "node3"); n < 5 {
			return fmt.Errorf("%d records", n)
		}
		return nil
	})
	require.Zero(t, node3.histCount())
	node3.setFail(nil)
	waitfor.Condition(t, 20*time.Second, 10*time.Millisecond, "node3 caught up", func() error { return node3.holdsHistograms(all) })
	waitfor.Condition(t, 10*time.Second, 10*time.Millisecond, "queue empty", func() error {
		if n := records(st, "node3"); n > 0 {
			return fmt.Errorf("%d records left", n)
		}
		return nil
	})

	// A hinted histogram record whose target turns out older than the
	// format: dropped as rejected, the queue moves on.
	q, err := st.Queue("node2")
	require.NoError(t, err)
	c.peers["node2"].old = true
	require.NoError(t, q.AppendBatch("default", storage.Batch{Histograms: all[:4]}))
	c.hintedSession(t, c.steady, WriteMajority, true, st) // replays what it finds
	waitfor.Condition(t, 20*time.Second, 10*time.Millisecond, "refused hints dropped", func() error {
		if n := q.Status().Dropped[hints.DropRejected+"_samples"]; n != 4 {
			return fmt.Errorf("%d dropped as rejected (status %+v)", n, q.Status())
		}
		return nil
	})
	require.Zero(t, records(st, "node2"))
}

// What a replica missed of a batch of every kind is one hint record
// holding both kinds, and its replay gives the replica both.
func TestMixedBatchHintIsOneRecord(t *testing.T) {
	c := newHistCluster(t)
	st := openStore(t, t.TempDir(), hints.Options{})
	s, err := NewSession(c.options(c.steady, WriteMajority, true, st))
	require.NoError(t, err)
	node3 := c.peers["node3"]
	node3.setFail(status.Error(codes.Unavailable, "disk busy"))
	hs := histogramsOf(4)
	var fs []storage.Sample
	for i, h := range hs {
		fs = append(fs, storage.Sample{ID: h.ID, Shard: h.Shard, T: h.T, V: float64(i)})
	}
	for k := 0; k < 3; k++ {
		b := storage.Batch{Floats: slices.Clone(fs), Histograms: slices.Clone(hs)}
		for i := range b.Floats {
			b.Floats[i].T += int64(100 * k)
			b.Histograms[i].T += int64(100 * k)
		}
		require.NoError(t, s.Write(context.Background(), "default", b))
	}
	waitfor.Condition(t, 10*time.Second, 10*time.Millisecond, "hinted", func() error {
		if n := records(st, "node3"); n < 3 {
			return fmt.Errorf("%d records", n)
		}
		return nil
	})
	require.NoError(t, s.Close()) // no replay reads the queue from here on
	q, err := st.Queue("node3")
	require.NoError(t, err)
	for k := 0; k < 3; k++ {
		rec, ok, err := q.Next()
		require.NoError(t, err)
		require.True(t, ok)
		require.Len(t, rec.Samples, len(fs), "record %d", k)
		require.Len(t, rec.Histograms, len(hs), "record %d", k)
		q.Ack(rec)
	}
	_, ok, err := q.Next()
	require.NoError(t, err)
	require.False(t, ok, "one record a batch")

	require.NoError(t, q.AppendBatch("default", storage.Batch{Floats: fs, Histograms: hs}))
	node3.setFail(nil)
	c.hintedSession(t, c.steady, WriteMajority, true, st) // replays what it finds
	waitfor.Condition(t, 20*time.Second, 10*time.Millisecond, "node3 caught up", func() error {
		if err := node3.holdsHistograms(hs); err != nil {
			return err
		}
		return node3.holds(fs)
	})
}

// Close delivers histogram writes still on their way to a replica after
// the level was met, as it drains the float queues: when it returns, the
// slow replica holds them.
func TestSessionCloseDeliversHistogramsInFlight(t *testing.T) {
	c := newHistCluster(t)
	s, err := NewSession(c.options(c.steady, WriteMajority, true, nil))
	require.NoError(t, err)
	require.NoError(t, writeHists(s, histogramsOf(1), c.steady)) // every owner known
	gate := make(chan struct{})
	c.peers["node3"].gate = gate
	in := histogramsOf(5)
	require.NoError(t, writeHists(s, in, c.steady))
	require.Error(t, c.peers["node3"].holdsHistograms(in), "node3 waits at its gate")
	go close(gate)
	require.NoError(t, s.Close())
	require.NoError(t, c.peers["node3"].holdsHistograms(in))
	require.ErrorContains(t, writeHists(s, in, c.steady), "session closed")
}

// The HTTP handlers write a request's batch of every kind in one Write
// when the backend has it: the session must.
var (
	_ httpapi.BatchWriter     = (*Session)(nil)
	_ httpapi.HistogramWriter = (*Session)(nil)
)
