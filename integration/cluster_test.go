package integration

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/client"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
	"github.com/tessera-tsdb/tessera/ident"
)

func TestMain(m *testing.M) {
	// No goleak here: etcd's server leaves goroutines behind by design
	// until the process exits; the packages below verify their own.
	m.Run()
}

func TestClusterWriteReadMajority(t *testing.T) {
	_, nodes, _ := cluster3(t)
	d := newDataset()
	now := time.Now().UnixMilli()
	for j := 0; j < 5; j++ {
		require.NoError(t, d.write(nodes[j%3].url(), 0, 300, now-int64(5-j)*1000))
	}
	for _, n := range nodes {
		require.NoError(t, d.check(n.url(), now-60_000, now+1), "read through %s", n.cfg.ID)
		// PromQL over the cluster: every series, and the sum of the last
		// samples, as each node sees them.
		require.Equal(t, "300", promScalar(t, n.url(), "count(it_metric)", now))
		require.Equal(t, "300", promScalar(t, n.url(), "count(count_over_time(it_metric[1m]) == 5)", now))
	}
	// Each replica holds everything (RF 3 on 3 nodes): read each one's own
	// storage directly.
	for _, n := range nodes {
		res, err := n.n.DB().Query(context.Background(), "default",
			[]*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, "__name__", "it_metric")}, now-60_000, now+1, storage.QueryOptions{})
		require.NoError(t, err)
		require.Len(t, res, 300, "series on %s", n.cfg.ID)
	}
}

func TestClusterOneNodeDown(t *testing.T) {
	_, nodes, _ := cluster3(t)
	d := newDataset()
	now := time.Now().UnixMilli()
	require.NoError(t, d.write(nodes[0].url(), 0, 100, now-3000))
	nodes[2].stop()
	// Majority writes keep succeeding with one of three down.
	for j := 0; j < 3; j++ {
		require.NoError(t, d.write(nodes[j%2].url(), 0, 100, now-2000+int64(j)))
	}
	// Unstrict majority reads return everything.
	for _, n := range nodes[:2] {
		require.NoError(t, d.check(n.url(), now-60_000, now+1))
	}
	// A session at level all fails and names the missing host.
	topo := client.NewTopologyFromMap(nodes[0].n.Topology().Get())
	s, err := client.NewSession(client.Options{Topology: topo, WriteLevel: client.WriteAll, ReadLevel: client.ReadUnstrictMajority,
		HedgeAfter: 100 * time.Millisecond, RequestTimeout: 3 * time.Second, MaxBatch: 16384})
	require.NoError(t, err)
	defer s.Close()
	id := ident.FromLabels(labels.FromStrings("__name__", "it_metric", "series", "x"))
	err = s.WriteBatch(context.Background(), "default", []storage.Sample{{ID: id, Shard: ident.Shard(id, 4096), T: now, V: 1}})
	require.Error(t, err)
	require.Contains(t, err.Error(), "node3")
	require.Contains(t, err.Error(), "write consistency all not met")
}

func TestClusterSurvivesEtcdDown(t *testing.T) {
	e, nodes, _ := cluster3(t)
	d := newDataset()
	now := time.Now().UnixMilli()
	require.NoError(t, d.write(nodes[0].url(), 0, 100, now-3000))
	e.stop()
	require.NoError(t, d.write(nodes[1].url(), 0, 100, now-2000))
	require.NoError(t, d.check(nodes[2].url(), now-60_000, now+1))
	// A node restarted while etcd is down serves from its cached placement.
	nodes[1] = nodes[1].restart(t)
	eventually(t, 30*time.Second, "restarted node ready", nodes[1].ready)
	require.NoError(t, d.write(nodes[1].url(), 0, 100, now-1000))
	for _, n := range nodes {
		require.NoError(t, d.check(n.url(), now-60_000, now+1))
	}
}

// promScalar runs an instant query that yields one sample and returns its
// value as Prometheus formats it.
func promScalar(t *testing.T, base, q string, at int64) string {
	t.Helper()
	u := base + "/api/v1/query?query=" + url.QueryEscape(q) + "&time=" + strconv.FormatFloat(float64(at)/1000, 'f', 3, 64)
	resp, err := http.Get(u)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	require.Equal(t, "success", out.Status, out.Error)
	require.Len(t, out.Data.Result, 1, q)
	return out.Data.Result[0].Value[1].(string)
}

var _ = strings.Contains
