package httpapi

import (
	"bytes"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/ident"
)

// v2Body is a snappy-encoded remote write 2.0 request of series built with
// Prometheus' own v2 types and symbols table.
func v2Body(t *testing.T, st *writev2.SymbolsTable, series ...writev2.TimeSeries) []byte {
	raw, err := (&writev2.Request{Symbols: st.Symbols(), Timeseries: series}).Marshal()
	require.NoError(t, err)
	return snappy.Encode(nil, raw)
}

type v2Response struct {
	code                           int
	body                           string
	samples, histograms, exemplars string
}

func postAs(t *testing.T, url, contentType, encoding string, body []byte) v2Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	require.NoError(t, err)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if encoding != "" {
		req.Header.Set("Content-Encoding", encoding)
	}
	req.Header.Set("X-Prometheus-Remote-Write-Version", "2.0.0")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return v2Response{resp.StatusCode, string(b), resp.Header.Get(headerSamplesWritten),
		resp.Header.Get(headerHistogramsWritten), resp.Header.Get(headerExemplarsWritten)}
}

func TestRemoteWriteV2ThenRead(t *testing.T) {
	f, _ := newScopedFixture(t)
	url := f.srv.URL + "/api/v1/write"
	now := time.Now().UnixMilli()
	st := writev2.NewSymbolTable()
	a := labels.FromStrings("__name__", "up", "job", "a")
	b := labels.FromStrings("__name__", "up", "job", "b")
	for i := int64(0); i < 3; i++ { // the second and third requests hit the series cache
		st.Reset()
		resp := postAs(t, url, ContentTypeV2, "snappy", v2Body(t, &st,
			writev2.TimeSeries{LabelsRefs: st.SymbolizeLabels(a, nil), Samples: []writev2.Sample{
				{Value: float64(i), Timestamp: now - 3000 + i*1000, StartTimestamp: now - 60_000}}},
			writev2.TimeSeries{LabelsRefs: st.SymbolizeLabels(b, nil), Samples: []writev2.Sample{
				{Value: 1, Timestamp: now - 3000 + i*1000}, {Value: 2, Timestamp: now - 2500 + i*1000}}}))
		require.Equal(t, http.StatusNoContent, resp.code, resp.body)
		require.Equal(t, v2Response{code: 204, samples: "3", histograms: "0", exemplars: "0"}, resp)
	}
	require.Equal(t, []int64{now - 3000, now - 2000, now - 1000}, readIDs(t, f, ident.FromLabels(a), now-10_000, now+1))
	require.Equal(t, []int64{now - 3000, now - 2500, now - 2000, now - 1500, now - 1000, now - 500},
		readIDs(t, f, ident.FromLabels(b), now-10_000, now+1))
	require.Equal(t, 2, f.api.seriesV2.len(), "2.0 series are cached by ID")
	require.Equal(t, 0, f.api.series.len())
}

// The 1.0 content types still mean 1.0, and what we do not speak is 415,
// so that a 2.0 sender falls back.
func TestRemoteWriteNegotiation(t *testing.T) {
	f, scope := newScopedFixture(t)
	url := f.srv.URL + "/api/v1/prom/remote/write"
	now := time.Now().UnixMilli()
	v1 := writeBody(t, ts("up", now, 1))
	for _, ct := range []string{"", "application/x-protobuf", "application/x-protobuf;proto=prometheus.WriteRequest", "application/x-protobuf; proto=prometheus.WriteRequest"} {
		resp := postAs(t, url, ct, "snappy", v1)
		require.Equal(t, http.StatusNoContent, resp.code, "%q: %s", ct, resp.body)
		require.Empty(t, resp.samples, "1.0 answers carry no 2.0 headers")
	}
	for _, tc := range []struct{ ct, enc, want string }{
		{"application/x-protobuf;proto=io.prometheus.write.v3.Request", "snappy", "unsupported remote write message"},
		{"application/json", "snappy", "unsupported Content-Type"},
		{ContentTypeV2, "zstd", "unsupported Content-Encoding"},
		{"application/x-protobuf", "gzip", "unsupported Content-Encoding"},
	} {
		resp := postAs(t, url, tc.ct, tc.enc, v1)
		require.Equal(t, http.StatusUnsupportedMediaType, resp.code, "%q %q: %s", tc.ct, tc.enc, resp.body)
		require.Contains(t, resp.body, tc.want)
	}
	require.Equal(t, int64(4), counterValue(scope, "remote_write_errors", map[string]string{"reason": "unsupported_media_type"}))
	// A 1.0 body sent as 2.0 is a 400 saying so.
	resp := postAs(t, url, ContentTypeV2, "snappy", v1)
	require.Equal(t, http.StatusBadRequest, resp.code, resp.body)
	require.Contains(t, resp.body, "1.0 body sent as 2.0")
	require.Equal(t, "0", resp.samples)

	// The spec says symbols[0] MUST be "": a body breaking it is a 400,
	// nothing of it stored.
	raw, err := (&writev2.Request{Symbols: []string{"up", "__name__", "bad"},
		Timeseries: []writev2.TimeSeries{{LabelsRefs: []uint32{1, 2}, Samples: []writev2.Sample{{Value: 1, Timestamp: now}}}}}).Marshal()
	require.NoError(t, err)
	resp = postAs(t, url, ContentTypeV2, "snappy", snappy.Encode(nil, raw))
	require.Equal(t, http.StatusBadRequest, resp.code, resp.body)
	require.Contains(t, resp.body, `symbols[0] is "up"`)
	require.Equal(t, "0", resp.samples)
}

