package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/config"
	"github.com/tessera-tsdb/tessera/dbnode/rpc"
)

// TestClusterPushdown: through every node of a three-node RF 3 cluster
// with query.pushdown on,
// aggregations are computed by the replicas (Push: partial aggregates
// over RPC, digests compared at majority) and answer as the plain engine
// over the raw series does (stats=all turns the pushdown off), and the
// session says it pushed them down.
func TestClusterPushdown(t *testing.T) {
	_, nodes, c := clusterNWith(t, 3, func(c *config.Config) { c.Query.Pushdown = true })
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
