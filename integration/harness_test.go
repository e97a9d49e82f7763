package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/tessera-tsdb/tessera/internal/waitfor"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/prompb"
	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/config"
	"github.com/tessera-tsdb/tessera/dbnode/node"
	"github.com/tessera-tsdb/tessera/placement"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// etcdServer is a real etcd on free loopback ports in a temp dir.
type etcdServer struct {
	e       *embed.Etcd
	dir     string
	client  string
	peer    string
	stopped bool
}

func freePort(t testing.TB) string {
	// Below the kernel's ephemeral range (32768-60999 by default): a port
	// from that range, free when picked, can become the source port of
	// any outgoing connection on the machine (another suite's, this one's
	// own clients) before a node binds it, or while a killed node is down
	// before its restart on the same port; a restarted binary once never
	// listened. Ports here are handed out only by explicit binds.
	for range 1000 {
		addr := fmt.Sprintf("127.0.0.1:%d", lowPortMin+rand.IntN(lowPortMax-lowPortMin))
		l, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		l.Close()
		return addr
	}
	t.Fatalf("no free port in [%d, %d)", lowPortMin, lowPortMax)
	return ""
}

// The range freePort picks from.
const lowPortMin, lowPortMax = 20000, 32768

func startEtcd(t testing.TB) *etcdServer {
	s := &etcdServer{dir: t.TempDir(), client: freePort(t), peer: freePort(t)}
	s.start(t)
	t.Cleanup(func() { s.stop() })
	return s
}

func (s *etcdServer) start(t testing.TB) {
	cfg := embed.NewConfig()
	cfg.Name = "test"
	cfg.Dir = s.dir
	cu, _ := url.Parse("http://" + s.client)
	pu, _ := url.Parse("http://" + s.peer)
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	cfg.InitialCluster = "test=http://" + s.peer
	// Quiet, as placement/etcdtest: its routine shutdown errors (JSON with
	// stack traces) buried the failures in a failing run's output.
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	e, err := embed.StartEtcd(cfg)
	require.NoError(t, err)
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		e.Close()
		t.Fatal("etcd not ready")
	}
	s.e, s.stopped = e, false
}

func (s *etcdServer) stop() {
	if !s.stopped {
		s.e.Close()
		s.stopped = true
	}
}

// tnode is one in-process tessera node.
type tnode struct {
	t      testing.TB
	cfg    config.Config
	n      *node.Node
	cancel context.CancelFunc
	done   chan error
}

func nodeConfig(t testing.TB, id, group string, etcdEndpoint string) config.Config {
	var c config.Config
	c.ID = id
	c.IsolationGroup = group
	c.DataDir = filepath.Join(t.TempDir(), id)
	// Fixed ports, not :0 (the ephemeral range): a restart binds them again.
	c.HTTP.Listen = freePort(t)
	c.RPC.Listen = freePort(t)
	c.Etcd.Endpoints = []string{etcdEndpoint}
	c.Cluster.HedgeAfter = 50 * time.Millisecond
	c.Cluster.RequestTimeout = 20 * time.Second
	// Every node of a test shares one process: under -race on a loaded
	// 2-core machine a health probe of a live node has taken over the
	// default 1 s twice in a row, and the node was treated as down (writes
	// at majority failed naming it). Down means down here, not slow.
	c.Cluster.HealthCheckTimeout = 5 * time.Second
	c.Defaults()
	require.NoError(t, c.Validate())
	return c
}

func startNode(t testing.TB, cfg config.Config) *tnode {
	n, err := node.New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.NoError(t, err)
	// Keep the bound ports on restart.
	cfg.HTTP.Listen = n.HTTPAddr()
	cfg.RPC.Listen = n.RPCAddr()
	cfg.RPC.Advertise = n.RPCAddr()
	ctx, cancel := context.WithCancel(context.Background())
	tn := &tnode{t: t, cfg: cfg, n: n, cancel: cancel, done: make(chan error, 1)}
	go func() { tn.done <- n.Run(ctx) }()
	t.Cleanup(tn.stop)
	return tn
}

