package httpapi

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
	"github.com/stretchr/testify/require"
)

func getJSON(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// Metadata sent with remote write 1.0 (WriteRequest.metadata, as
// Prometheus sends it every minute) and 2.0 (per series) is kept and
// served at /api/v1/metadata in Prometheus' shape.
func TestMetadataFromRemoteWrite(t *testing.T) {
	f, _ := newScopedFixture(t)
	now := time.Now().UnixMilli()
	raw, err := (&prompb.WriteRequest{Metadata: []prompb.MetricMetadata{
		{MetricFamilyName: "up", Type: prompb.MetricMetadata_GAUGE, Help: "Whether the target is up."},
		{MetricFamilyName: "http_request_duration_seconds", Type: prompb.MetricMetadata_HISTOGRAM, Help: "Latency.", Unit: "seconds"},
	}}).Marshal()
	require.NoError(t, err)
	code, msg := post(t, f.srv.URL+"/api/v1/prom/remote/write", snappy.Encode(nil, raw))
	require.Equal(t, http.StatusNoContent, code, msg)

	st := writev2.NewSymbolTable()
	s := writev2.TimeSeries{LabelsRefs: st.SymbolizeLabels(labels.FromStrings("__name__", "requests_total", "job", "a"), nil),
		Samples:  []writev2.Sample{{Value: 1, Timestamp: now}},
		Metadata: writev2.Metadata{Type: writev2.Metadata_METRIC_TYPE_COUNTER, HelpRef: st.Symbolize("Requests served.")}}
	resp := postAs(t, f.srv.URL+"/api/v1/write", ContentTypeV2, "snappy", v2Body(t, &st, s))
	require.Equal(t, http.StatusNoContent, resp.code, resp.body)

	code, body := getJSON(t, f.srv.URL+"/api/v1/metadata")
	require.Equal(t, http.StatusOK, code, body)
	require.JSONEq(t, `{"status":"success","data":{
		"up":[{"type":"gauge","help":"Whether the target is up.","unit":""}],
		"http_request_duration_seconds":[{"type":"histogram","help":"Latency.","unit":"seconds"}],
		"requests_total":[{"type":"counter","help":"Requests served.","unit":""}]}}`, body)

	code, body = getJSON(t, f.srv.URL+"/api/v1/metadata?metric=up")
	require.Equal(t, http.StatusOK, code, body)
	require.JSONEq(t, `{"status":"success","data":{"up":[{"type":"gauge","help":"Whether the target is up.","unit":""}]}}`, body)

	code, body = getJSON(t, f.srv.URL+"/api/v1/metadata?limit=2&limit_per_metric=1")
	require.Equal(t, http.StatusOK, code, body)
	var got struct {
		Status string
		Data   map[string][]map[string]string
	}
	require.NoError(t, json.Unmarshal([]byte(body), &got))
	require.Len(t, got.Data, 2)

	code, body = getJSON(t, f.srv.URL+"/api/v1/metadata?limit=x")
	require.Equal(t, http.StatusBadRequest, code, body)
	require.JSONEq(t, `{"status":"error","errorType":"bad_data","error":"limit must be a number"}`, body)
}

// A 1.0 request whose samples are partly refused for good (400, not
// retried) still has its exemplars and metadata kept, like its other
// samples.
func TestRemoteWriteV1KeepsExemplarsBesideRejectedSamples(t *testing.T) {
	f, _ := newScopedFixture(t)
	now := time.Now().UnixMilli()
	old := now - int64(72*time.Hour/time.Millisecond)
	good := ts("req_total", now, 1)
	good.Exemplars = []prompb.Exemplar{{Labels: []prompb.Label{{Name: "trace_id", Value: "t1"}}, Value: 1, Timestamp: now}}
	raw, err := (&prompb.WriteRequest{Timeseries: []prompb.TimeSeries{good, ts("req_total", old, 1, prompb.Label{Name: "job", Value: "old"})},
		Metadata: []prompb.MetricMetadata{{MetricFamilyName: "req_total", Type: prompb.MetricMetadata_COUNTER}}}).Marshal()
	require.NoError(t, err)
	code, msg := post(t, f.srv.URL+"/api/v1/prom/remote/write", snappy.Encode(nil, raw))
	require.Equal(t, http.StatusBadRequest, code, msg)
	require.Contains(t, msg, "out of retention")
	got := f.api.Exemplars().Select(now-1, now+1, []*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, "__name__", "req_total")})
	require.Len(t, got, 1)
	require.Equal(t, "t1", got[0].Exemplars[0].Labels.Get("trace_id"))
	require.Contains(t, f.api.meta.Query("req_total", -1, -1), "req_total")
}
