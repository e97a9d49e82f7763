package repair

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestStatusOverHTTPAndTable(t *testing.T) {
	c := newCluster(t, 2)
	seed(c, 1)
	r := c.repairer(0, nil)
	_, err := r.RunPass(context.Background())
	require.NoError(t, err)

	srv := httptest.NewServer(StatusHandler(r.Status))
	defer srv.Close()
	st, err := FetchStatus(context.Background(), srv.Client(), srv.URL)
	require.NoError(t, err)
	require.True(t, st.Enabled)
	require.Equal(t, time.Hour, st.Every)
	require.Equal(t, uint64(1), st.Pass.Number)
	require.Len(t, st.Shards, testShards)
	require.Equal(t, r.Status().Pass.SeriesRepaired, st.Pass.SeriesRepaired)
	require.NotZero(t, st.Pass.SeriesRepaired)

	var out bytes.Buffer
	require.NoError(t, WriteTable(&out, st, true))
	require.Contains(t, out.String(), "pass:")
	require.Contains(t, out.String(), "#1 started")
	require.Contains(t, out.String(), "SERIES DIFFERING")
	require.Equal(t, testShards+5, bytes.Count(out.Bytes(), []byte("\n")), out.String())

	// Errors name what went wrong.
	_, err = FetchStatus(context.Background(), srv.Client(), "http://127.0.0.1:1")
	require.ErrorContains(t, err, "GET http://127.0.0.1:1/api/v1/status/repair")
	notFound := httptest.NewServer(http.NotFoundHandler())
	defer notFound.Close()
	_, err = FetchStatus(context.Background(), notFound.Client(), notFound.URL)
	require.ErrorContains(t, err, "HTTP 404")
}
