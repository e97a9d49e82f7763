package integration

import (
	"bytes"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/prompb"
	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/config"
)

// TestClusterActiveSeriesLimit: in a cluster, replicas at
// limits.maxActiveSeries refuse new series and the coordinator answers 429
// naming the limit (not 2xx, not a permanent 400), while the samples of
// series the replicas hold are still written at the write level.
func TestClusterActiveSeriesLimit(t *testing.T) {
	_, nodes, _ := clusterNWith(t, 3, func(c *config.Config) { c.Limits.MaxActiveSeries = 10 })
	d := newDataset()
	now := time.Now().UnixMilli()
	require.NoError(t, d.write(nodes[0].url(), 0, 10, now-2000))

	// The 10 held series and one new one, through another coordinator.
	req := &prompb.WriteRequest{}
	for i := 0; i < 11; i++ {
		req.Timeseries = append(req.Timeseries, prompb.TimeSeries{Labels: seriesLabels(i),
			Samples: []prompb.Sample{{Timestamp: now - 1000, Value: float64(i)}}})
	}
	raw, err := req.Marshal()
	require.NoError(t, err)
	resp, err := http.Post(nodes[1].url()+"/api/v1/prom/remote/write", "application/x-protobuf", bytes.NewReader(snappy.Encode(nil, raw)))
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, string(body))
	require.Contains(t, string(body), "limits.maxActiveSeries=10")
	require.Contains(t, string(body), `series="10"`)

	// The held series got their second sample on every node's read.
	d.mu.Lock()
	for i := 0; i < 10; i++ {
		k := seriesLabels(i)[2].Value
		d.series[k] = append(d.series[k], req.Timeseries[i].Samples...)
	}
	d.mu.Unlock()
	for _, n := range nodes {
		require.NoError(t, d.check(n.url(), now-60_000, now+1), "read through %s", n.cfg.ID)
		require.EqualValues(t, 10, n.n.DB().ActiveSeries(), "series on %s", n.cfg.ID)
	}
}
