package httpapi

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/model/exemplar"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"
	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/dbnode/exemplars"
	"github.com/tessera-tsdb/tessera/dbnode/metadata"
)

// auxLocal is a cluster backend as httpapi sees one (client.Session):
// Local for samples, and what it was handed for exemplars and metadata.
type auxLocal struct {
	Local
	mu   sync.Mutex
	ex   []exemplars.Item
	meta []metadata.Record
}

func (b *auxLocal) WriteExemplars(items []exemplars.Item) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.ex = append(b.ex, items...)
	return len(items)
}

func (b *auxLocal) WriteMetadata(rs []metadata.Record) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.meta = append(b.meta, rs...)
}

func (b *auxLocal) QueryExemplars(context.Context, int64, int64, [][]*labels.Matcher) ([]exemplar.QueryResult, []string, error) {
	return nil, []string{"from the cluster"}, nil
}

func (b *auxLocal) QueryMetadata(context.Context, string, int, int) (map[string][]metadata.Entry, []string, error) {
	return map[string][]metadata.Entry{"from_cluster": {{Type: "gauge"}}}, []string{"node2 did not answer"}, nil
}

// TestAuxHandedToClusterBackend: with a backend that carries exemplars
// and metadata, remote write 1.0 and OTLP hand them over (not to this
// node's stores), metadata forwarded once until it changes, and the
// query endpoints answer from the backend with its warnings.
func TestAuxHandedToClusterBackend(t *testing.T) {
	f := newFixture(t, 0)
	b := &auxLocal{Local: Local{DB: f.db}}
	f.state.serve(b)
	now := time.Now().UnixMilli()
	body := func() []byte {
		raw, err := (&prompb.WriteRequest{
			Timeseries: []prompb.TimeSeries{{Labels: []prompb.Label{{Name: "__name__", Value: "req_total"}},
				Samples:   []prompb.Sample{{Timestamp: now, Value: 1}},
				Exemplars: []prompb.Exemplar{{Labels: []prompb.Label{{Name: "trace_id", Value: "abc"}}, Value: 1, Timestamp: now}}}},
			Metadata: []prompb.MetricMetadata{{MetricFamilyName: "req_total", Type: prompb.MetricMetadata_COUNTER, Help: "Requests."}},
		}).Marshal()
		require.NoError(t, err)
		return snappy.Encode(nil, raw)
	}
	for range 2 {
		resp, err := http.Post(f.srv.URL+"/api/v1/prom/remote/write", "application/x-protobuf", bytes.NewReader(body()))
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusNoContent, resp.StatusCode)
	}
	require.Len(t, b.ex, 2, "exemplars are handed over with every request")
	require.Equal(t, "abc", b.ex[0].Labels.Get("trace_id"))
	require.Equal(t, []metadata.Record{{Metric: "req_total", Entry: metadata.Entry{Type: "counter", Help: "Requests."}}}, b.meta,
		"unchanged metadata is forwarded once per resend period")
	require.Zero(t, f.api.Exemplars().Len(), "not kept in this node's store: the owners keep them")
	require.Zero(t, f.api.Metadata().Len())

	ts := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	postOTLP(t, f.srv.URL, otlpProto, "", otlpBody(t, otlpMetrics(ts), false, false)).response(t)
	require.Len(t, b.ex, 3, "OTLP's exemplar too")
	require.Greater(t, len(b.meta), 1, "OTLP's metadata too")

	resp, err := http.Get(f.srv.URL + "/api/v1/metadata")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.JSONEq(t, `{"status":"success","data":{"from_cluster":[{"type":"gauge","help":"","unit":""}]},"warnings":["node2 did not answer"]}`, string(must(io.ReadAll(resp.Body))))
	_, warns, err := f.api.QueryExemplars(context.Background(), 0, 1, nil)
	require.NoError(t, err)
	require.Equal(t, []string{"from the cluster"}, warns)
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
