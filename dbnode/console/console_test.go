package console

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/dbnode/httpapi"
	"github.com/tessera-tsdb/tessera/dbnode/httpapi/httpapitest"
	"github.com/tessera-tsdb/tessera/dbnode/storage/storagetest"
	"github.com/tessera-tsdb/tessera/placement"
)

func instance(id, group string) placement.Instance {
	return placement.Instance{ID: id, IsolationGroup: group, Zone: "z", Weight: 1, Endpoint: id + ":9000"}
}

// movingPlacement is three instances, each holding every one of 64 shards,
// plus a fourth added: its shards INITIALIZING from the LEAVING copies.
func movingPlacement(t *testing.T) placement.Placement {
	p, err := placement.Init([]placement.Instance{instance("c", "r3"), instance("a", "r1"), instance("b", "r2")}, 64, 3)
	require.NoError(t, err)
	p, err = placement.MarkAvailable(p, "a")
	require.NoError(t, err)
	p, err = placement.MarkAvailable(p, "b")
	require.NoError(t, err)
	p, err = placement.MarkAvailable(p, "c")
	require.NoError(t, err)
	p, err = placement.Add(p, instance("d", "r0"))
	require.NoError(t, err)
	require.Positive(t, placement.MovingShards(p))
	return p
}

func TestInstanceViewsMatchThePlacement(t *testing.T) {
	p := movingPlacement(t)
	views := instanceViews(p)
	require.Len(t, views, 4)
	// By isolation group: r0 (d) first.
	require.Equal(t, []string{"d", "a", "b", "c"}, []string{views[0].ID, views[1].ID, views[2].ID, views[3].ID})
	for _, v := range views {
		in, ok := p.Instance(v.ID)
		require.True(t, ok)
		c := in.CountByState()
		require.Equal(t, c[placement.Initializing], v.Counts["INITIALIZING"], v.ID)
		require.Equal(t, c[placement.Available], v.Counts["AVAILABLE"], v.ID)
		require.Equal(t, c[placement.Leaving], v.Counts["LEAVING"], v.ID)
		require.Len(t, v.Shards, 64)
		held := 0
		for _, s := range in.Shards {
			require.Equal(t, s.State.String()[:1], v.Shards[s.ID:s.ID+1])
			held++
		}
		require.Equal(t, 64-held, strings.Count(v.Shards, "."), v.ID)
	}
	// d streams its shards from the LEAVING copies, named per source.
	total := 0
	for src, n := range views[0].Sources {
		require.Contains(t, []string{"a", "b", "c"}, src)
		total += n
	}
	require.Equal(t, views[0].Counts["INITIALIZING"], total)
}

// readyNode is a real node HTTP API (storage behind it) on a loopback
// port, whose /ready gives reason ("": ready).
func readyNode(t *testing.T, reason string) string {
	st := nodeState{backend: httpapi.Local{DB: storagetest.Open(t, 64, nil)}, reason: reason}
	api := httpapitest.New(t, httpapi.Options{Namespace: "default", State: st})
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// nodeState is a node's fixed lifecycle state (httpapi.State).
type nodeState struct {
	backend httpapi.Backend
	reason  string
}

func (s nodeState) Backend() httpapi.Backend { return s.backend }
func (s nodeState) Ready() (string, any)     { return s.reason, nil }
func (s nodeState) Damage() []string         { return nil }

func closedPort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

func TestClusterProbesEachInstance(t *testing.T) {
	upAddr := readyNode(t, "")
	bootingAddr := readyNode(t, "bootstrapping: 3 shards INITIALIZING")

	p := movingPlacement(t)
	for i := range p.Instances {
		switch p.Instances[i].ID {
		case "a":
			p.Instances[i].HTTPEndpoint = upAddr
		case "b":
			p.Instances[i].HTTPEndpoint = bootingAddr
		case "c":
			p.Instances[i].HTTPEndpoint = closedPort(t)
		} // d: none
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/status/hints", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, `{"enabled":false,"targets":[]}`)
	})
	c := New(Options{Self: "a", Local: mux, ProbeTimeout: 5 * time.Second,
		Placement: func(context.Context) (placement.Placement, error) { return p, nil }})
	c.Register(mux)

	srv := httptest.NewServer(mux)
	defer srv.Close()
	resp, err := http.Get(srv.URL + Path)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	var got Cluster
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&got))

	byID := map[string]InstanceView{}
	for _, in := range got.Instances {
		byID[in.ID] = in
	}
	require.True(t, byID["a"].Health.OK)
	require.True(t, byID["a"].Ready.OK)
	require.True(t, byID["b"].Health.OK)
	require.False(t, byID["b"].Ready.OK)
	require.Equal(t, 503, byID["b"].Ready.Status)
	require.Equal(t, "bootstrapping: 3 shards INITIALIZING", byID["b"].Ready.Reason)
	require.True(t, byID["c"].Ready.Checked)
	require.False(t, byID["c"].Ready.OK)
	require.Contains(t, byID["c"].Ready.Reason, "refused")
	require.False(t, byID["d"].Ready.Checked)
	require.Equal(t, "etcd", got.PlacementSource)
	require.Equal(t, placement.MovingShards(p), got.Placement.Moving)
	require.JSONEq(t, `{"enabled":false,"targets":[]}`, string(got.Hints))
	// No repair route on this mux: said so, not invented.
	require.Nil(t, got.Repair)
	require.Contains(t, got.RepairError, "/api/v1/status/repair")
}

