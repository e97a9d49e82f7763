package promapi

import (
	"compress/gzip"
	"errors"
	"io"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/tessera-tsdb/tessera/internal/waitfor"

	"github.com/stretchr/testify/require"
)

func TestGzipWhenAccepted(t *testing.T) {
	srv, _ := newMemAPI(t, Options{})
	u := srv.URL + "/api/v1/query_range?" + url.Values{"query": {"x"}, "start": {fmtTime(testBase, false)},
		"end": {fmtTime(testBase+3600_000, false)}, "step": {"15"}}.Encode()
	client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	defer client.CloseIdleConnections()

	plain := func(enc string) (string, []byte) {
		req, _ := http.NewRequest(http.MethodGet, u, nil)
		if enc != "" {
			req.Header.Set("Accept-Encoding", enc)
		}
		resp, err := client.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		var r io.Reader = resp.Body
		if resp.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(resp.Body)
			require.NoError(t, err)
			r = zr
		}
		b, err := io.ReadAll(r)
		require.NoError(t, err)
		return resp.Header.Get("Content-Encoding"), b
	}
	encG, bodyG := plain("gzip, deflate")
	encN, bodyN := plain("")
	encQ, _ := plain("gzip;q=0")
	require.Equal(t, "gzip", encG)
	require.Empty(t, encN)
	require.Empty(t, encQ)
	require.Equal(t, bodyN, bodyG)
}

// TestConcurrencyLimit: with one slot taken, the next query waits in the
// queue until its deadline and answers 503 timeout.
func TestConcurrencyLimit(t *testing.T) {
	srv, b := newMemAPI(t, Options{MaxConcurrency: 1})
	b.block = true
	params := func(timeout string) url.Values {
		return url.Values{"query": {"x"}, "time": {fmtTime(testBase, false)}, "timeout": {timeout}}
	}
	first := make(chan int)
	go func() { // no require here: it must not stop the test from another goroutine
		resp, err := http.Get(srv.URL + "/api/v1/query?" + params("0.5").Encode())
		if err != nil {
			first <- 0
			return
		}
		resp.Body.Close()
		first <- resp.StatusCode
	}()
	waitfor.Condition(t, 10*time.Second, time.Millisecond, "first query to reach storage", func() error {
		if len(b.recorded()) == 0 {
			return errors.New("no query recorded")
		}
		return nil
	})
	code, r := get(t, srv.URL, "/api/v1/query", params("0.05"))
	require.Equal(t, http.StatusServiceUnavailable, code, r.Error)
	require.Equal(t, "timeout", r.ErrorType)
	require.Equal(t, "query timed out in query queue", r.Error)
	require.Len(t, b.recorded(), 1, "the queued query never reached storage")
	require.Equal(t, http.StatusServiceUnavailable, <-first)
}
