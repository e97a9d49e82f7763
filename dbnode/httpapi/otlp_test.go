package httpapi

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	promstorage "github.com/prometheus/prometheus/storage"
	otlptranslator "github.com/prometheus/prometheus/storage/remote/otlptranslator/prometheusremotewrite"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/tessera-tsdb/tessera/dbnode/metadata"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
	"github.com/tessera-tsdb/tessera/ident"
	"github.com/tessera-tsdb/tessera/limits"
	"github.com/tessera-tsdb/tessera/limits/limitstest"
)

const otlpPath = "/api/v1/otlp/v1/metrics"

// otlpResource starts a pmetric.Metrics with one resource (service
// shop/api, instance i-1, host h1) and one instrumentation scope.
func otlpResource() (pmetric.Metrics, pmetric.MetricSlice) {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	attrs := rm.Resource().Attributes()
	attrs.PutStr("service.name", "api")
	attrs.PutStr("service.namespace", "shop")
	attrs.PutStr("service.instance.id", "i-1")
	attrs.PutStr("host.name", "h1")
	sm := rm.ScopeMetrics().AppendEmpty()
	sm.Scope().SetName("checkout")
	sm.Scope().SetVersion("1.2.3")
	return md, sm.Metrics()
}

// otlpMetrics is what an OpenTelemetry SDK sends: a monotonic cumulative
// sum (with an exemplar), a gauge in bytes and an explicit-bucket
// histogram in seconds, at ts.
func otlpMetrics(ts time.Time) pmetric.Metrics {
	md, ms := otlpResource()
	start := pcommon.NewTimestampFromTime(ts.Add(-time.Minute))
	now := pcommon.NewTimestampFromTime(ts)

	m := ms.AppendEmpty()
	m.SetName("http.server.requests")
	m.SetUnit("1")
	m.SetDescription("Requests served.")
	sum := m.SetEmptySum()
	sum.SetIsMonotonic(true)
	sum.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	dp := sum.DataPoints().AppendEmpty()
	dp.SetStartTimestamp(start)
	dp.SetTimestamp(now)
	dp.SetDoubleValue(42)
	dp.Attributes().PutStr("method", "GET")
	ex := dp.Exemplars().AppendEmpty()
	ex.SetTimestamp(now)
	ex.SetDoubleValue(1)
	ex.SetTraceID(pcommon.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})
	ex.SetSpanID(pcommon.SpanID{1, 2, 3, 4, 5, 6, 7, 8})

	m = ms.AppendEmpty()
	m.SetName("process.memory.usage")
	m.SetUnit("By")
	g := m.SetEmptyGauge().DataPoints().AppendEmpty()
	g.SetTimestamp(now)
	g.SetIntValue(1 << 20)

	m = ms.AppendEmpty()
	m.SetName("http.server.duration")
	m.SetUnit("s")
	h := m.SetEmptyHistogram()
	h.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	hp := h.DataPoints().AppendEmpty()
	hp.SetStartTimestamp(start)
	hp.SetTimestamp(now)
	hp.ExplicitBounds().FromRaw([]float64{0.1, 1})
	hp.BucketCounts().FromRaw([]uint64{1, 2, 3})
	hp.SetCount(6)
	hp.SetSum(5.5)
	return md
}

// addExponential adds an exponential histogram of n data points.
func addExponential(ms pmetric.MetricSlice, ts time.Time, n int) {
	m := ms.AppendEmpty()
	m.SetName("rpc.latency")
	m.SetUnit("ms")
	eh := m.SetEmptyExponentialHistogram()
	eh.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	for i := range n {
		dp := eh.DataPoints().AppendEmpty()
		dp.SetTimestamp(pcommon.NewTimestampFromTime(ts.Add(time.Duration(i) * time.Second)))
		dp.SetScale(2)
		dp.SetCount(3)
		dp.SetSum(7)
		dp.Positive().BucketCounts().FromRaw([]uint64{1, 2})
	}
}

func otlpBody(t testing.TB, md pmetric.Metrics, asJSON, gz bool) []byte {
	t.Helper()
	req := pmetricotlp.NewExportRequestFromMetrics(md)
	var b []byte
	var err error
	if asJSON {
		b, err = req.MarshalJSON()
	} else {
		b, err = req.MarshalProto()
	}
	require.NoError(t, err)
	if gz {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		_, err = zw.Write(b)
		require.NoError(t, err)
		require.NoError(t, zw.Close())
		b = buf.Bytes()
	}
	return b
}

