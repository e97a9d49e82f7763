package httpapi

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/config"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
	"github.com/tessera-tsdb/tessera/dbnode/storage/storagetest"
	"github.com/tessera-tsdb/tessera/ident"
	"github.com/tessera-tsdb/tessera/internal/retain"
	"github.com/tessera-tsdb/tessera/limits"
	"github.com/tessera-tsdb/tessera/limits/limitstest"
	"github.com/uber-go/tally/v4"
)

// limitedFixture is a node's HTTP API over real storage with small
// limits, counting refusals in a test scope.
type limitedFixture struct {
	*fixture
	scope tally.TestScope
}

func newLimitedFixture(t *testing.T, cfg limits.Config) *limitedFixture {
	t.Helper()
	scope := tally.NewTestScope("", nil)
	l := limits.New(cfg, scope.SubScope("limits"))
	db := storagetest.OpenWithLimits(t, 64, l)
	api := newAPI(t, Options{Namespace: "default", NumShards: 64, Limits: l, Backend: Local{DB: db}})
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	return &limitedFixture{fixture: &fixture{srv: srv, db: db, api: api}, scope: scope}
}

// refused reads tessera_limits_refused{limit=...} from the test scope.

// samplesOf reads back the samples stored for a series.
func samplesOf(t *testing.T, db *storage.Database, lset labels.Labels, from, to int64) int {
	t.Helper()
	it, err := db.Read("default", ident.FromLabels(lset), from, to)
	require.NoError(t, err)
	n := 0
	for it.Next() {
		n++
	}
	require.NoError(t, it.Err())
	return n
}

func TestRemoteWriteLabelAndRequestLimits(t *testing.T) {
	f := newLimitedFixture(t, limits.Config{
		MaxLabelNameLength: 16, MaxLabelValueLength: 32, MaxLabelNamesPerSeries: 4,
		MaxSeriesPerRequest: 3, MaxSamplesPerRequest: 5,
	})
	now := time.Now().UnixMilli()
	url := f.srv.URL + "/api/v1/prom/remote/write"
	lbl := func(n, v string) prompb.Label { return prompb.Label{Name: n, Value: v} }
	many := func(n int) []prompb.TimeSeries {
		out := make([]prompb.TimeSeries, n)
		for i := range out {
			out[i] = ts("up", now, 1, lbl("i", fmt.Sprint(i)))
		}
		return out
	}
	longName := strings.Repeat("n", 17)
	for _, tc := range []struct {
		name, limit string
		series      []prompb.TimeSeries
		want        []string
	}{
		{"label name", limits.LabelNameLength, []prompb.TimeSeries{ts("up", now, 1, lbl(longName, "x"))},
			[]string{"limits.maxLabelNameLength=16", "17 bytes", longName, `__name__="up"`}},
		{"label value", limits.LabelValueLength, []prompb.TimeSeries{ts("up", now, 1, lbl("path", strings.Repeat("v", 33)))},
			[]string{"limits.maxLabelValueLength=32", `label "path" of 33 bytes`, `__name__="up"`}},
		{"metric name is a label value", limits.LabelValueLength, []prompb.TimeSeries{ts(strings.Repeat("m", 33), now, 1)},
			[]string{"limits.maxLabelValueLength=32", `label "__name__"`}},
		{"labels per series", limits.LabelNamesPerSeries, []prompb.TimeSeries{ts("up", now, 1, lbl("a", "1"), lbl("b", "2"), lbl("c", "3"), lbl("d", "4"))},
			[]string{"series with 5 labels exceeds limits.maxLabelNamesPerSeries=4", `a="1"`}},
		{"series per request", limits.SeriesPerRequest, many(4),
			[]string{"write request of 4 series exceeds limits.maxSeriesPerRequest=3"}},
		{"samples per request", limits.SamplesPerRequest, []prompb.TimeSeries{{
			Labels:  []prompb.Label{lbl("__name__", "up")},
			Samples: []prompb.Sample{{Timestamp: now - 5, Value: 1}, {Timestamp: now - 4}, {Timestamp: now - 3}, {Timestamp: now - 2}, {Timestamp: now - 1}, {Timestamp: now}},
		}}, []string{"write request of 6 samples exceeds limits.maxSamplesPerRequest=5"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := limitstest.Refused(f.scope, tc.limit)
			code, msg := post(t, url, writeBody(t, tc.series...))
			require.Equal(t, http.StatusBadRequest, code, msg)
			for _, w := range tc.want {
				require.Contains(t, msg, w)
			}
			require.Equal(t, before+1, limitstest.Refused(f.scope, tc.limit), "refusal counted under %s", tc.limit)
			require.Zero(t, f.db.ActiveSeries(), "a refused request stores nothing")
		})
	}
	// At the limits exactly: taken.
	code, msg := post(t, url, writeBody(t, append(many(2), ts(strings.Repeat("m", 32), now, 1,
		lbl(strings.Repeat("n", 16), strings.Repeat("v", 32)), lbl("b", "2"), lbl("c", "3")))...))
	require.Equal(t, http.StatusNoContent, code, msg)
	require.EqualValues(t, 3, f.db.ActiveSeries())
}