func (tn *tnode) stop() {
	if tn.cancel == nil {
		return
	}
	tn.cancel()
	select {
	case err := <-tn.done:
		if err != nil && tn.t != nil {
			tn.t.Logf("node %s stopped: %v", tn.cfg.ID, err)
		}
	case <-time.After(30 * time.Second):
		tn.t.Errorf("node %s did not stop", tn.cfg.ID)
	}
	tn.cancel = nil
}

// restart starts the node again on the same ports and data.
func (tn *tnode) restart(t testing.TB) *tnode {
	tn.stop()
	return startNode(t, tn.cfg)
}

func (tn *tnode) url() string { return "http://" + tn.cfg.HTTP.Listen }

func (tn *tnode) instance() placement.Instance {
	host, port, _ := net.SplitHostPort(tn.cfg.RPC.Advertise)
	p, _ := strconv.Atoi(port)
	return placement.Instance{ID: tn.cfg.ID, IsolationGroup: tn.cfg.IsolationGroup, Zone: "z", Weight: 1,
		Endpoint: tn.cfg.RPC.Advertise, HTTPEndpoint: tn.cfg.HTTP.Listen, Hostname: host, Port: uint32(p)}
}

func etcdClient(t testing.TB, endpoint string) *clientv3.Client {
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

func putPlacement(t testing.TB, c *clientv3.Client, p placement.Placement) {
	require.NoError(t, p.Validate())
	b, err := json.Marshal(p)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = c.Put(ctx, "_tessera/placement/default", string(b))
	require.NoError(t, err)
}

func getPlacement(t testing.TB, c *clientv3.Client) placement.Placement {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := c.Get(ctx, "_tessera/placement/default")
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1)
	var p placement.Placement
	require.NoError(t, json.Unmarshal(resp.Kvs[0].Value, &p))
	p.Version = resp.Kvs[0].ModRevision
	return p
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t testing.TB, d time.Duration, what string, cond func() error) {
	t.Helper()
	waitfor.Condition(t, d, 50*time.Millisecond, what, cond)
}

func (tn *tnode) ready() error {
	resp, err := http.Get(tn.url() + "/ready")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return fmt.Errorf("%s: %d %s", tn.cfg.ID, resp.StatusCode, b)
	}
	return nil
}

// cluster3 starts three nodes in three groups over one etcd with an RF 3
// placement and waits until all are ready.
func cluster3(t testing.TB) (*etcdServer, []*tnode, *clientv3.Client) { return clusterN(t, 3) }

// clusterN starts n nodes in n groups with an RF 3 placement.
func clusterN(t testing.TB, n int) (*etcdServer, []*tnode, *clientv3.Client) {
	return clusterNWith(t, n, nil)
}

// clusterNWith is clusterN with each node's config changed by edit.
func clusterNWith(t testing.TB, n int, edit func(*config.Config)) (*etcdServer, []*tnode, *clientv3.Client) {
	e := startEtcd(t)
	var nodes []*tnode
	for i := 1; i <= n; i++ {
		cfg := nodeConfig(t, fmt.Sprintf("node%d", i), fmt.Sprintf("rack%d", i), e.client)
		if edit != nil {
			edit(&cfg)
			require.NoError(t, cfg.Validate())
		}
		nodes = append(nodes, startNode(t, cfg))
	}
	c := etcdClient(t, e.client)
	var ins []placement.Instance
	for _, n := range nodes {
		ins = append(ins, n.instance())
	}
	p, err := placement.Init(ins, 4096, 3)
	require.NoError(t, err)
	putPlacement(t, c, p)
	for _, n := range nodes {
		eventually(t, 60*time.Second, n.cfg.ID+" ready", n.ready)
	}
	return e, nodes, c
}

// dataset is a generated set of series written through remote write and
// checked back sample by sample.
type dataset struct {
	mu     sync.Mutex
	series map[string][]prompb.Sample // by series label
	// client sends the requests; nil: http.DefaultClient (a test of
	// secured nodes sets one that adds credentials).
	client *http.Client
}

func (d *dataset) httpClient() *http.Client {
	if d.client != nil {
		return d.client
	}
	return http.DefaultClient
}

