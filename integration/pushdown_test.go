package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/config"
	"github.com/tessera-tsdb/tessera/dbnode/rpc"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
	"github.com/tessera-tsdb/tessera/ident"
)

// TestClusterPushdown: through every node of a three-node RF 3 cluster
// (query.pushdown on, its default),
// aggregations are computed by the replicas (Push: partial aggregates
// over RPC, digests compared at majority), and so are the step values of
// a query without one, and answer as the plain engine
// over the raw series does (stats=all turns the pushdown off), and the
// session says it pushed them down.
func TestClusterPushdown(t *testing.T) {
	_, nodes, c := clusterNWith(t, 3, func(c *config.Config) {
		off := false
		c.Repair.Enabled = &off // the replicas made to differ below stay so
	})
	d := newDataset()
	now := time.Now().UnixMilli()
	for j := 0; j < 6; j++ {
		require.NoError(t, d.write(nodes[j%3].url(), 0, 200, now-int64(6-j)*10_000))
	}
	// A write is acknowledged at majority: until the third replica holds it
	// too, replicas' digests may differ and a query rightly falls back to
	// raw series. Wait for every replica, so that every query pushes down.
	for _, n := range nodes {
		in := instanceOf(t, c, n.cfg.ID)
		eventually(t, 60*time.Second, n.cfg.ID+" holds every sample", func() error {
			_, err := replicaHolds(rpc.ClientOptions{}, in, 4096, d)
			return err
		})
	}
	queries := []string{
		`count(it_metric)`,
		`sum by (job) (it_metric)`,
		`avg(it_metric)`,
		`count by (job) (count_over_time(it_metric[1m]))`,
		`sum(rate(it_metric[1m]))`,
		`group by (job) (it_metric)`,
		// Without an aggregation: each series' step values.
		`rate(it_metric[1m])`,
		`it_metric`,
		`max_over_time(it_metric[30s]) * 2`,
		`min by (job) (it_metric)`,
		// Candidates only. Over values without ties: where several series
		// tie at the k-th value the one kept depends on series order, and
		// the pushdown hands the engine series sorted by labels (the order
		// of Prometheus' own storage), the raw read its merge order.
		`bottomk(3, it_metric)`,
	}
	for _, n := range nodes {
		for _, q := range queries {
			p := url.Values{"query": {q}, "start": {ms(now - 40_000)}, "end": {ms(now)}, "step": {"5"}}
			pushed := queryResult(t, n.url(), p)
			p.Set("stats", "all")
			require.JSONEq(t, queryResult(t, n.url(), p), pushed, "%s through %s", q, n.cfg.ID)
		}
	}
	eventually(t, 60*time.Second, "pushdowns counted", func() error {
		v, err := metricValue(nodes[0].url(), "tessera_session_read_pushdown")
		if err != nil {
			return err
		}
		if v < float64(len(queries)) {
			return fmt.Errorf("%v pushdowns, want >= %d", v, len(queries))
		}
		return nil
	})

	// A sample of every series on node1 and node3 but not node2: the
	// shards' parts asked of node2 and another replica disagree and are
	// read raw (every pair of replicas holds the sample once), the others
	// stay pushed down; the answers are the raw engine's still.
	var extra []storage.Sample
	for i := 0; i < 200; i++ {
		id := ident.FromLabels(labels.New(seriesLabelsOf(i)...))
		extra = append(extra, storage.Sample{ID: id, Shard: ident.Shard(id, 4096), T: now - 5000, V: float64(i)})
	}
	for _, n := range []*tnode{nodes[0], nodes[2]} {
		rc, err := rpc.Dial(instanceOf(t, c, n.cfg.ID).Endpoint, rpc.ClientOptions{Timeout: 30 * time.Second})
		require.NoError(t, err)
		_, err = rc.WriteBatch(context.Background(), "default", extra)
		require.NoError(t, rc.Close())
		require.NoError(t, err, "write to %s alone", n.cfg.ID)
	}
	for _, n := range nodes {
		for _, q := range queries {
			p := url.Values{"query": {q}, "start": {ms(now - 40_000)}, "end": {ms(now)}, "step": {"5"}}
			pushed := queryResult(t, n.url(), p)
			p.Set("stats", "all")
			require.JSONEq(t, queryResult(t, n.url(), p), pushed, "%s through %s, node2 missing a sample", q, n.cfg.ID)
		}
	}
	eventually(t, 60*time.Second, "disagreements counted", func() error {
		v, err := metricValue(nodes[0].url(), "tessera_session_pushdown_disagreements")
		if err != nil {
			return err
		}
		if v == 0 {
			return fmt.Errorf("no disagreement counted")
		}
		return nil
	})
}

// seriesLabelsOf is seriesLabels(i) as Prometheus labels.
func seriesLabelsOf(i int) []labels.Label {
	var out []labels.Label
	for _, l := range seriesLabels(i) {
		out = append(out, labels.Label{Name: l.Name, Value: l.Value})
	}
	return out
}

func ms(t int64) string { return strconv.FormatFloat(float64(t)/1000, 'f', 3, 64) }

// queryResult is a range query's data.result as JSON.
func queryResult(t *testing.T, base string, p url.Values) string {
	t.Helper()
	resp, err := http.Get(base + "/api/v1/query_range?" + p.Encode())
	require.NoError(t, err)
	defer resp.Body.Close()
	var out struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result json.RawMessage `json:"result"`
		} `json:"data"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	require.Equal(t, "success", out.Status, out.Error)
	require.NotEqual(t, "[]", string(out.Data.Result), "%v: no data", p)
	return string(out.Data.Result)
}

// metricValue is the sum of a metric's samples on a node's /metrics (a
// counter's name with or without the _total suffix).
func metricValue(base, name string) (float64, error) {
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	var sum float64
	for _, m := range regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(name)+`(?:_total)?(?:\{[^}]*\})? (\S+)$`).FindAllSubmatch(b, -1) {
		v, err := strconv.ParseFloat(string(m[1]), 64)
		if err != nil {
			return 0, err
		}
		sum += v
	}
	return sum, nil
}