// TestRemoteWriteActiveSeriesLimit: past limits.maxActiveSeries a new
// series is refused with 429 naming the limit and the series, while the
// samples of series the node holds are still stored; the request is never
// answered 2xx while one of its samples was not stored.
func TestRemoteWriteActiveSeriesLimit(t *testing.T) {
	f := newLimitedFixture(t, limits.Config{MaxActiveSeries: 3})
	now := time.Now().UnixMilli()
	url := f.srv.URL + "/api/v1/prom/remote/write"
	job := func(j string, t int64) prompb.TimeSeries { return ts("up", t, 1, prompb.Label{Name: "job", Value: j}) }
	code, msg := post(t, url, writeBody(t, job("a", now-3), job("b", now-3), job("c", now-3)))
	require.Equal(t, http.StatusNoContent, code, msg)

	// Two held series and a new one: 429, the held ones stored.
	code, msg = post(t, url, writeBody(t, job("a", now-2), job("d", now-2), job("b", now-2)))
	require.Equal(t, http.StatusTooManyRequests, code, msg)
	require.Contains(t, msg, "limits.maxActiveSeries=3")
	require.Contains(t, msg, `job="d"`)
	require.EqualValues(t, 1, limitstest.Refused(f.scope, limits.ActiveSeries))
	for _, j := range []string{"a", "b"} {
		require.Equal(t, 2, samplesOf(t, f.db, labels.FromStrings("__name__", "up", "job", j), now-10, now), "job %s", j)
	}
	require.Zero(t, samplesOf(t, f.db, labels.FromStrings("__name__", "up", "job", "d"), now-10, now))
	require.EqualValues(t, 3, f.db.ActiveSeries())

	// A permanent refusal in the same request does not hide the 429: the
	// retry may store the new series once the limit allows it.
	old := now - (72 * time.Hour).Milliseconds()
	code, msg = post(t, url, writeBody(t, job("e", now-1), job("a", old)))
	require.Equal(t, http.StatusTooManyRequests, code, msg)
	require.Contains(t, msg, "out of retention")

	// Held series alone: 204, through the series cache's fast path too.
	for i := int64(0); i < 2; i++ {
		code, msg = post(t, url, writeBody(t, job("a", now+i), job("b", now+i), job("c", now+i)))
		require.Equal(t, http.StatusNoContent, code, msg)
	}
	require.Equal(t, 4, samplesOf(t, f.db, labels.FromStrings("__name__", "up", "job", "a"), now-10, now+10))
	require.EqualValues(t, 2, limitstest.Refused(f.scope, limits.ActiveSeries))
}