type otlpAnswer struct {
	code        int
	contentType string
	body        []byte
}

func postOTLP(t *testing.T, url, contentType, encoding string, body []byte) otlpAnswer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+otlpPath, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", contentType)
	if encoding != "" {
		req.Header.Set("Content-Encoding", encoding)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return otlpAnswer{resp.StatusCode, resp.Header.Get("Content-Type"), b}
}

// response decodes a 200's ExportMetricsServiceResponse.
func (a otlpAnswer) response(t *testing.T) pmetricotlp.ExportResponse {
	t.Helper()
	require.Equal(t, http.StatusOK, a.code, string(a.body))
	resp := pmetricotlp.NewExportResponse()
	if a.contentType == otlpJSON {
		require.NoError(t, resp.UnmarshalJSON(a.body))
	} else {
		require.Equal(t, otlpProto, a.contentType)
		require.NoError(t, resp.UnmarshalProto(a.body))
	}
	return resp
}

// status decodes an error's google.rpc.Status.
func (a otlpAnswer) status(t *testing.T, code int) *status.Status {
	t.Helper()
	require.Equal(t, code, a.code, string(a.body))
	s := &status.Status{}
	if a.contentType == otlpJSON {
		require.NoError(t, protojson.Unmarshal(a.body, s), string(a.body))
	} else {
		require.Equal(t, otlpProto, a.contentType)
		require.NoError(t, proto.Unmarshal(a.body, s), string(a.body))
	}
	return s
}

// stored reads every series the database holds in [from, to] as its
// label set and values.
func stored(t *testing.T, db *storage.Database, from, to int64) map[string][]float64 {
	t.Helper()
	its, err := db.Query(context.Background(), "default",
		[]*labels.Matcher{labels.MustNewMatcher(labels.MatchRegexp, "__name__", ".+")}, from, to, storage.QueryOptions{})
	require.NoError(t, err)
	out := map[string][]float64{}
	for _, it := range its {
		ls, err := ident.Labels(it.ID)
		require.NoError(t, err)
		var vs []float64
		for it.Values.Next() {
			_, v := it.Values.At()
			vs = append(vs, v)
		}
		require.NoError(t, it.Values.Err())
		if len(vs) > 0 {
			out[ls.String()] = vs
		}
	}
	return out
}

// What Prometheus 3's OTLP receiver makes of otlpMetrics with its default
// configuration: _total on the counter, the unit as a suffix (By ->
// bytes, s -> seconds, "1" on a counter -> nothing), job and instance
// from the service attributes, the other resource attributes on
// target_info, scope metadata not promoted.
var otlpWant = map[string][]float64{
	`{__name__="http_server_requests_total", instance="i-1", job="shop/api", method="GET"}`:       {42},
	`{__name__="process_memory_usage_bytes", instance="i-1", job="shop/api"}`:                     {1 << 20},
	`{__name__="http_server_duration_seconds_bucket", instance="i-1", job="shop/api", le="0.1"}`:  {1},
	`{__name__="http_server_duration_seconds_bucket", instance="i-1", job="shop/api", le="1"}`:    {3},
	`{__name__="http_server_duration_seconds_bucket", instance="i-1", job="shop/api", le="+Inf"}`: {6},
	`{__name__="http_server_duration_seconds_sum", instance="i-1", job="shop/api"}`:               {5.5},
	`{__name__="http_server_duration_seconds_count", instance="i-1", job="shop/api"}`:             {6},
	`{__name__="target_info", host_name="h1", instance="i-1", job="shop/api"}`:                    {1},
}

