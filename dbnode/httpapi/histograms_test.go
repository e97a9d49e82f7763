package httpapi

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"net/http"
	"testing"
	"time"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
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

// Remote read returns native histograms: SAMPLES in TimeSeries.histograms
// beside the floats, STREAMED_XOR_CHUNKS in Prometheus' histogram and
// float histogram chunks, in time order with the series' float chunks (a
// series that changed type), cut at 120 samples and at a counter reset.
func TestRemoteReadHistograms(t *testing.T) {
	f, _ := newScopedFixture(t)
	now := time.Now().UnixMilli()
	lat := []prompb.Label{{Name: "__name__", Value: "latency"}}
	id := ident.FromLabels(labels.FromStrings("__name__", "latency"))
	var want []string // every sample in time order, printed
	var ts prompb.TimeSeries
	ts.Labels = lat
	t0 := now - 400_000
	for i := 0; i < 10; i++ { // floats first
		ts.Samples = append(ts.Samples, prompb.Sample{Timestamp: t0 + int64(i)*1000, Value: float64(i)})
		want = append(want, fmt.Sprintf("%d f %v", t0+int64(i)*1000, float64(i)))
	}
	for i := 0; i < 300; i++ { // then integer histograms, reset at 200, then float ones
		tt := t0 + 10_000 + int64(i)*1000
		h := intHist(i % 200)
		if i < 250 {
			ts.Histograms = append(ts.Histograms, prompb.FromIntHistogram(tt, h))
			want = append(want, fmt.Sprintf("%d h %s", tt, h.String()))
		} else {
			ts.Histograms = append(ts.Histograms, prompb.FromFloatHistogram(tt, h.ToFloat(nil)))
			want = append(want, fmt.Sprintf("%d fh %s", tt, h.ToFloat(nil).String()))
		}
	}
	code, msg := post(t, f.srv.URL+"/api/v1/prom/remote/write", writeBody(t, ts))
	require.Equal(t, http.StatusNoContent, code, msg)
	hs, _ := readHistStrings(t, f, id, 0, now)
	require.Len(t, hs, 300)

	q := &prompb.Query{StartTimestampMs: t0, EndTimestampMs: now,
		Matchers: []*prompb.LabelMatcher{{Type: prompb.LabelMatcher_EQ, Name: "__name__", Value: "latency"}}}
	// SAMPLES.
	got := remoteRead(t, f.srv.URL+"/api/v1/read", q)
	require.Len(t, got, 1)
	var gotS []string
	for _, s := range got[0].Samples {
		gotS = append(gotS, fmt.Sprintf("%d f %v", s.Timestamp, s.Value))
	}
	for _, h := range got[0].Histograms {
		if h.IsFloatHistogram() {
			gotS = append(gotS, fmt.Sprintf("%d fh %s", h.Timestamp, h.ToFloatHistogram().String()))
		} else {
			gotS = append(gotS, fmt.Sprintf("%d h %s", h.Timestamp, h.ToIntHistogram().String()))
		}
	}
	require.Equal(t, want, gotS)

	// STREAMED_XOR_CHUNKS.
	rr, err := (&prompb.ReadRequest{Queries: []*prompb.Query{q},
		AcceptedResponseTypes: []prompb.ReadRequest_ResponseType{prompb.ReadRequest_STREAMED_XOR_CHUNKS}}).Marshal()
	require.NoError(t, err)
	resp, err := http.Post(f.srv.URL+"/api/v1/read", "application/x-protobuf", bytes.NewReader(snappy.Encode(nil, rr)))
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	frames := readFrames(t, body)
	require.Len(t, frames, 1)
	var gotC []string
	var types []prompb.Chunk_Encoding
	var starts []int64
	for _, c := range frames[0].ChunkedSeries[0].Chunks {
		types = append(types, c.Type)
		starts = append(starts, c.MinTimeMs)
		enc := map[prompb.Chunk_Encoding]chunkenc.Encoding{prompb.Chunk_XOR: chunkenc.EncXOR,
			prompb.Chunk_HISTOGRAM: chunkenc.EncHistogram, prompb.Chunk_FLOAT_HISTOGRAM: chunkenc.EncFloatHistogram}[c.Type]
		ch, err := chunkenc.FromData(enc, c.Data)
		require.NoError(t, err)
		it := ch.Iterator(nil)
		for vt := it.Next(); vt != chunkenc.ValNone; vt = it.Next() {
			tt := it.AtT()
			require.GreaterOrEqual(t, tt, c.MinTimeMs)
			require.LessOrEqual(t, tt, c.MaxTimeMs)
			switch vt {
			case chunkenc.ValFloat:
				_, v := it.At()
				gotC = append(gotC, fmt.Sprintf("%d f %v", tt, v))
			case chunkenc.ValHistogram:
				_, h := it.AtHistogram(nil)
				h.CounterResetHint = histogram.UnknownCounterReset // chunks set hints of their own
				gotC = append(gotC, fmt.Sprintf("%d h %s", tt, h.String()))
			case chunkenc.ValFloatHistogram:
				_, h := it.AtFloatHistogram(nil)
				h.CounterResetHint = histogram.UnknownCounterReset
				gotC = append(gotC, fmt.Sprintf("%d fh %s", tt, h.String()))
			}
		}
		require.NoError(t, it.Err())
	}
	require.Equal(t, want, gotC)
	// XOR; integer histograms cut at 120 samples and at the reset (the
	// 200th); float histograms.
	require.Equal(t, []prompb.Chunk_Encoding{prompb.Chunk_XOR, prompb.Chunk_HISTOGRAM, prompb.Chunk_HISTOGRAM,
		prompb.Chunk_HISTOGRAM, prompb.Chunk_FLOAT_HISTOGRAM}, types)
	h0 := t0 + 10_000
	require.Equal(t, []int64{t0, h0, h0 + 120_000, h0 + 200_000, h0 + 250_000}, starts)
}

