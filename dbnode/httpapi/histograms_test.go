package httpapi

import (
	"fmt"
	"math"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/ident"
)

func intHist(i int) *histogram.Histogram {
	return &histogram.Histogram{
		Schema: 1, ZeroThreshold: 0.001, ZeroCount: uint64(i), Count: uint64(i + 3*(i+1)), Sum: float64(i) + 0.5,
		PositiveSpans: []histogram.Span{{Offset: -1, Length: 2}}, PositiveBuckets: []int64{int64(i + 1), int64(i + 1)},
	}
}

// readHistStrings reads a series' histograms back from storage, each
// printed completely (float ones prefixed), and whether the last is a
// stale marker.
func readHistStrings(t *testing.T, f *fixture, id []byte, from, to int64) ([]string, bool) {
	t.Helper()
	it, err := f.db.ReadHistograms("default", id, from, to)
	require.NoError(t, err)
	var out []string
	stale := false
	for it.Next() {
		if it.IsFloat() {
			ts, h := it.AtFloatHistogram(nil)
			out = append(out, fmt.Sprintf("%d float %+v", ts, *h))
			stale = value.IsStaleNaN(h.Sum)
		} else {
			ts, h := it.AtHistogram(nil)
			out = append(out, fmt.Sprintf("%d %+v", ts, *h))
			stale = value.IsStaleNaN(h.Sum)
		}
	}
	require.NoError(t, it.Err())
	return out, stale
}

// Remote write 1.0 stores native histograms, integer and float, beside
// the floats of the same request, series the cache knows included.
func TestRemoteWriteV1StoresHistograms(t *testing.T) {
	f, scope := newScopedFixture(t)
	url := f.srv.URL + "/api/v1/prom/remote/write"
	now := time.Now().UnixMilli()
	lat := []prompb.Label{{Name: "__name__", Value: "latency"}, {Name: "job", Value: "a"}}
	latID := ident.FromLabels(labels.FromStrings("__name__", "latency", "job", "a"))
	upID := ident.FromLabels(labels.FromStrings("__name__", "up"))
	stale := intHist(3)
	stale.Sum = math.Float64frombits(value.StaleNaN)
	hs := []prompb.Histogram{
		prompb.FromIntHistogram(now-3000, intHist(1)),
		prompb.FromFloatHistogram(now-2000, intHist(2).ToFloat(nil)),
		prompb.FromIntHistogram(now-1000, stale),
	}
	for i := 0; i < 2; i++ { // the second time, up is known to the series cache
		body := writeBody(t, ts("up", now-int64(i), 1), prompb.TimeSeries{Labels: lat, Histograms: hs[i : i+2]})
		code, msg := post(t, url, body)
		require.Equal(t, http.StatusNoContent, code, msg)
	}
	got, isStale := readHistStrings(t, f, latID, now-10_000, now)
	require.Len(t, got, 3)
	require.Equal(t, fmt.Sprintf("%d %+v", now-3000, *intHist(1)), got[0])
	require.Equal(t, fmt.Sprintf("%d float %+v", now-2000, *intHist(2).ToFloat(nil)), got[1])
	require.True(t, isStale)
	require.Equal(t, []int64{now - 1, now}, readIDs(t, f, upID, now-10_000, now+1))
	require.Equal(t, int64(0), counterValue(scope, "remote_write_errors", map[string]string{"reason": "native_histograms"}))

	// An invalid histogram (its spans hold 2 buckets, 1 given) is a 400
	// naming it; the valid sample beside it is stored.
	bad := intHist(5)
	bad.PositiveBuckets = bad.PositiveBuckets[:1]
	code, msg := post(t, url, writeBody(t, prompb.TimeSeries{Labels: lat, Histograms: []prompb.Histogram{
		prompb.FromIntHistogram(now-500, bad), prompb.FromIntHistogram(now-400, intHist(6))}}))
	require.Equal(t, http.StatusBadRequest, code, msg)
	require.Contains(t, msg, "spans")
	got, _ = readHistStrings(t, f, latID, now-10_000, now)
	require.Len(t, got, 4)
}

// Remote write 2.0 stores them and counts them in
// X-Prometheus-Remote-Write-Histograms-Written.
func TestRemoteWriteV2StoresHistograms(t *testing.T) {
	f, _ := newScopedFixture(t)
	url := f.srv.URL + "/api/v1/prom/remote/write"
	now := time.Now().UnixMilli()
	st := writev2.NewSymbolTable()
	hl := labels.FromStrings("__name__", "latency_seconds", "le_schema", "nhcb")
	nhcb := &histogram.Histogram{Schema: histogram.CustomBucketsSchema, Count: 5, Sum: 2.5,
		PositiveSpans: []histogram.Span{{Length: 3}}, PositiveBuckets: []int64{1, 1, 0}, CustomValues: []float64{0.1, 1, 10}}
	h := writev2.TimeSeries{LabelsRefs: st.SymbolizeLabels(hl, nil), Histograms: []writev2.Histogram{
		writev2.FromIntHistogram(0, now-1000, nhcb),
		writev2.FromFloatHistogram(0, now, intHist(4).ToFloat(nil)),
	}}
	fl := labels.FromStrings("__name__", "requests_total")
	floats := writev2.TimeSeries{LabelsRefs: st.SymbolizeLabels(fl, nil), Samples: []writev2.Sample{{Value: 5, Timestamp: now}}}
	resp := postAs(t, url, ContentTypeV2, "snappy", v2Body(t, &st, floats, h))
	require.Equal(t, v2Response{code: 204, samples: "1", histograms: "2", exemplars: "0"}, resp)
	got, _ := readHistStrings(t, f, ident.FromLabels(hl), now-10_000, now)
	require.Equal(t, []string{fmt.Sprintf("%d %+v", now-1000, *nhcb), fmt.Sprintf("%d float %+v", now, *intHist(4).ToFloat(nil))}, got)

	// One histogram too old: 400, the headers count what was written.
	st.Reset()
	old := now - int64(72*time.Hour/time.Millisecond)
	h = writev2.TimeSeries{LabelsRefs: st.SymbolizeLabels(hl, nil), Histograms: []writev2.Histogram{
		writev2.FromIntHistogram(0, old, intHist(1)), writev2.FromIntHistogram(0, now+1, intHist(2))}}
	resp = postAs(t, url, ContentTypeV2, "snappy", v2Body(t, &st, h))
	require.Equal(t, http.StatusBadRequest, resp.code, resp.body)
	require.Contains(t, resp.body, "out of retention")
	require.Equal(t, "1", resp.histograms)
	require.Equal(t, "0", resp.samples)
}