func TestOTLPWriteThenRead(t *testing.T) {
	for _, tc := range []struct {
		name       string
		asJSON, gz bool
	}{{"protobuf", false, false}, {"protobuf gzip", false, true}, {"json", true, false}, {"json gzip", true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			f, _ := newScopedFixture(t)
			ts := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
			ct, enc := otlpProto, ""
			if tc.asJSON {
				ct = otlpJSON
			}
			if tc.gz {
				enc = "gzip"
			}
			resp := postOTLP(t, f.srv.URL, ct, enc, otlpBody(t, otlpMetrics(ts), tc.asJSON, tc.gz)).response(t)
			require.Zero(t, resp.PartialSuccess().RejectedDataPoints())
			require.Empty(t, resp.PartialSuccess().ErrorMessage())

			got := stored(t, f.db, ts.UnixMilli()-1, ts.UnixMilli()+1)
			require.Equal(t, otlpWant, got)

			// Metadata under the metric family name, as Prometheus keeps it.
			meta := f.api.meta.Query("", -1, -1)
			require.Equal(t, []metadata.Entry{{Type: model.MetricTypeCounter, Help: "Requests served.", Unit: ""}}, meta["http_server_requests_total"])
			require.Equal(t, []metadata.Entry{{Type: model.MetricTypeGauge, Unit: "bytes"}}, meta["process_memory_usage_bytes"])
			require.Equal(t, []metadata.Entry{{Type: model.MetricTypeHistogram, Unit: "seconds"}}, meta["http_server_duration_seconds"])

			// The exemplar, with its trace and span IDs as labels.
			exs := f.api.ex.Select(ts.UnixMilli()-1, ts.UnixMilli()+1,
				[]*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, "__name__", "http_server_requests_total")})
			require.Len(t, exs, 1)
			require.Len(t, exs[0].Exemplars, 1)
			require.Equal(t, "0102030405060708090a0b0c0d0e0f10", exs[0].Exemplars[0].Labels.Get("trace_id"))
			require.Equal(t, "0102030405060708", exs[0].Exemplars[0].Labels.Get("span_id"))
		})
	}
}

// Exponential histograms become native histograms in Prometheus, which a
// backend that does not store them (a cluster session with replicas, for
// now) reports as rejected data points in an OTLP partial success (200,
// the rest written); alone, the request is refused with 400.
func TestOTLPExponentialHistogramsRefused(t *testing.T) {
	f, scope := newScopedFixture(t)
	f.state.serve(floatsOnly{Local{DB: f.db}})
	ts := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	md := otlpMetrics(ts)
	addExponential(md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics(), ts, 2)
	for _, asJSON := range []bool{false, true} {
		ct := otlpProto
		if asJSON {
			ct = otlpJSON
		}
		ans := postOTLP(t, f.srv.URL, ct, "", otlpBody(t, md, asJSON, false))
		require.Equal(t, ct, ans.contentType)
		ps := ans.response(t).PartialSuccess()
		require.EqualValues(t, 2, ps.RejectedDataPoints())
		require.Contains(t, ps.ErrorMessage(), `2 exponential histogram data points (first of metric "rpc.latency") not written`)
		require.Contains(t, ps.ErrorMessage(), "native histograms, which this node does not store yet")
	}
	require.Equal(t, otlpWant, stored(t, f.db, ts.UnixMilli()-1, ts.UnixMilli()+1))

	// Only exponential histograms: nothing stored, so no success at all.
	md, ms := otlpResource()
	addExponential(ms, ts.Add(-time.Hour), 3)
	for _, asJSON := range []bool{false, true} {
		ct := otlpProto
		if asJSON {
			ct = otlpJSON
		}
		s := postOTLP(t, f.srv.URL, ct, "gzip", otlpBody(t, md, asJSON, true)).status(t, http.StatusBadRequest)
		require.EqualValues(t, 3, s.Code) // INVALID_ARGUMENT
		require.Contains(t, s.Message, `3 exponential histogram data points (first of metric "rpc.latency") not written`)
	}
	require.Empty(t, stored(t, f.db, ts.Add(-2*time.Hour).UnixMilli(), ts.Add(-time.Hour+time.Minute).UnixMilli()))
	// Two partial successes and two refusals.
	require.EqualValues(t, 4, counterValue(scope, "remote_write_errors", map[string]string{"reason": "native_histograms"}))
}