func newDataset() *dataset { return &dataset{series: map[string][]prompb.Sample{}} }

func seriesLabels(i int) []prompb.Label {
	return []prompb.Label{{Name: "__name__", Value: "it_metric"}, {Name: "job", Value: "it"}, {Name: "series", Value: strconv.Itoa(i)}}
}

// write sends one remote write of n series, one sample each at ts, and
// records the samples when it was acknowledged (2xx).
func (d *dataset) write(url string, from, n int, ts int64) error {
	req := &prompb.WriteRequest{}
	for i := from; i < from+n; i++ {
		req.Timeseries = append(req.Timeseries, prompb.TimeSeries{Labels: seriesLabels(i),
			Samples: []prompb.Sample{{Timestamp: ts, Value: float64(i)*1000 + float64(ts%100000)}}})
	}
	raw, err := req.Marshal()
	if err != nil {
		return err
	}
	resp, err := d.httpClient().Post(url+"/api/v1/prom/remote/write", "application/x-protobuf", bytes.NewReader(snappy.Encode(nil, raw)))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("remote write: %d %s", resp.StatusCode, b)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, ts := range req.Timeseries {
		k := ts.Labels[2].Value
		d.series[k] = append(d.series[k], ts.Samples...)
	}
	return nil
}

func remoteRead(url string, start, end int64) (map[string][]prompb.Sample, error) {
	return remoteReadWith(http.DefaultClient, url, start, end)
}

func remoteReadWith(c *http.Client, url string, start, end int64) (map[string][]prompb.Sample, error) {
	rr := &prompb.ReadRequest{Queries: []*prompb.Query{{StartTimestampMs: start, EndTimestampMs: end,
		Matchers: []*prompb.LabelMatcher{{Type: prompb.LabelMatcher_EQ, Name: "__name__", Value: "it_metric"}}}}}
	raw, err := rr.Marshal()
	if err != nil {
		return nil, err
	}
	resp, err := c.Post(url+"/api/v1/prom/remote/read", "application/x-protobuf", bytes.NewReader(snappy.Encode(nil, raw)))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("remote read: %d %s", resp.StatusCode, body)
	}
	dec, err := snappy.Decode(nil, body)
	if err != nil {
		return nil, err
	}
	var out prompb.ReadResponse
	if err := out.Unmarshal(dec); err != nil {
		return nil, err
	}
	got := map[string][]prompb.Sample{}
	for _, ts := range out.Results[0].Timeseries {
		for _, l := range ts.Labels {
			if l.Name == "series" {
				got[l.Value] = ts.Samples
			}
		}
	}
	return got, nil
}

// check reads everything back through url and compares every acknowledged
// sample, bit for bit.
func (d *dataset) check(url string, start, end int64) error {
	got, err := remoteReadWith(d.httpClient(), url, start, end)
	if err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for k, want := range d.series {
		want = sortedUnique(want)
		have := got[k]
		if len(have) < len(want) {
			return fmt.Errorf("series %s: %d samples, want at least %d", k, len(have), len(want))
		}
		idx := map[int64]float64{}
		for _, s := range have {
			idx[s.Timestamp] = s.Value
		}
		for _, s := range want {
			v, ok := idx[s.Timestamp]
			if !ok || math.Float64bits(v) != math.Float64bits(s.Value) {
				return fmt.Errorf("series %s: sample at %d: got %v (present %v), want %v", k, s.Timestamp, v, ok, s.Value)
			}
		}
	}
	return nil
}

func (d *dataset) total() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, s := range d.series {
		n += len(s)
	}
	return n
}

func sortedUnique(s []prompb.Sample) []prompb.Sample {
	out := append([]prompb.Sample(nil), s...)
	sort.Slice(out, func(i, j int) bool { return out[i].Timestamp < out[j].Timestamp })
	return out
}

// waitSamples waits until the dataset holds at least n acknowledged samples.
func (d *dataset) waitSamples(t testing.TB, n int) {
	eventually(t, 10*time.Second, "some writes", func() error {
		if got := d.total(); got < n {
			return fmt.Errorf("%d samples", got)
		}
		return nil
	})
}
