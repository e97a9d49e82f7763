package repair

import (
	"bytes"
	"context"
	"errors"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/client"
	"github.com/tessera-tsdb/tessera/dbnode/encoding"
	"github.com/tessera-tsdb/tessera/dbnode/rpc"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
	"github.com/tessera-tsdb/tessera/dbnode/storage/storagetest"
	"github.com/tessera-tsdb/tessera/ident"
	"github.com/tessera-tsdb/tessera/placement"
)

const (
	testNS     = "default"
	testShards = 4
)

// errPeerDown is what a failing fake peer answers.
var errPeerDown = errors.New("fake peer: connection reset")

// clock is a settable clock shared by a test's storages and repairers.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// dbPeer serves the repair calls of a node from a real storage engine in
// memory, as the RPC server does (pageSeries checksums per page). Calls
// may be made to fail: failFetchAfter > 0 fails every Fetch after that
// many; onDigests runs on each BlockDigests call (a test cancels there).
type dbPeer struct {
	db         *storage.Database
	pageSeries int

	mu             sync.Mutex
	failFetchAfter int
	failAll        bool
	onDigests      func(shard uint32)
	digestCalls    int
	checksumCalls  int
	fetchCalls     int
	fetchedSeries  int
}

func (p *dbPeer) BlockDigests(_ context.Context, req *rpc.BlockDigestsRequest) (*rpc.BlockDigestsResponse, error) {
	p.mu.Lock()
	p.digestCalls++
	fail, hook := p.failAll, p.onDigests
	p.mu.Unlock()
	if hook != nil {
		hook(req.Shard)
	}
	if fail {
		return nil, errPeerDown
	}
	ds, err := p.db.BlockDigests(req.Namespace, req.Shard, req.Start, req.End)
	if err != nil {
		return nil, err
	}
	resp := &rpc.BlockDigestsResponse{}
	for _, d := range ds {
		resp.Blocks = append(resp.Blocks, rpc.BlockDigest{BlockStart: d.BlockStart, Series: uint32(d.Series), Samples: uint64(d.Samples), Digest: d.Digest})
	}
	return resp, nil
}

func (p *dbPeer) SeriesChecksums(_ context.Context, req *rpc.SeriesChecksumsRequest) (*rpc.SeriesChecksumsResponse, error) {
	p.mu.Lock()
	p.checksumCalls++
	fail := p.failAll
	p.mu.Unlock()
	if fail {
		return nil, errPeerDown
	}
	sums, err := p.db.SeriesChecksums(req.Namespace, req.Shard, req.BlockStart, req.Start, req.End)
	if err != nil {
		return nil, err
	}
	i := sort.Search(len(sums), func(i int) bool { return bytes.Compare(sums[i].ID, req.After) > 0 })
	sums = sums[i:]
	resp := &rpc.SeriesChecksumsResponse{}
	for j, s := range sums {
		if j == p.pageSeries {
			resp.More = true
			break
		}
		resp.Series = append(resp.Series, rpc.SeriesChecksum{ID: s.ID, Checksum: s.Checksum, Samples: uint32(s.Samples)})
	}
	return resp, nil
}

func (p *dbPeer) Fetch(_ context.Context, req *rpc.FetchRequest) (*rpc.FetchResponse, error) {
	p.mu.Lock()
	p.fetchCalls++
	fail := p.failAll || (p.failFetchAfter > 0 && p.fetchCalls > p.failFetchAfter)
	if !fail {
		p.fetchedSeries += len(req.IDs)
	}
	p.mu.Unlock()
	if fail {
		return nil, errPeerDown
	}
	resp := &rpc.FetchResponse{}
	for _, id := range req.IDs {
		it, err := p.db.Read(req.Namespace, id, req.Start, req.End)
		if err != nil {
			return nil, err
		}
		stream, n, err := encoding.Encode(it)
		if err != nil {
			return nil, err
		}
		if n == 0 {
			stream = nil
		}
		fs := rpc.FetchedSeries{ID: id, Shard: p.db.Shard(id), Stream: stream}
		hit, err := p.db.ReadHistograms(req.Namespace, id, req.Start, req.End)
		if err != nil {
			return nil, err
		}
		hs, hn, err := encoding.EncodeHistograms(hit)
		if err != nil {
			return nil, err
		}
		if hn > 0 {
			if !req.AcceptHistograms {
				// As the RPC server: never floats alone passed off as
				// a series holding histograms.
				return nil, errors.New("fake peer: series holds native histograms the requester does not read")
			}
			fs.Histograms = hs
		}
		resp.Series = append(resp.Series, fs)
	}
	return resp, nil
}