// TestRemoteWriteActiveSeriesLimitConcurrent: many writers creating
// series at once never take the node past the limit, and every series
// refused was answered 429 (run with -race).
func TestRemoteWriteActiveSeriesLimitConcurrent(t *testing.T) {
	const limit, writers, perWriter = 50, 8, 20
	f := newLimitedFixture(t, limits.Config{MaxActiveSeries: limit})
	now := time.Now().UnixMilli()
	url := f.srv.URL + "/api/v1/prom/remote/write"
	var mu sync.Mutex
	codes := map[int]int{}
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < perWriter; i++ {
				body := writeBody(t, ts("up", now, 1, prompb.Label{Name: "w", Value: fmt.Sprint(w)}, prompb.Label{Name: "i", Value: fmt.Sprint(i)}))
				code, _ := post(t, url, body)
				mu.Lock()
				codes[code]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	require.Equal(t, map[int]int{http.StatusNoContent: limit, http.StatusTooManyRequests: writers*perWriter - limit}, codes)
	require.EqualValues(t, limit, f.db.ActiveSeries())
	require.EqualValues(t, writers*perWriter-limit, limitstest.Refused(f.scope, limits.ActiveSeries))
}

func TestRemoteReadFetchedSeriesLimit(t *testing.T) {
	f := newLimitedFixture(t, limits.Config{MaxFetchedSeriesPerQuery: 2})
	now := time.Now().UnixMilli()
	code, msg := post(t, f.srv.URL+"/api/v1/write", writeBody(t,
		ts("up", now, 1, prompb.Label{Name: "job", Value: "a"}),
		ts("up", now, 1, prompb.Label{Name: "job", Value: "b"}),
		ts("up", now, 1, prompb.Label{Name: "job", Value: "c"})))
	require.Equal(t, http.StatusNoContent, code, msg)
	read := func(matchers ...*prompb.LabelMatcher) (int, string) {
		rr, err := (&prompb.ReadRequest{Queries: []*prompb.Query{{StartTimestampMs: now - 1000, EndTimestampMs: now + 1, Matchers: matchers}}}).Marshal()
		require.NoError(t, err)
		return post(t, f.srv.URL+"/api/v1/read", snappy.Encode(nil, rr))
	}
	code, msg = read(&prompb.LabelMatcher{Type: prompb.LabelMatcher_EQ, Name: "__name__", Value: "up"})
	require.Equal(t, http.StatusUnprocessableEntity, code, msg)
	require.Contains(t, msg, "fetched 3 series, over limits.maxFetchedSeriesPerQuery=2")
	require.EqualValues(t, 1, limitstest.Refused(f.scope, limits.FetchedSeriesPerQuery))
	code, msg = read(&prompb.LabelMatcher{Type: prompb.LabelMatcher_RE, Name: "job", Value: "a|b"})
	require.Equal(t, http.StatusOK, code, msg)
}

// TestDefaultLimitsRefuseIssueInputs: what issue 16 found stored, with
// the node's default limits: 100,000 labels on one series, and a 16 MiB
// label value (which then broke /api/v1/series and PromQL).
func TestDefaultLimitsRefuseIssueInputs(t *testing.T) {
	var c config.Config
	c.Defaults()
	f := newLimitedFixture(t, limits.Config(c.Limits))
	now := time.Now().UnixMilli()
	url := f.srv.URL + "/api/v1/prom/remote/write"
	wide := ts("wide", now, 1)
	for i := 0; i < 100_000; i++ {
		wide.Labels = append(wide.Labels, prompb.Label{Name: fmt.Sprintf("l%06d", i), Value: "v"})
	}
	code, msg := post(t, url, writeBody(t, wide))
	require.Equal(t, http.StatusBadRequest, code, msg)
	require.Contains(t, msg, "series with 100001 labels exceeds limits.maxLabelNamesPerSeries=64")
	require.Less(t, len(msg), 1000, "the message stays one readable line")
	// In reverse order (an insertion sort of them would be quadratic):
	// refused as fast.
	for i, j := 1, len(wide.Labels)-1; i < j; i, j = i+1, j-1 {
		wide.Labels[i], wide.Labels[j] = wide.Labels[j], wide.Labels[i]
	}
	code, msg = post(t, url, writeBody(t, wide))
	require.Equal(t, http.StatusBadRequest, code, msg)
	require.Contains(t, msg, "series with 100001 labels exceeds limits.maxLabelNamesPerSeries=64")

	code, msg = post(t, url, writeBody(t, ts("big", now, 1, prompb.Label{Name: "v", Value: strings.Repeat("x", 16<<20)})))
	require.Equal(t, http.StatusBadRequest, code, msg)
	require.Contains(t, msg, `value of label "v" of 16777216 bytes exceeds limits.maxLabelValueLength=2048`)
	require.Zero(t, f.db.ActiveSeries())
}

// TestPoolsDropOversizedBuffers: after a request that grew a pooled
// state's or body's buffers past retain.MaxBytes, the pools do not keep
// them (a node holding 15 series sat at 1.9 GB resident after eight
// large refused requests at once); small ones are kept.
func TestPoolsDropOversizedBuffers(t *testing.T) {
	f := newFixture(t, 64<<20)
	st := f.api.getWriteState()
	st.raw = make([]byte, 0, retain.MaxBytes+1)
	st.samples = make([]storage.Sample, 0, 16)
	f.api.putWriteState(st)
	require.Nil(t, st.raw, "a decompressed body over the bound is dropped")
	require.NotNil(t, st.samples, "a small buffer is kept")

	big := make([]byte, 0, retain.MaxBytes+1)
	f.api.putBuf(&big)
	for range 3 {
		if b, ok := f.api.bufs.Get().(*[]byte); ok {
			require.LessOrEqual(t, cap(*b), retain.MaxBytes, "a body buffer over the bound is not pooled")
		}
	}
}

// A 2.0 request's labels are checked for the series the cache does not
// know (the decoder defers the checks to the handler): a request carrying
// a cached series and a new one over a label limit is refused whole, the
// refusal counted, and nothing of it stored; the cached series alone is
// then taken.
func TestRemoteWriteV2LabelLimitsOnNewSeries(t *testing.T) {
	f := newLimitedFixture(t, limits.Config{MaxLabelValueLength: 32})
	url := f.srv.URL + "/api/v1/write"
	now := time.Now().UnixMilli()
	good := labels.FromStrings("__name__", "up", "job", "a")
	long := labels.FromStrings("__name__", "up", "path", strings.Repeat("v", 33))
	st := writev2.NewSymbolTable()
	send := func(ts int64, ls ...labels.Labels) v2Response {
		st.Reset()
		var series []writev2.TimeSeries
		for _, l := range ls {
			series = append(series, writev2.TimeSeries{LabelsRefs: st.SymbolizeLabels(l, nil),
				Samples: []writev2.Sample{{Value: 1, Timestamp: ts}}})
		}
		return postAs(t, url, ContentTypeV2, "snappy", v2Body(t, &st, series...))
	}
	resp := send(now-3000, good)
	require.Equal(t, http.StatusNoContent, resp.code, resp.body)
	require.Equal(t, 1, f.api.seriesV2.len())

	before := limitstest.Refused(f.scope, limits.LabelValueLength)
	resp = send(now-2000, good, long)
	require.Equal(t, http.StatusBadRequest, resp.code, resp.body)
	require.Contains(t, resp.body, "timeseries 1")
	require.Contains(t, resp.body, "limits.maxLabelValueLength=32")
	require.Equal(t, "0", resp.samples)
	require.Equal(t, before+1, limitstest.Refused(f.scope, limits.LabelValueLength))
	require.EqualValues(t, 1, f.db.ActiveSeries(), "the refused series is not stored")
	require.Equal(t, []int64{now - 3000}, readIDs(t, f.fixture, ident.FromLabels(good), now-10_000, now+1),
		"nothing of the refused request is stored")

	resp = send(now-1000, good)
	require.Equal(t, http.StatusNoContent, resp.code, resp.body)
	require.Equal(t, []int64{now - 3000, now - 1000}, readIDs(t, f.fixture, ident.FromLabels(good), now-10_000, now+1))
}
