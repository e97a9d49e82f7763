package integration

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"

	"github.com/tessera-tsdb/tessera/dbnode/storage"
	"github.com/tessera-tsdb/tessera/ident"
)

// An OTLP request sent to one node of an RF 3 cluster is translated
// there and its samples take remote write's session fan-out: every
// replica's own storage holds every series, and PromQL through any node
// answers them.
func TestClusterOTLP(t *testing.T) {
	_, nodes, _ := cluster3(t)
	ts := time.Now().Add(-time.Second).Truncate(time.Millisecond)
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", "it")
	rm.Resource().Attributes().PutStr("service.instance.id", "i-1")
	rm.Resource().Attributes().PutStr("host.name", "h1")
	ms := rm.ScopeMetrics().AppendEmpty().Metrics()
	m := ms.AppendEmpty()
	m.SetName("it.queue.depth")
	gauge := m.SetEmptyGauge()
	want := map[string]float64{}
	for i := range 100 {
		dp := gauge.DataPoints().AppendEmpty()
		dp.SetTimestamp(pcommon.NewTimestampFromTime(ts))
		dp.SetDoubleValue(float64(i))
		dp.Attributes().PutStr("queue", strconv.Itoa(i))
		want[labels.FromStrings("__name__", "it_queue_depth", "instance", "i-1", "job", "it", "queue", strconv.Itoa(i)).String()] = float64(i)
	}
	c := ms.AppendEmpty()
	c.SetName("it.jobs")
	sum := c.SetEmptySum()
	sum.SetIsMonotonic(true)
	sum.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	dp := sum.DataPoints().AppendEmpty()
	dp.SetTimestamp(pcommon.NewTimestampFromTime(ts))
	dp.SetIntValue(7)
	want[labels.FromStrings("__name__", "it_jobs_total", "instance", "i-1", "job", "it").String()] = 7
	want[labels.FromStrings("__name__", "target_info", "host_name", "h1", "instance", "i-1", "job", "it").String()] = 1

	body, err := pmetricotlp.NewExportRequestFromMetrics(md).MarshalProto()
	require.NoError(t, err)
	resp, err := http.Post(nodes[0].url()+"/api/v1/otlp/v1/metrics", "application/x-protobuf", bytes.NewReader(body))
	require.NoError(t, err)
	rb, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, string(rb))
	er := pmetricotlp.NewExportResponse()
	require.NoError(t, er.UnmarshalProto(rb))
	require.Zero(t, er.PartialSuccess().RejectedDataPoints())

	from, to := ts.UnixMilli()-1, ts.UnixMilli()+1
	for _, n := range nodes {
		res, err := n.n.DB().Query(context.Background(), "default",
			[]*labels.Matcher{labels.MustNewMatcher(labels.MatchRegexp, "__name__", "it_.*|target_info")}, from, to, storage.QueryOptions{})
		require.NoError(t, err)
		got := map[string]float64{}
		for _, s := range res {
			ls, err := ident.Labels(s.ID)
			require.NoError(t, err)
			for s.Values.Next() {
				_, v := s.Values.At()
				got[ls.String()] = v
			}
			require.NoError(t, s.Values.Err())
		}
		require.Equal(t, want, got, "series on %s's own storage", n.cfg.ID)

		// And through the node's PromQL API, as Grafana reads it.
		require.Equal(t, "4950", promScalar(t, n.url(), `sum(it_queue_depth{job="it"})`, ts.UnixMilli()))
		require.Equal(t, "7", promScalar(t, n.url(), `it_jobs_total`, ts.UnixMilli()))
	}
}