// A backend that stores native histograms stores exponential histograms
// as Prometheus' translator makes them, beside the other data points.
func TestOTLPExponentialHistogramsStored(t *testing.T) {
	f, scope := newScopedFixture(t)
	ts := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	md := otlpMetrics(ts)
	addExponential(md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics(), ts, 2)
	ans := postOTLP(t, f.srv.URL, otlpProto, "", otlpBody(t, md, false, false))
	ps := ans.response(t).PartialSuccess()
	require.Zero(t, ps.RejectedDataPoints(), ps.ErrorMessage())
	require.Equal(t, otlpWant, stored(t, f.db, ts.UnixMilli()-1, ts.UnixMilli()+1))
	res, err := f.db.Query(context.Background(), "default", []*labels.Matcher{
		labels.MustNewMatcher(labels.MatchEqual, "__name__", "rpc_latency_milliseconds")}, ts.UnixMilli()-1, ts.UnixMilli()+2000, storage.QueryOptions{})
	require.NoError(t, err)
	require.Len(t, res, 1)
	require.NotNil(t, res[0].Histograms)
	n := 0
	for res[0].Histograms.Next() {
		tm, h := res[0].Histograms.AtHistogram(nil)
		require.Equal(t, ts.UnixMilli()+int64(n)*1000, tm)
		require.Equal(t, uint64(3), h.Count)
		require.Equal(t, 7.0, h.Sum)
		require.Equal(t, int32(2), h.Schema)
		n++
	}
	require.NoError(t, res[0].Histograms.Err())
	require.Equal(t, 2, n)
	require.Zero(t, counterValue(scope, "remote_write_errors", map[string]string{"reason": "native_histograms"}))
}

// Delta sums are refused as Prometheus refuses them by default.
func TestOTLPDeltaRefused(t *testing.T) {
	f, scope := newScopedFixture(t)
	ts := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	md := otlpMetrics(ts)
	m := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().AppendEmpty()
	m.SetName("jobs.done")
	s := m.SetEmptySum()
	s.SetIsMonotonic(true)
	s.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
	s.DataPoints().AppendEmpty().SetIntValue(3)
	ps := postOTLP(t, f.srv.URL, otlpProto, "", otlpBody(t, md, false, false)).response(t).PartialSuccess()
	require.EqualValues(t, 1, ps.RejectedDataPoints())
	require.Contains(t, ps.ErrorMessage(), `without cumulative temporality (first of metric "jobs.done")`)
	require.Equal(t, otlpWant, stored(t, f.db, ts.UnixMilli()-1, ts.UnixMilli()+1))

	// Alone: refused.
	md, ms := otlpResource()
	m.CopyTo(ms.AppendEmpty())
	st := postOTLP(t, f.srv.URL, otlpJSON, "", otlpBody(t, md, true, false)).status(t, http.StatusBadRequest)
	require.Contains(t, st.Message, "only cumulative temporality is stored")
	require.EqualValues(t, 2, counterValue(scope, "remote_write_errors", map[string]string{"reason": "delta_temporality"}))
}

// A data point at timeUnixNano MaxUint64 (past int64 nanoseconds) is
// refused naming the field and the value sent; before, the translator's
// int64 conversion made it a sample at 1970-01-01, refused as too old.
func TestOTLPUnrepresentableTime(t *testing.T) {
	f, scope := newScopedFixture(t)
	ts := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	md := otlpMetrics(ts)
	m := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().AppendEmpty()
	m.SetName("queue.depth")
	dp := m.SetEmptyGauge().DataPoints().AppendEmpty()
	dp.SetTimestamp(pcommon.Timestamp(math.MaxUint64))
	dp.SetDoubleValue(3)
	ps := postOTLP(t, f.srv.URL, otlpProto, "", otlpBody(t, md, false, false)).response(t).PartialSuccess()
	require.EqualValues(t, 1, ps.RejectedDataPoints())
	require.Contains(t, ps.ErrorMessage(), `1 data points (first of metric "queue.depth", timeUnixNano 18446744073709551615) not written: past the latest time a sample can have (2262-04-11`)
	require.NotContains(t, ps.ErrorMessage(), "1970")
	require.Equal(t, otlpWant, stored(t, f.db, ts.UnixMilli()-1, ts.UnixMilli()+1), "the other data points are stored")

	// Alone: refused.
	md, ms := otlpResource()
	m.CopyTo(ms.AppendEmpty())
	st := postOTLP(t, f.srv.URL, otlpProto, "", otlpBody(t, md, false, false)).status(t, http.StatusBadRequest)
	require.Contains(t, st.Message, "timeUnixNano 18446744073709551615")
	require.EqualValues(t, 2, counterValue(scope, "remote_write_errors", map[string]string{"reason": "too_far_in_future"}))
}

