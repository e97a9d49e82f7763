package promapi

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/ident"
)

func TestComputeTSDBStatusCountsAndRanks(t *testing.T) {
	var ids [][]byte
	var shards []uint32
	add := func(shard uint32, kv ...string) {
		ids = append(ids, ident.FromLabels(labels.FromStrings(kv...)))
		shards = append(shards, shard)
	}
	for i, pod := range []string{"a", "b", "c"} {
		add(uint32(i), "__name__", "http_requests", "pod", pod, "code", "200")
	}
	add(0, "__name__", "http_requests", "pod", "a", "code", "500")
	add(1, "__name__", "up", "pod", "a")

	st, err := ComputeTSDBStatus(ids, shards, 2)
	require.NoError(t, err)
	require.Equal(t, 5, st.HeadStats.NumSeries)
	// __name__ x2, pod x3, code x2
	require.Equal(t, 7, st.HeadStats.NumLabelPairs)
	require.Equal(t, []Stat{{"http_requests", 4}, {"up", 1}}, st.SeriesCountByMetricName)
	require.Equal(t, []Stat{{"pod", 3}, {"__name__", 2}}, st.LabelValueCountByLabelName, "ties by name")
	require.Equal(t, []Stat{{"__name__=http_requests", 4}, {"code=200", 3}}, st.SeriesCountByLabelValuePair)
	require.Equal(t, []Stat{{"__name__", 15}, {"code", 6}}, st.MemoryInBytesByLabelName)
	require.Equal(t, map[string]int{"0": 2, "1": 2, "2": 1}, st.SeriesCountByShard)

	_, err = ComputeTSDBStatus([][]byte{[]byte("not an id")}, []uint32{0}, 10)
	require.Error(t, err)
}

// The endpoint answers in Prometheus' shape over the backend's series
// (in a cluster the session's merged answer: each series once), with
// ?limit= applied and a bad limit refused with 400 naming it.
func TestTSDBStatusEndpoint(t *testing.T) {
	now := time.UnixMilli(7_200_000*10 + 1234)
	b := &memBackend{}
	for _, pod := range []string{"a", "b", "c"} {
		b.add(labels.FromStrings("__name__", "up", "pod", pod), tsample{now.UnixMilli(), 1})
	}
	b.add(labels.FromStrings("__name__", "other"), tsample{now.UnixMilli(), 1})
	a := newAPI(t, b, Options{Now: func() time.Time { return now }, BlockSize: 7_200_000, Namespaces: []string{"default", "other"}})
	mux := http.NewServeMux()
	a.Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	get := func(q string) (int, []byte) {
		resp, err := http.Get(srv.URL + "/api/v1/status/tsdb" + q)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, body
	}
	code, body := get("?limit=1")
	require.Equal(t, 200, code, string(body))
	var got struct {
		Status string     `json:"status"`
		Data   TSDBStatus `json:"data"`
	}
	require.NoError(t, json.Unmarshal(body, &got))
	require.Equal(t, "success", got.Status)
	require.Equal(t, 4, got.Data.HeadStats.NumSeries)
	require.Equal(t, int64(72_000_000), got.Data.HeadStats.MinTime)
	require.Equal(t, int64(79_199_999), got.Data.HeadStats.MaxTime)
	require.Equal(t, []Stat{{"up", 3}}, got.Data.SeriesCountByMetricName)
	require.Equal(t, "default", got.Data.Namespace)
	q := b.recorded()
	require.Equal(t, now.UnixMilli(), q[len(q)-1].start, "the series of the block holding now")
	// Every configured namespace counted, the queried one listed once:
	// the fake backend holds the same series whatever the namespace.
	b.mu.Lock()
	require.Equal(t, []string{"default", "other"}, b.namespaces)
	b.mu.Unlock()
	require.Equal(t, []NamespaceSeries{
		{Namespace: "default", NumSeries: 4, SeriesCountByShard: got.Data.SeriesCountByShard},
		{Namespace: "other", NumSeries: 4, SeriesCountByShard: got.Data.SeriesCountByShard},
	}, got.Data.Namespaces)

	for _, bad := range []string{"?limit=0", "?limit=x", "?limit=10001"} {
		code, body = get(bad)
		require.Equal(t, 400, code, bad)
		require.Contains(t, string(body), `invalid parameter \"limit\"`, bad)
	}
}
