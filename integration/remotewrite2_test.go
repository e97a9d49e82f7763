package integration

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
)

// A remote write 2.0 request sent to one node of an RF 3 cluster is
// acknowledged with the written-count headers and reaches every replica,
// like a 1.0 one (the samples take the same session fan-out); its
// metadata is served through the cluster.
func TestClusterRemoteWriteV2(t *testing.T) {
	_, nodes, _ := cluster3(t)
	now := time.Now().UnixMilli()
	st := writev2.NewSymbolTable()
	req := &writev2.Request{}
	d := newDataset()
	for i := 0; i < 200; i++ {
		var b labels.ScratchBuilder
		for _, l := range seriesLabels(i) {
			b.Add(l.Name, l.Value)
		}
		s := prompb.Sample{Timestamp: now - 1000, Value: float64(i)}
		req.Timeseries = append(req.Timeseries, writev2.TimeSeries{LabelsRefs: st.SymbolizeLabels(b.Labels(), nil),
			Samples:  []writev2.Sample{{Value: s.Value, Timestamp: s.Timestamp}},
			Metadata: writev2.Metadata{Type: writev2.Metadata_METRIC_TYPE_GAUGE, HelpRef: st.Symbolize("An integration gauge.")}})
		d.series[strconv.Itoa(i)] = []prompb.Sample{s}
	}
	req.Symbols = st.Symbols()
	raw, err := req.Marshal()
	require.NoError(t, err)
	hr, err := http.NewRequest(http.MethodPost, nodes[0].url()+"/api/v1/write", bytes.NewReader(snappy.Encode(nil, raw)))
	require.NoError(t, err)
	hr.Header.Set("Content-Type", "application/x-protobuf;proto=io.prometheus.write.v2.Request")
	hr.Header.Set("Content-Encoding", "snappy")
	hr.Header.Set("X-Prometheus-Remote-Write-Version", "2.0.0")
	resp, err := http.DefaultClient.Do(hr)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusNoContent, resp.StatusCode, string(body))
	require.Equal(t, "200", resp.Header.Get("X-Prometheus-Remote-Write-Samples-Written"))
	require.Equal(t, "0", resp.Header.Get("X-Prometheus-Remote-Write-Histograms-Written"))
	require.Equal(t, "0", resp.Header.Get("X-Prometheus-Remote-Write-Exemplars-Written"))

	for _, n := range nodes {
		require.NoError(t, d.check(n.url(), now-60_000, now+1), "read through %s", n.cfg.ID)
		res, err := n.n.DB().Query(context.Background(), "default",
			[]*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, "__name__", "it_metric")}, now-60_000, now+1, storage.QueryOptions{})
		require.NoError(t, err)
		require.Len(t, res, 200, "series on %s's own storage", n.cfg.ID)
	}
	// Metadata reaches the owners of its name's shard after the samples,
	// best effort and asynchronously: poll.
	eventually(t, 30*time.Second, "metadata of it_metric", func() error {
		mresp, err := http.Get(nodes[0].url() + "/api/v1/metadata?metric=it_metric")
		if err != nil {
			return err
		}
		mb, _ := io.ReadAll(mresp.Body)
		mresp.Body.Close()
		if want := `{"status":"success","data":{"it_metric":[{"type":"gauge","help":"An integration gauge.","unit":""}]}}`; string(mb) != want {
			return fmt.Errorf("got %s, want %s", mb, want)
		}
		return nil
	})
}