func TestOTLPBadRequests(t *testing.T) {
	f := newFixture(t, 4096)
	ts := time.Now().Add(-time.Minute)
	good := otlpBody(t, otlpMetrics(ts), false, false)
	// A request whose protobuf is over the 4096-byte limit but whose
	// gzip is not: the decompressed size is bounded too.
	big, ms := otlpResource()
	for i := range 200 {
		m := ms.AppendEmpty()
		m.SetName("gauge." + strings.Repeat("x", i%10))
		m.SetEmptyGauge().DataPoints().AppendEmpty().SetDoubleValue(float64(i))
	}
	bigGz := otlpBody(t, big, false, true)
	require.Less(t, len(bigGz), 4096)
	require.Greater(t, len(otlpBody(t, big, false, false)), 4096)

	for _, tc := range []struct {
		name, ct, enc string
		body          []byte
		code          int
		want          string
	}{
		{"content type", "text/plain", "", good, http.StatusUnsupportedMediaType, `unsupported Content-Type "text/plain"`},
		{"no content type", "", "", good, http.StatusUnsupportedMediaType, `unsupported Content-Type ""`},
		{"encoding", otlpProto, "br", good, http.StatusUnsupportedMediaType, `unsupported Content-Encoding "br"`},
		{"bad protobuf", otlpProto, "", []byte{0x0a, 0xff, 0xff}, http.StatusBadRequest, "bad OTLP protobuf ExportMetricsServiceRequest"},
		{"bad json", otlpJSON, "", []byte(`{"resourceMetrics": [`), http.StatusBadRequest, "bad OTLP JSON ExportMetricsServiceRequest"},
		{"bad gzip", otlpProto, "gzip", good, http.StatusBadRequest, "bad gzip body"},
		{"truncated gzip", otlpProto, "gzip", bigGz[:len(bigGz)/2], http.StatusBadRequest, "bad gzip body"},
		{"too large", otlpProto, "", bytes.Repeat([]byte{0}, 4097), http.StatusRequestEntityTooLarge, ""},
		{"too large decompressed", otlpProto, "gzip", bigGz, http.StatusRequestEntityTooLarge, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := postOTLP(t, f.srv.URL, tc.ct, tc.enc, tc.body).status(t, tc.code)
			require.Contains(t, s.Message, tc.want)
		})
	}
	require.Empty(t, stored(t, f.db, 0, math.MaxInt64))
}

// Label and request limits apply as in remote write: the request is
// refused whole, naming the limit.
func TestOTLPLimits(t *testing.T) {
	f := newLimitedFixture(t, limits.Config{MaxLabelValueLength: 40, MaxSeriesPerRequest: 7})
	ts := time.Now().Add(-time.Minute).Truncate(time.Millisecond)

	md := otlpMetrics(ts)
	md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Sum().DataPoints().At(0).Attributes().
		PutStr("path", strings.Repeat("p", 41))
	before := limitstest.Refused(f.scope, limits.LabelValueLength)
	s := postOTLP(t, f.srv.URL, otlpProto, "", otlpBody(t, md, false, false)).status(t, http.StatusBadRequest)
	require.Contains(t, s.Message, "limits.maxLabelValueLength=40")
	require.Contains(t, s.Message, `value of label "path" of 41 bytes`)
	require.Equal(t, before+1, limitstest.Refused(f.scope, limits.LabelValueLength))

	// otlpMetrics is 8 series, one over the limit.
	before = limitstest.Refused(f.scope, limits.SeriesPerRequest)
	s = postOTLP(t, f.srv.URL, otlpJSON, "", otlpBody(t, otlpMetrics(ts), true, false)).status(t, http.StatusBadRequest)
	require.Contains(t, s.Message, "write request of 8 series exceeds limits.maxSeriesPerRequest=7")
	require.Equal(t, before+1, limitstest.Refused(f.scope, limits.SeriesPerRequest))
	require.Empty(t, stored(t, f.db, 0, math.MaxInt64))
}