func TestClusterFallsBackToTheCachedPlacement(t *testing.T) {
	p := movingPlacement(t)
	c := New(Options{Self: "a",
		Placement: func(context.Context) (placement.Placement, error) {
			return placement.Placement{}, errors.New("etcd down")
		},
		Cached: func() *placement.Placement { return &p },
	})
	got := c.gather(context.Background())
	require.Equal(t, "cache", got.PlacementSource)
	require.Contains(t, got.PlacementError, "etcd down")
	require.Len(t, got.Instances, 4)

	none := New(Options{Placement: func(context.Context) (placement.Placement, error) {
		return placement.Placement{}, placement.ErrNotFound
	}}).gather(context.Background())
	require.Nil(t, none.Placement)
	require.Empty(t, none.Instances)
	require.Equal(t, "none", none.PlacementSource)
}

func TestRepairShownWhenTheRouteAnswers(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/status/repair", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, `{"running":true,"shardsDone":7}`)
	})
	got := New(Options{Local: mux}).gather(context.Background())
	require.JSONEq(t, `{"running":true,"shardsDone":7}`, string(got.Repair))
	require.Empty(t, got.RepairError)
}

// The rates cover the last RateWindow of the ticker's readings: before a
// full window they cover what there is (and say so); after it, the newest
// reading against the one a window older; page views take no readings.
func TestRatesOverAFixedWindow(t *testing.T) {
	now := time.Unix(1000, 0)
	c := New(Options{Now: func() time.Time { return now }})
	ingest := 0.0
	reads := 0
	read := func() (map[string]float64, error) {
		reads++
		return map[string]float64{MetricIngest: ingest, MetricStored: 3 * ingest, MetricQueries: ingest / 100}, nil
	}
	c.ring.take(now, read)
	require.False(t, c.gather(context.Background()).Rates.Known)

	// 100/s for 30 s: a half window.
	for range 6 {
		now, ingest = now.Add(5*time.Second), ingest+500
		c.ring.take(now, read)
	}
	r := c.ring.rates()
	require.True(t, r.Known)
	require.InDelta(t, 30, r.WindowSeconds, 1e-9)
	require.InDelta(t, 100, r.IngestSamplesPerSecond, 1e-9)
	require.InDelta(t, 300, r.StoredSamplesPerSecond, 1e-9)

	// Then nothing for 60 s: a full window of nothing reads 0, however
	// often (or seldom) anyone loaded the page meanwhile.
	for range 12 {
		now = now.Add(5 * time.Second)
		c.ring.take(now, read)
	}
	before := reads
	for range 5 {
		r = c.gather(context.Background()).Rates
	}
	require.Equal(t, before, reads, "page views take no readings")
	require.InDelta(t, 60, r.WindowSeconds, 1e-9)
	require.Zero(t, r.IngestSamplesPerSecond)
	require.LessOrEqual(t, len(c.ring.readings), 13, "only a window of readings is kept")

	// A burst in the last 5 s is averaged over the minute.
	now, ingest = now.Add(5*time.Second), ingest+6000
	c.ring.take(now, read)
	require.InDelta(t, 100, c.ring.rates().IngestSamplesPerSecond, 1e-9)

	c.ring.take(now.Add(time.Second), func() (map[string]float64, error) { return nil, errors.New("gather failed") })
	require.Equal(t, "gather failed", c.ring.rates().Error)
}

// The pages put data in as text only and load nothing from elsewhere (no
// CDN): a grep over every embedded file for the ways around that.
func TestStaticFilesUseTextOnlyAndNoCDN(t *testing.T) {
	err := fs.WalkDir(static, "static", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(static, path)
		if err != nil {
			return err
		}
		text := strings.ReplaceAll(string(b), `"http://www.w3.org/2000/svg"`, "") // SVG's namespace name
		for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "http://", "https://", "//cdn"} {
			require.NotContains(t, text, bad, path)
		}
		return nil
	})
	require.NoError(t, err)
}

func TestPageAndAssetsAreServed(t *testing.T) {
	mux := http.NewServeMux()
	New(Options{}).Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	for path, want := range map[string]string{
		"/":                         `<script src="/console/console.js">`,
		"/console/console.js":       "/api/v1/console/cluster",
		"/console/console.css":      "--A:",
		"/console/query.html":       `<script src="/console/chart.js">`,
		"/console/query.js":         "/api/v1/query_range",
		"/console/cardinality.html": `<script src="/console/cardinality.js">`,
		"/console/cardinality.js":   "/api/v1/status/tsdb",
	} {
		resp, err := http.Get(srv.URL + path)
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, 200, resp.StatusCode, path)
		require.Contains(t, string(b), want, path)
	}
	// Only / itself is the page: other paths stay 404.
	resp, err := http.Get(srv.URL + "/no/such/page")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 404, resp.StatusCode)
}

// TestInsecureSurfacesShown: the surfaces security.allowInsecure let
// through are in the JSON the page polls (and the page has the banner
// that shows them); a closed node sends none.
func TestInsecureSurfacesShown(t *testing.T) {
	mux := http.NewServeMux()
	New(Options{Insecure: []InsecureSurface{{Surface: "rpc", Listen: "0.0.0.0:9000"}}}).Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	get := func(path string) string {
		resp, err := http.Get(srv.URL + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return string(b)
	}
	require.Contains(t, get(Path), `"insecureSurfaces":[{"surface":"rpc","listen":"0.0.0.0:9000"}]`)
	require.Contains(t, get("/"), `id="insecure"`)
	require.Contains(t, get("/console/console.js"), "renderInsecure(data.insecureSurfaces)")
	require.NotContains(t, string(mustJSON(t, New(Options{}).gather(context.Background()))), "insecureSurfaces")
}

func mustJSON(t *testing.T, v any) []byte {
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}
