package promapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/dbnode/httpapi"
	"github.com/tessera-tsdb/tessera/dbnode/httpapi/httpapitest"
	tstorage "github.com/tessera-tsdb/tessera/dbnode/storage"
	"github.com/tessera-tsdb/tessera/dbnode/storage/storagetest"
	"github.com/tessera-tsdb/tessera/ident"
	"github.com/tessera-tsdb/tessera/limits"
	"github.com/tessera-tsdb/tessera/limits/limitstest"
	"github.com/uber-go/tally/v4"
)

// limitedNode is the query API over real storage with limits, counting
// refusals in a test scope.
type limitedNode struct {
	srv   *httptest.Server
	db    *tstorage.Database
	scope tally.TestScope
}

func newLimitedNode(t *testing.T, now time.Time, cfg limits.Config, opts Options) *limitedNode {
	t.Helper()
	scope := tally.NewTestScope("", nil)
	l := limits.New(cfg, scope.SubScope("limits"))
	db := storagetest.Open(t, 64, func() time.Time { return now })
	h := httpapitest.New(t, httpapi.Options{Namespace: "default", NumShards: 64, Limits: l, Backend: httpapi.Local{DB: db}})
	opts.Limits = l
	opts.Now = func() time.Time { return now }
	newAPI(t, httpapi.Local{DB: db}, opts).Register(h.Mux())
	srv := httptest.NewServer(h.Handler())
	t.Cleanup(srv.Close)
	return &limitedNode{srv: srv, db: db, scope: scope}
}

// store writes straight to storage, past every write-path check, as data
// stored before the limits existed.
func (n *limitedNode) store(t *testing.T, id []byte, ts ...int64) {
	t.Helper()
	batch := make([]tstorage.Sample, len(ts))
	for i, tm := range ts {
		batch[i] = tstorage.Sample{ID: id, Shard: n.db.Shard(id), T: tm, V: float64(i)}
	}
	require.NoError(t, n.db.WriteBatch("default", batch))
}

func unixParam(t time.Time) string {
	return strconv.FormatFloat(float64(t.UnixMilli())/1000, 'f', 3, 64)
}

// TestLabelTooLongForPromQLStoredBefore: a series stored with a 16 MiB
// label value (before the label limits existed) used to make
// /api/v1/series panic (the client saw EOF) and PromQL answer []: Prometheus'
// label sets hold at most 2^24-1 bytes per string, and a longer one wraps
// its length. Now the series is skipped with a warning naming it, and the
// others are answered.
func TestLabelTooLongForPromQLStoredBefore(t *testing.T) {
	now := time.Now().Truncate(time.Second)
	n := newLimitedNode(t, now, limits.Config{}, Options{})
	// Built from pairs: a labels.Labels cannot even hold it.
	huge := ident.AppendPairs(nil, []ident.Pair{{Name: []byte("__name__"), Value: []byte("big")}, {Name: []byte("v"), Value: []byte(strings.Repeat("x", 16<<20))}})
	ok := ident.FromLabels(labels.FromStrings("__name__", "big", "v", "ok"))
	n.store(t, huge, now.Add(-time.Minute).UnixMilli(), now.UnixMilli())
	n.store(t, ok, now.Add(-time.Minute).UnixMilli(), now.UnixMilli())

	code, r := get(t, n.srv.URL, "/api/v1/series", url.Values{"match[]": {"big"}})
	require.Equal(t, http.StatusOK, code, r.Error)
	var series []map[string]string
	require.NoError(t, json.Unmarshal(r.Data, &series))
	require.Equal(t, []map[string]string{{"__name__": "big", "v": "ok"}}, series)
	require.Len(t, r.Warnings, 1)
	require.Contains(t, r.Warnings[0], "series skipped")
	require.Contains(t, r.Warnings[0], "16777216-byte value")

	for _, q := range []struct {
		path   string
		params url.Values
	}{
		{"/api/v1/query", url.Values{"query": {"big"}, "time": {unixParam(now)}}},
		{"/api/v1/query_range", url.Values{"query": {"big"}, "start": {unixParam(now.Add(-time.Minute))}, "end": {unixParam(now)}, "step": {"15"}}},
	} {
		code, r := get(t, n.srv.URL, q.path, q.params)
		require.Equal(t, http.StatusOK, code, r.Error)
		var data struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
			} `json:"result"`
		}
		require.NoError(t, json.Unmarshal(r.Data, &data))
		require.Len(t, data.Result, 1, q.path)
		require.Equal(t, map[string]string{"__name__": "big", "v": "ok"}, data.Result[0].Metric)
		require.NotEmpty(t, r.Warnings, q.path)
		require.Contains(t, r.Warnings[0], "series skipped")
	}
}