// FetchBlock pages a flushed block as the RPC server does (pageSeries
// series a page).
func (p *dbPeer) FetchBlock(_ context.Context, req *rpc.FetchBlockRequest) (*rpc.FetchBlockResponse, error) {
	p.mu.Lock()
	fail := p.failAll
	p.mu.Unlock()
	if fail {
		return nil, errPeerDown
	}
	series, _, err := p.db.ReadBlock(req.Namespace, req.Shard, req.BlockStart, req.After, 1<<30)
	if err != nil {
		return nil, err
	}
	resp := &rpc.FetchBlockResponse{}
	for j, s := range series {
		if j == p.pageSeries {
			resp.More = true
			break
		}
		resp.Series = append(resp.Series, rpc.BlockSeries{ID: s.ID, Data: s.Data, Samples: uint32(s.Samples)})
	}
	return resp, nil
}

func (p *dbPeer) calls() (digests, checksums, fetches, series int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.digestCalls, p.checksumCalls, p.fetchCalls, p.fetchedSeries
}

// cluster is a few real storage engines, every one owning every shard
// AVAILABLE, each with a repairer whose peers are the others in memory.
type cluster struct {
	t     *testing.T
	clk   *clock
	dbs   []*storage.Database
	peers []*dbPeer // peers[i] serves dbs[i]
	m     *client.Map
	dirs  []string
}

func newCluster(t *testing.T, n int) *cluster {
	t.Helper()
	clk := &clock{t: time.Date(2026, 11, 20, 13, 0, 0, 0, time.UTC)}
	c := &cluster{t: t, clk: clk}
	p := placement.Placement{NumShards: testShards, ReplicaFactor: n, IsSharded: true}
	for i := 0; i < n; i++ {
		db := storagetest.Open(t, testShards, clk.Now)
		c.dbs = append(c.dbs, db)
		c.peers = append(c.peers, &dbPeer{db: db, pageSeries: 2})
		c.dirs = append(c.dirs, t.TempDir())
		in := placement.Instance{ID: nodeID(i), IsolationGroup: nodeID(i), Weight: 1, Endpoint: nodeID(i)}
		for s := uint32(0); s < testShards; s++ {
			in.Shards = append(in.Shards, placement.Shard{ID: s, State: placement.Available})
		}
		p.Instances = append(p.Instances, in)
	}
	c.m = client.NewMap(p)
	return c
}

func nodeID(i int) string { return string(rune('a' + i)) }

// repairer returns a repairer for node i; opt may change its options.
func (c *cluster) repairer(i int, opt func(*Options)) *Repairer {
	c.t.Helper()
	o := Options{
		InstanceID: nodeID(i), DB: c.dbs[i],
		Dial: func(ep string) (Peer, error) {
			for j := range c.dbs {
				if nodeID(j) == ep {
					return c.peers[j], nil
				}
			}
			return nil, errors.New("no such peer " + ep)
		},
		Placement:      func() *client.Map { return c.m },
		Every:          time.Hour,
		SettleMargin:   time.Minute,
		SeriesPerFetch: 2,
		StateDir:       c.dirs[i],
		Now:            c.clk.Now,
	}
	if opt != nil {
		opt(&o)
	}
	r, err := New(o)
	require.NoError(c.t, err)
	return r
}

func seriesID(name, job string) []byte {
	return ident.FromLabels(labels.FromStrings("__name__", name, "job", job))
}

// write writes samples of one series to the given nodes.
func (c *cluster) write(nodes []int, id []byte, ts []int64, v func(t int64) float64) {
	c.t.Helper()
	var batch []storage.Sample
	for _, t := range ts {
		batch = append(batch, storage.Sample{ID: id, Shard: ident.Shard(id, testShards), T: t, V: v(t)})
	}
	for _, n := range nodes {
		require.NoError(c.t, c.dbs[n].WriteBatch(testNS, append([]storage.Sample(nil), batch...)))
	}
}

// every returns timestamps from `from` (inclusive) to `to` (exclusive)
// every step.
func every(from, to time.Time, step time.Duration) []int64 {
	var out []int64
	for t := from; t.Before(to); t = t.Add(step) {
		out = append(out, t.UnixMilli())
	}
	return out
}

type point struct {
	T int64
	V float64
}

func readAll(t *testing.T, db *storage.Database, id []byte, from, to int64) []point {
	t.Helper()
	it, err := db.Read(testNS, id, from, to)
	require.NoError(t, err)
	var out []point
	for it.Next() {
		ts, v := it.At()
		out = append(out, point{ts, v})
	}
	require.NoError(t, it.Err())
	return out
}

// digests returns every shard's block digests of node i over the repair
// window.
func (c *cluster) digests(i int) map[uint32][]storage.BlockDigest {
	c.t.Helper()
	lo, hi := Window(storagetest.Namespace(), c.clk.Now(), time.Minute)
	out := map[uint32][]storage.BlockDigest{}
	for s := uint32(0); s < testShards; s++ {
		ds, err := c.dbs[i].BlockDigests(testNS, s, lo, hi)
		require.NoError(c.t, err)
		out[s] = ds
	}
	return out
}