// A node still recovering answers 503 (retry), in OTLP's error form.
func TestOTLPNotReady(t *testing.T) {
	api := newAPI(t, Options{Namespace: "default", NumShards: 64})
	w := &recorder{header: http.Header{}}
	r, err := http.NewRequest(http.MethodPost, otlpPath, bytes.NewReader(otlpBody(t, otlpMetrics(time.Now()), false, false)))
	require.NoError(t, err)
	r.Header.Set("Content-Type", otlpProto)
	api.Handler().ServeHTTP(w, r)
	require.Equal(t, http.StatusServiceUnavailable, w.code)
	s := &status.Status{}
	require.NoError(t, proto.Unmarshal(w.body.Bytes(), s))
	require.EqualValues(t, 14, s.Code) // UNAVAILABLE
}

type recorder struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header         { return r.header }
func (r *recorder) Write(b []byte) (int, error) { return r.body.Write(b) }
func (r *recorder) WriteHeader(code int)        { r.code = code }

// FuzzOTLPDecode feeds arbitrary bodies through negotiation, gzip,
// decoding and translation: whatever comes in is written or refused with
// an error, never a panic.
func FuzzOTLPDecode(f *testing.F) {
	ts := time.Unix(1700000000, 0)
	md := otlpMetrics(ts)
	addExponential(md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics(), ts, 1)
	for _, asJSON := range []bool{false, true} {
		for _, gz := range []bool{false, true} {
			f.Add(otlpBody(f, md, asJSON, gz), asJSON, gz)
		}
	}
	f.Add([]byte{}, false, false)
	f.Add([]byte(`{}`), true, false)
	f.Fuzz(func(t *testing.T, body []byte, asJSON, gz bool) {
		if gz {
			var err error
			if body, err = gunzip(nil, body, 1<<20); err != nil {
				return
			}
		}
		req, err := decodeOTLP(body, asJSON)
		if err != nil {
			return
		}
		md := req.Metrics()
		refuseUnstoredOTLP(md, true)
		st := otlpStates.Get().(*otlpState)
		defer otlpStates.Put(st)
		defer st.app.reset()
		st.app.numShards = 64
		st.conv.Reset(&st.app)
		_, _ = st.conv.FromMetrics(context.Background(), md, otlpSettings)
		st.conv.Reset(nil)
		if err := st.app.resolve(newSeriesCache(1024), (*limits.Limits)(nil).CheckID); err != nil {
			return
		}
		for _, h := range st.app.hists {
			if (h.H == nil) == (h.FH == nil) {
				t.Fatalf("a histogram sample with %v and %v", h.H, h.FH)
			}
		}
		for _, s := range st.app.samples {
			if _, err := ident.Labels(s.ID); err != nil {
				t.Fatalf("a sample's series ID does not decode: %v", err)
			}
			if s.Shard >= 64 {
				t.Fatalf("shard %d of 64", s.Shard)
			}
		}
	})
}

// A series sent again comes from the ID-keyed series cache (shared with
// remote write 2.0): no label check, hash or copy, and its samples land
// in the same stored series.
func TestOTLPSeriesCache(t *testing.T) {
	f, scope := newScopedFixture(t)
	ts := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	for i := range 3 {
		resp := postOTLP(t, f.srv.URL, otlpProto, "", otlpBody(t, otlpMetrics(ts.Add(time.Duration(i)*time.Second)), false, false)).response(t)
		require.Zero(t, resp.PartialSuccess().RejectedDataPoints())
	}
	require.Equal(t, len(otlpWant), f.api.seriesV2.len())
	require.EqualValues(t, 2*len(otlpWant), counterValue(scope, "remote_write_series_cache_hits", nil))
	require.EqualValues(t, len(otlpWant), counterValue(scope, "remote_write_series_cache_misses", nil))
	got := stored(t, f.db, ts.UnixMilli()-1, ts.Add(3*time.Second).UnixMilli())
	require.Len(t, got, len(otlpWant))
	for k, vs := range got {
		require.Equal(t, []float64{otlpWant[k][0], otlpWant[k][0], otlpWant[k][0]}, vs, k)
	}
}

// recordingAppender records what Prometheus' translator appends, as
// Prometheus' own storage would receive it.
type recordingAppender struct{ got map[string][]float64 }

func (r *recordingAppender) Append(_ promstorage.SeriesRef, ls labels.Labels, _, _ int64, v float64, h *histogram.Histogram, fh *histogram.FloatHistogram, _ promstorage.AppendV2Options) (promstorage.SeriesRef, error) {
	if h == nil && fh == nil {
		r.got[ls.String()] = append(r.got[ls.String()], v)
	}
	return 1, nil
}
func (r *recordingAppender) Commit() error   { return nil }
func (r *recordingAppender) Rollback() error { return nil }