// A float and a histogram at one timestamp of a series (one request):
// the histogram is refused with 400 naming the series and the time, as
// Prometheus' TSDB refuses a duplicate sample for a timestamp, and the
// floats read back. Before, the request was answered 204 and remote read
// returned the histogram alone: a 2xx for a float not kept.
func TestRemoteWriteOneSamplePerTimestamp(t *testing.T) {
	f, scope := newScopedFixture(t)
	now := time.Now().UnixMilli()
	ts := prompb.TimeSeries{Labels: []prompb.Label{{Name: "__name__", Value: "both"}},
		Samples:    []prompb.Sample{{Timestamp: now - 2000, Value: 1}, {Timestamp: now - 1000, Value: 2}},
		Histograms: []prompb.Histogram{prompb.FromIntHistogram(now-1000, intHist(1))}}
	code, msg := post(t, f.srv.URL+"/api/v1/prom/remote/write", writeBody(t, ts))
	require.Equal(t, http.StatusBadRequest, code, msg)
	require.Contains(t, msg, `series {__name__="both"} already holds a float sample at `+time.UnixMilli(now-1000).UTC().Format(time.RFC3339Nano))
	require.EqualValues(t, 1, counterValue(scope, "remote_write_errors", map[string]string{"reason": "duplicate_sample_for_timestamp"}))
	got := remoteRead(t, f.srv.URL+"/api/v1/read", &prompb.Query{StartTimestampMs: now - 10_000, EndTimestampMs: now,
		Matchers: []*prompb.LabelMatcher{{Type: prompb.LabelMatcher_EQ, Name: "__name__", Value: "both"}}})
	require.Len(t, got, 1)
	require.Equal(t, []prompb.Sample{{Timestamp: now - 2000, Value: 1}, {Timestamp: now - 1000, Value: 2}}, got[0].Samples)
	require.Empty(t, got[0].Histograms)
}
