package httpapi

import (
	"bytes"
	"github.com/golang/snappy"
	"io"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/prompb"
	"github.com/stretchr/testify/require"
)

// TestRemoteWriteTimestampsAtInt64Edges sends samples at and near the
// int64 edges through the real remote write path (snappy prompb): each is
// refused with a 400 whose message says why in plain words (no negative
// age from an overflow), the node keeps running, and remote read over the
// widest possible range still finds what was stored.
func TestRemoteWriteTimestampsAtInt64Edges(t *testing.T) {
	f := newFixture(t, 1<<20)
	url := f.srv.URL + "/api/v1/prom/remote/write"
	now := time.Now().UnixMilli()
	for _, tc := range []struct {
		name string
		t    int64
		want string
	}{
		{"MaxInt64", math.MaxInt64, "sample at 9223372036854775807 ms since 1970 is too far in the future: 2924711"},
		{"MaxInt64-1", math.MaxInt64 - 1, "too far in the future"},
		{"beyond Duration", now + 300*365*24*3600*1000, "too far in the future"},
		{"MinInt64", math.MinInt64, "sample at -9223372036854775808 ms since 1970 is out of retention: 29247"},
		{"MinInt64+1", math.MinInt64 + 1, "out of retention"},
		{"before Duration", now - 300*365*24*3600*1000, "out of retention"},
		{"year 10000", 253402300800000, "too far in the future"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, msg := post(t, url, writeBody(t, ts("edge", tc.t, 1)))
			require.Equal(t, http.StatusBadRequest, code, msg)
			require.Contains(t, msg, tc.want)
			require.NotContains(t, msg, ": -", "an age never comes out negative")
			require.False(t, strings.Contains(msg, "h-") || strings.Contains(msg, "-0s"), msg)
		})
	}
	code, msg := post(t, url, writeBody(t, ts("edge", now, 7)))
	require.Equal(t, http.StatusNoContent, code, msg)

	// Reading over [MinInt64, MaxInt64] finds it.
	got := remoteRead(t, f.srv.URL+"/api/v1/read", &prompb.Query{
		StartTimestampMs: math.MinInt64, EndTimestampMs: math.MaxInt64,
		Matchers: []*prompb.LabelMatcher{{Type: prompb.LabelMatcher_EQ, Name: "__name__", Value: "edge"}},
	})
	require.Len(t, got, 1)
	require.Equal(t, []prompb.Sample{{Timestamp: now, Value: 7}}, got[0].Samples)
}

// remoteRead sends one query as a plain (sampled) remote read to url and
// returns the answer's series.
func remoteRead(t *testing.T, url string, q *prompb.Query) []*prompb.TimeSeries {
	t.Helper()
	rr, err := (&prompb.ReadRequest{Queries: []*prompb.Query{q}}).Marshal()
	require.NoError(t, err)
	resp, err := http.Post(url, "application/x-protobuf", bytes.NewReader(snappy.Encode(nil, rr)))
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	raw, err := snappy.Decode(nil, body)
	require.NoError(t, err)
	var out prompb.ReadResponse
	require.NoError(t, out.Unmarshal(raw))
	require.Len(t, out.Results, 1)
	return out.Results[0].Timeseries
}