func TestQueryLimits(t *testing.T) {
	now := time.Now().Truncate(time.Second)
	n := newLimitedNode(t, now, limits.Config{
		MaxFetchedSeriesPerQuery: 2, MaxQueryLength: time.Hour, MaxQueryLookback: 2 * time.Hour,
	}, Options{MaxSamples: 10})
	for _, job := range []string{"a", "b", "c"} {
		var ts []int64
		for i := int64(0); i < 30; i++ {
			ts = append(ts, now.Add(-time.Duration(i)*time.Minute).UnixMilli())
		}
		n.store(t, ident.FromLabels(labels.FromStrings("__name__", "up", "job", job)), ts...)
	}
	rangeQ := func(q string, start, end time.Time) url.Values {
		return url.Values{"query": {q}, "start": {unixParam(start)}, "end": {unixParam(end)}, "step": {"60"}}
	}
	for _, tc := range []struct {
		name, path string
		params     url.Values
		code       int
		errType    string
		limit      string
		want       string
	}{
		{"fetched series, PromQL", "/api/v1/query", url.Values{"query": {"up"}, "time": {unixParam(now)}},
			422, "execution", limits.FetchedSeriesPerQuery, "fetched 3 series, over limits.maxFetchedSeriesPerQuery=2"},
		{"fetched series across selectors", "/api/v1/query", url.Values{"query": {`up{job="a"} + up{job=~"b|c"}`}, "time": {unixParam(now)}},
			422, "execution", limits.FetchedSeriesPerQuery, "fetched 3 series, over limits.maxFetchedSeriesPerQuery=2"},
		{"fetched series, series API", "/api/v1/series", url.Values{"match[]": {"up"}},
			422, "execution", limits.FetchedSeriesPerQuery, "limits.maxFetchedSeriesPerQuery=2"},
		{"query length", "/api/v1/query_range", rangeQ(`up{job="a"}`, now.Add(-90*time.Minute), now),
			400, "bad_data", limits.QueryLength, "query_range over 1h30m0s"},
		{"lookback, range", "/api/v1/query_range", rangeQ(`up{job="a"}`, now.Add(-3*time.Hour), now.Add(-150*time.Minute)),
			400, "bad_data", limits.QueryLookback, "past limits.maxQueryLookback=2h0m0s"},
		{"lookback, instant", "/api/v1/query", url.Values{"query": {`up{job="a"}`}, "time": {unixParam(now.Add(-3 * time.Hour))}},
			400, "bad_data", limits.QueryLookback, "3h0m0s ago, past limits.maxQueryLookback=2h0m0s"},
		{"samples", "/api/v1/query", url.Values{"query": {`up{job="a"}[30m]`}, "time": {unixParam(now)}},
			422, "execution", limits.QuerySamples, "too many samples into memory in query execution (query.maxSamples=10)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := limitstest.Refused(n.scope, tc.limit)
			code, r := get(t, n.srv.URL, tc.path, tc.params)
			require.Equal(t, tc.code, code, r.Error)
			require.Equal(t, tc.errType, r.ErrorType)
			require.Contains(t, r.Error, tc.want)
			require.Equal(t, before+1, limitstest.Refused(n.scope, tc.limit))
		})
	}
	// Within every limit: answered.
	code, r := get(t, n.srv.URL, "/api/v1/query_range", rangeQ(`up{job=~"a|b"}`, now.Add(-4*time.Minute), now))
	require.Equal(t, http.StatusOK, code, r.Error)
}
