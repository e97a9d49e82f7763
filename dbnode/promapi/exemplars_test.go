package promapi

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/dbnode/httpapi"
	"github.com/tessera-tsdb/tessera/dbnode/httpapi/httpapitest"
	"github.com/tessera-tsdb/tessera/dbnode/storage/storagetest"
)

// Exemplars sent with remote write 1.0 and 2.0 are served at
// /api/v1/query_exemplars in Prometheus' shape, what Grafana reads.
func TestQueryExemplarsFromRemoteWrite(t *testing.T) {
	db := storagetest.Open(t, 64, nil)
	h := httpapitest.New(t, httpapi.Options{Namespace: "default", NumShards: 64, Backend: httpapi.Local{DB: db}})
	newAPI(t, httpapi.Deferred{API: h}, Options{Exemplars: h}).Register(h.Mux())
	srv := httptest.NewServer(h.Handler())
	t.Cleanup(srv.Close)
	now := time.Now().Truncate(time.Second).UnixMilli()
	post := func(contentType string, raw []byte) *http.Response {
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/api/v1/write", bytes.NewReader(snappy.Encode(nil, raw)))
		require.NoError(t, err)
		req.Header.Set("Content-Type", contentType)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp
	}

	v1, err := (&prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{
		Labels:  []prompb.Label{{Name: "__name__", Value: "requests_total"}, {Name: "job", Value: "a"}},
		Samples: []prompb.Sample{{Timestamp: now - 2000, Value: 10}},
		Exemplars: []prompb.Exemplar{{Labels: []prompb.Label{{Name: "trace_id", Value: "abc"}},
			Value: 1.5, Timestamp: now - 2500}},
	}}}).Marshal()
	require.NoError(t, err)
	require.Equal(t, http.StatusNoContent, post("application/x-protobuf", v1).StatusCode)

	st := writev2.NewSymbolTable()
	v2, err := (&writev2.Request{Timeseries: []writev2.TimeSeries{
		{LabelsRefs: st.SymbolizeLabels(labels.FromStrings("__name__", "requests_total", "job", "a"), nil),
			Samples:   []writev2.Sample{{Value: 11, Timestamp: now - 1000}},
			Exemplars: []writev2.Exemplar{{LabelsRefs: st.SymbolizeLabels(labels.FromStrings("trace_id", "def"), nil), Value: 2, Timestamp: now - 1000}}},
		{LabelsRefs: st.SymbolizeLabels(labels.FromStrings("__name__", "requests_total", "job", "b"), nil),
			Samples:   []writev2.Sample{{Value: 1, Timestamp: now - 1000}},
			Exemplars: []writev2.Exemplar{{LabelsRefs: st.SymbolizeLabels(labels.FromStrings("trace_id", "xyz"), nil), Value: 3, Timestamp: now - 1000}}},
	}, Symbols: st.Symbols()}).Marshal()
	require.NoError(t, err)
	resp := post(httpapi.ContentTypeV2, v2)
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
	require.Equal(t, "2", resp.Header.Get("X-Prometheus-Remote-Write-Exemplars-Written"))
	require.Equal(t, "2", resp.Header.Get("X-Prometheus-Remote-Write-Samples-Written"))

	get := func(q url.Values) (int, string) {
		resp, err := http.Get(srv.URL + "/api/v1/query_exemplars?" + q.Encode())
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(b)
	}
	sec := func(ms int64) string { return time.UnixMilli(ms).UTC().Format(time.RFC3339Nano) }
	code, body := get(url.Values{"query": {`sum(rate(requests_total{job="a"}[5m]))`}, "start": {sec(now - 60_000)}, "end": {sec(now)}})
	require.Equal(t, http.StatusOK, code, body)
	require.JSONEq(t, `{"status":"success","data":[{"seriesLabels":{"__name__":"requests_total","job":"a"},"exemplars":[
		{"labels":{"trace_id":"abc"},"value":"1.5","timestamp":`+string(appendTimestamp(nil, now-2500))+`},
		{"labels":{"trace_id":"def"},"value":"2","timestamp":`+string(appendTimestamp(nil, now-1000))+`}]}]}`, body)

	code, body = get(url.Values{"query": {`requests_total`}, "start": {sec(now - 1500)}})
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, `"trace_id":"def"`)
	require.Contains(t, body, `"trace_id":"xyz"`)
	require.NotContains(t, body, `"trace_id":"abc"`)

	code, body = get(url.Values{"query": {`requests_total{`}})
	require.Equal(t, http.StatusBadRequest, code, body)
	require.Contains(t, body, `"errorType":"bad_data"`)
	code, body = get(url.Values{"query": {`up`}, "start": {"10"}, "end": {"5"}})
	require.Equal(t, http.StatusBadRequest, code, body)
	require.Contains(t, body, "end timestamp must not be before start timestamp")
}
