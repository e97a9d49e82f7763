package promapi

import (
	"bytes"
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
	"github.com/tessera-tsdb/tessera/dbnode/storage/storagetest"
)

// TestDamagedPageQueryWarnsRemoteReadFails: with a damaged fileset page,
// PromQL answers every other series plus warnings naming the left-out
// ones, and remote read (which cannot carry warnings) fails with a 500
// naming the damage instead of answering partial data as complete.
func TestDamagedPageQueryWarnsRemoteReadFails(t *testing.T) {
	d := storagetest.OpenDamaged(t, 6000)
	h := httpapi.New(httpapi.Options{Namespace: "default", NumShards: 1})
	h.SetBackend(httpapi.Local{DB: d.DB})
	h.SetReady("")
	New(httpapi.Local{DB: d.DB}, Options{Now: d.Now}).Register(h.Mux())
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

	// Remote read: 500 with the reason.
	rr, err := (&prompb.ReadRequest{Queries: []*prompb.Query{{
		StartTimestampMs: d.Start, EndTimestampMs: d.Start + 10_000,
		Matchers: []*prompb.LabelMatcher{{Type: prompb.LabelMatcher_EQ, Name: "__name__", Value: "damaged_test"}},
	}}}).Marshal()
	require.NoError(t, err)
	for _, streamed := range []bool{false, true} {
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/api/v1/read", bytes.NewReader(snappy.Encode(nil, rr)))
		require.NoError(t, err)
		req.Header.Set("Content-Encoding", "snappy")
		if streamed {
			req.Header.Set("Accept", httpapi.StreamedContentType)
			r2 := prompb.ReadRequest{}
			require.NoError(t, r2.Unmarshal(rr))
			r2.AcceptedResponseTypes = []prompb.ReadRequest_ResponseType{prompb.ReadRequest_STREAMED_XOR_CHUNKS}
			b, err := r2.Marshal()
			require.NoError(t, err)
			req.Body = io.NopCloser(bytes.NewReader(snappy.Encode(nil, b)))
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		msg, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusInternalServerError, resp.StatusCode, "streamed %v: %s", streamed, msg)
		require.Contains(t, string(msg), "damaged fileset data")
	}
}