// What is stored is exactly what Prometheus' translator hands its own
// storage with Prometheus 3's default OTLP settings, over a request of
// several resources, scopes, every stored metric type (summaries too),
// integer and float points, a stale marker (NoRecordedValue) and
// attributes needing escaping.
func TestOTLPStoresWhatPrometheusTranslates(t *testing.T) {
	f := newFixture(t, 0)
	ts := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	md := otlpMetrics(ts)
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", "worker")
	rm.Resource().Attributes().PutStr("k8s.pod.name", "worker-7")
	for j := range 2 {
		sm := rm.ScopeMetrics().AppendEmpty()
		sm.Scope().SetName("scope" + strconv.Itoa(j))
		m := sm.Metrics().AppendEmpty()
		m.SetName("queue.size." + strconv.Itoa(j))
		m.SetUnit("{item}")
		g := m.SetEmptyGauge()
		for i := range 3 {
			dp := g.DataPoints().AppendEmpty()
			dp.SetTimestamp(pcommon.NewTimestampFromTime(ts))
			dp.SetDoubleValue(float64(i) + 0.5)
			dp.Attributes().PutStr("queue.name", "q-"+strconv.Itoa(i))
			dp.Attributes().PutInt("shard", int64(i))
			if i == 2 {
				dp.SetFlags(pmetric.DefaultDataPointFlags.WithNoRecordedValue(true))
			}
		}
		s := sm.Metrics().AppendEmpty()
		s.SetName("request.size")
		s.SetUnit("KiBy")
		sp := s.SetEmptySummary().DataPoints().AppendEmpty()
		sp.SetTimestamp(pcommon.NewTimestampFromTime(ts))
		sp.SetCount(10)
		sp.SetSum(55)
		q := sp.QuantileValues().AppendEmpty()
		q.SetQuantile(0.5)
		q.SetValue(4)
		q = sp.QuantileValues().AppendEmpty()
		q.SetQuantile(0.99)
		q.SetValue(9)
		sp.Attributes().PutStr("scope", strconv.Itoa(j)) // two series, not one
	}

	want := &recordingAppender{got: map[string][]float64{}}
	conv := otlptranslator.NewPrometheusConverter(want)
	_, err := conv.FromMetrics(context.Background(), md, otlpSettings)
	require.NoError(t, err)
	require.Greater(t, len(want.got), 20)

	resp := postOTLP(t, f.srv.URL, otlpProto, "gzip", otlpBody(t, md, false, true)).response(t)
	require.Zero(t, resp.PartialSuccess().RejectedDataPoints())
	got := stored(t, f.db, ts.UnixMilli()-1, ts.UnixMilli()+1)
	require.Equal(t, len(want.got), len(got))
	for k, vs := range want.got {
		require.Len(t, got[k], len(vs), k)
		for i, v := range vs {
			require.Equal(t, math.Float64bits(v), math.Float64bits(got[k][i]), "%s: %v vs %v", k, v, got[k][i])
		}
	}
	// Spot checks of Prometheus' rules, lest both sides be wrong together.
	require.Contains(t, got, `{__name__="queue_size_0", job="worker", queue_name="q-0", shard="0"}`)
	require.Contains(t, got, `{__name__="request_size_kibibytes_sum", job="worker", scope="1"}`)
	require.Contains(t, got, `{__name__="request_size_kibibytes", job="worker", quantile="0.99", scope="0"}`)
	require.Contains(t, got, `{__name__="target_info", job="worker", k8s_pod_name="worker-7"}`)
}

// An OTLP attribute with an empty value is no label, as remote write
// drops it (ident.WithoutEmpty): the series' ID is the one without it.
func TestOTLPEmptyLabelValueDropped(t *testing.T) {
	var a otlpAppender
	ls := labels.FromStrings("__name__", "up", "job", "", "zone", "a")
	require.Equal(t, 3, ls.Len(), "the translator's labels keep empty values")
	_, err := a.Append(0, ls, 0, 1, 1, nil, nil, promstorage.AppendV2Options{})
	require.NoError(t, err)
	require.Equal(t, ident.FromLabels(labels.FromStrings("__name__", "up", "zone", "a")), a.series[0].id)
}
