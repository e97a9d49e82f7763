package promapi

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/prompb"
	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/dbnode/httpapi"
	"github.com/tessera-tsdb/tessera/dbnode/httpapi/httpapitest"
	"github.com/tessera-tsdb/tessera/dbnode/storage/storagetest"
	"github.com/uber-go/tally/v4"
)

// TestDamagedPageQueryWarnsRemoteReadAnswersTheRest: with a damaged
// fileset page, PromQL answers every other series plus warnings naming the
// left-out ones, and remote read (which cannot carry warnings) answers the
// same other series too, saying how many it left out in a header, and the
// damage is counted and listed on /ready. Remote read answered 500 for the
// whole query before.
func TestDamagedPageQueryWarnsRemoteReadAnswersTheRest(t *testing.T) {
	d := storagetest.OpenDamaged(t, 6000)
	scope := tally.NewTestScope("", nil)
	h := httpapitest.New(t, httpapi.Options{Namespace: "default", NumShards: 1, Metrics: scope, Backend: httpapi.Local{DB: d.DB}})
	newAPI(t, httpapi.Local{DB: d.DB}, Options{Now: d.Now}).Register(h.Mux())
	srv := httptest.NewServer(h.Handler())
	defer srv.Close()

	at := float64(d.Start+3000) / 1000
	resp, err := http.Get(srv.URL + "/api/v1/query?" + url.Values{
		"query": {"damaged_test"}, "time": {fmt.Sprint(at)},
	}.Encode())
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	var out struct {
		Status string `json:"status"`
		Data   struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
		Warnings []string `json:"warnings"`
	}
	require.NoError(t, json.Unmarshal(body, &out))
	require.Equal(t, "success", out.Status)
	require.NotEmpty(t, out.Warnings)
	require.Contains(t, out.Warnings[0], "left out of the result")
	n := len(out.Data.Result)
	require.Greater(t, n, len(d.IDs)/2, "the series of the other pages are answered")
	require.Less(t, n, len(d.IDs), "the damaged page's series are not")
	for _, r := range out.Data.Result {
		require.Equal(t, fmt.Sprint(d.Start/1000+3), r.Value[1], "values are right")
	}

	// Remote read: the same series as PromQL, and how many are left out.
	rr, err := (&prompb.ReadRequest{Queries: []*prompb.Query{{
		StartTimestampMs: d.Start, EndTimestampMs: d.Start + 10_000,
		Matchers: []*prompb.LabelMatcher{{Type: prompb.LabelMatcher_EQ, Name: "__name__", Value: "damaged_test"}},
	}}}).Marshal()
	require.NoError(t, err)
	for _, streamed := range []bool{false, true} {
		body := rr
		if streamed {
			r2 := prompb.ReadRequest{}
			require.NoError(t, r2.Unmarshal(rr))
			r2.AcceptedResponseTypes = []prompb.ReadRequest_ResponseType{prompb.ReadRequest_STREAMED_XOR_CHUNKS}
			body, err = r2.Marshal()
			require.NoError(t, err)
		}
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/api/v1/read", bytes.NewReader(snappy.Encode(nil, body)))
		require.NoError(t, err)
		req.Header.Set("Content-Encoding", "snappy")
		if streamed {
			req.Header.Set("Accept", httpapi.StreamedContentType)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		msg, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, "streamed %v: %s", streamed, msg)
		require.Equal(t, fmt.Sprint(len(d.IDs)-n), resp.Header.Get(httpapi.PartialHeader), "streamed %v", streamed)
		if streamed {
			require.Equal(t, httpapi.StreamedContentType, resp.Header.Get("Content-Type"))
			got := 0
			for b := msg; len(b) > 0; {
				l, k := binary.Uvarint(b)
				require.Greater(t, k, 0)
				require.GreaterOrEqual(t, len(b), k+4+int(l))
				var cr prompb.ChunkedReadResponse
				require.NoError(t, cr.Unmarshal(b[k+4:k+4+int(l)]))
				got += len(cr.ChunkedSeries)
				b = b[k+4+int(l):]
			}
			require.Equal(t, n, got, "the series PromQL answers, streamed")
			continue
		}
		raw, err := snappy.Decode(nil, msg)
		require.NoError(t, err)
		var rr prompb.ReadResponse
		require.NoError(t, rr.Unmarshal(raw))
		require.Len(t, rr.Results, 1)
		require.Len(t, rr.Results[0].Timeseries, n, "the series PromQL answers")
		for _, ts := range rr.Results[0].Timeseries {
			require.Len(t, ts.Samples, 3, "complete")
		}
	}
	require.Equal(t, int64(2*(len(d.IDs)-n)), scope.Snapshot().Counters()["remote_read_series_damaged+"].Value())
	resp, err = http.Get(srv.URL + "/ready")
	require.NoError(t, err)
	ready, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	resp.Body.Close()
	var rd struct {
		Damage []string `json:"damage"`
	}
	require.NoError(t, json.Unmarshal(ready, &rd))
	require.NotEmpty(t, rd.Damage, "%s", ready)
	require.Contains(t, rd.Damage[0], "damaged fileset data met by a read")
	require.Less(t, len(rd.Damage), len(d.IDs)-n+1, "one line per distinct damage")
}