// Native histograms in a 2.0 request to a backend that does not store
// them are refused with 400 naming them; the floats and exemplars beside
// them are written, and the headers say exactly what was (the spec's
// partial write).
func TestRemoteWriteV2PartialWrite(t *testing.T) {
	f, scope := newScopedFixture(t)
	f.state.serve(floatsOnly{Local{DB: f.db}})
	url := f.srv.URL + "/api/v1/prom/remote/write"
	now := time.Now().UnixMilli()
	st := writev2.NewSymbolTable()
	fl := labels.FromStrings("__name__", "requests_total", "job", "a")
	h := writev2.TimeSeries{LabelsRefs: st.SymbolizeLabels(labels.FromStrings("__name__", "latency_seconds"), nil),
		Histograms: []writev2.Histogram{writev2.FromIntHistogram(0, now, &histogram.Histogram{Count: 2, Sum: 1,
			PositiveSpans: []histogram.Span{{Length: 1}}, PositiveBuckets: []int64{2}})}}
	floats := writev2.TimeSeries{LabelsRefs: st.SymbolizeLabels(fl, nil), Samples: []writev2.Sample{{Value: 5, Timestamp: now}},
		Exemplars: []writev2.Exemplar{{LabelsRefs: st.SymbolizeLabels(labels.FromStrings("trace_id", "abc"), nil), Value: 5, Timestamp: now}}}
	resp := postAs(t, url, ContentTypeV2, "snappy", v2Body(t, &st, floats, h))
	require.Equal(t, http.StatusBadRequest, resp.code, resp.body)
	require.Contains(t, resp.body, "1 native histogram samples (first in timeseries 1) not written: not supported yet")
	require.Equal(t, "1", resp.samples)
	require.Equal(t, "0", resp.histograms)
	require.Equal(t, "1", resp.exemplars)
	require.Equal(t, int64(1), counterValue(scope, "remote_write_errors", map[string]string{"reason": "native_histograms"}))
	require.Equal(t, []int64{now}, readIDs(t, f, ident.FromLabels(fl), now-10_000, now+1))

	// Too old for the namespace: refused, and the headers count only what
	// was written.
	st.Reset()
	old := now - int64(72*time.Hour/time.Millisecond)
	resp = postAs(t, url, ContentTypeV2, "snappy", v2Body(t, &st, writev2.TimeSeries{LabelsRefs: st.SymbolizeLabels(fl, nil),
		Samples: []writev2.Sample{{Value: 1, Timestamp: old}, {Value: 6, Timestamp: now + 1}}}))
	require.Equal(t, http.StatusBadRequest, resp.code, resp.body)
	require.Contains(t, resp.body, "out of retention")
	require.Equal(t, "1", resp.samples)
	require.Equal(t, []int64{now, now + 1}, readIDs(t, f, ident.FromLabels(fl), old-1, now+2))
}

// The 2.0 cache knows a series by its label strings, not the symbol
// references a request spells them with: a series sent again through
// other references (another request's symbols table, duplicate symbols)
// is a hit on its own entry, a series whose strings differ by one label
// is another series, and labels sent out of order are a miss (their ID is
// built) that still writes to the same series.
func TestRemoteWriteV2CacheKnowsSeriesByStrings(t *testing.T) {
	f, scope := newScopedFixture(t)
	url := f.srv.URL + "/api/v1/write"
	now := time.Now().UnixMilli()
	post := func(syms []string, refs ...[]uint32) {
		t.Helper()
		var series []writev2.TimeSeries
		for _, r := range refs {
			series = append(series, writev2.TimeSeries{LabelsRefs: r, Samples: []writev2.Sample{{Value: 1, Timestamp: now}}})
		}
		raw, err := (&writev2.Request{Symbols: syms, Timeseries: series}).Marshal()
		require.NoError(t, err)
		resp := postAs(t, url, ContentTypeV2, "snappy", snappy.Encode(nil, raw))
		require.Equal(t, http.StatusNoContent, resp.code, resp.body)
		now++
	}
	hits := func() int64 { return counterValue(scope, "remote_write_series_cache_hits", nil) }
	a := ident.FromLabels(labels.FromStrings("__name__", "up", "job", "a"))
	b := ident.FromLabels(labels.FromStrings("__name__", "up", "job", "b"))
	post([]string{"", "__name__", "up", "job", "a", "b"}, []uint32{1, 2, 3, 4}, []uint32{1, 2, 3, 5})
	require.Zero(t, hits())
	// Other symbols, the same strings: two hits, each on its series.
	post([]string{"", "b", "job", "up", "__name__", "a", "job"}, []uint32{4, 3, 6, 5}, []uint32{4, 3, 2, 1})
	require.EqualValues(t, 2, hits())
	// Unsorted labels: a miss, the same series.
	post([]string{"", "job", "a", "__name__", "up"}, []uint32{1, 2, 3, 4})
	require.EqualValues(t, 2, hits())
	// A label of another value is another series.
	c := ident.FromLabels(labels.FromStrings("__name__", "up", "job", "c"))
	post([]string{"", "__name__", "up", "job", "c"}, []uint32{1, 2, 3, 4})
	require.EqualValues(t, 2, hits())
	t0 := now - 4
	require.Equal(t, []int64{t0, t0 + 1, t0 + 2}, readIDs(t, f, a, t0-1, now))
	require.Equal(t, []int64{t0, t0 + 1}, readIDs(t, f, b, t0-1, now))
	require.Equal(t, []int64{t0 + 3}, readIDs(t, f, c, t0-1, now))
}
