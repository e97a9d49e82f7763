package promapi

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"
	tstorage "github.com/tessera-tsdb/tessera/dbnode/storage"
)

// testBase is 2025-01-01T00:00:00Z in ms.
const testBase = int64(1735689600000)

// newMemAPI serves the API over a memBackend holding series x{job} with a
// sample every 15 s for an hour from testBase.
func newMemAPI(t *testing.T, opts Options) (*httptest.Server, *memBackend) {
	t.Helper()
	b := &memBackend{}
	for _, job := range []string{"a", "b", "c"} {
		var ss []tsample
		for i := range 240 {
			ss = append(ss, tsample{testBase + int64(i)*15_000, float64(i)})
		}
		b.add(labels.FromStrings("__name__", "x", "job", job), ss...)
	}
	mux := http.NewServeMux()
	newAPI(t, b, opts).Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, b
}

// TestBadRequests checks that malformed requests answer 400 bad_data with
// Prometheus' message, before any storage is touched.
func TestBadRequests(t *testing.T) {
	srv, b := newMemAPI(t, Options{})
	cases := []struct {
		name, path string
		params     url.Values
		msg        string
	}{
		{"syntax error", "/api/v1/query", url.Values{"query": {"sum(rate(x[5m])"}},
			`invalid parameter "query": 1:16: parse error: unclosed left parenthesis`},
		{"unknown function", "/api/v1/query_range", url.Values{"query": {"nope(x)"}, "start": {"0"}, "end": {"60"}, "step": {"15"}},
			`invalid parameter "query": 1:1: parse error: unknown function with name "nope"`},
		{"empty query", "/api/v1/query", url.Values{}, `invalid parameter "query"`},
		{"range too large", "/api/v1/query_range", url.Values{"query": {"x"}, "start": {"0"}, "end": {"11001"}, "step": {"1"}},
			"exceeded maximum resolution of 11,000 points per timeseries. Try decreasing the query resolution (?step=XX)"},
		{"bad time", "/api/v1/query", url.Values{"query": {"x"}, "time": {"yesterday"}},
			`invalid parameter "time": invalid time value for 'time': cannot parse "yesterday" to a valid timestamp`},
		{"bad RFC 3339", "/api/v1/query_range", url.Values{"query": {"x"}, "start": {"2025-13-01T00:00:00Z"}, "end": {"60"}, "step": {"15"}},
			`invalid parameter "start": cannot parse "2025-13-01T00:00:00Z" to a valid timestamp`},
		{"missing end", "/api/v1/query_range", url.Values{"query": {"x"}, "start": {"0"}, "step": {"15"}},
			`invalid parameter "end": cannot parse "" to a valid timestamp`},
		{"end before start", "/api/v1/query_range", url.Values{"query": {"x"}, "start": {"60"}, "end": {"0"}, "step": {"15"}},
			`invalid parameter "end": end timestamp must not be before start time`},
		{"bad step", "/api/v1/query_range", url.Values{"query": {"x"}, "start": {"0"}, "end": {"60"}, "step": {"fast"}},
			`invalid parameter "step": cannot parse "fast" to a valid duration`},
		{"zero step", "/api/v1/query_range", url.Values{"query": {"x"}, "start": {"0"}, "end": {"60"}, "step": {"0"}},
			`invalid parameter "step": zero or negative query resolution step widths are not accepted. Try a positive integer`},
		{"bad timeout", "/api/v1/query", url.Values{"query": {"x"}, "timeout": {"soon"}},
			`invalid parameter "timeout": cannot parse "soon" to a valid duration`},
		{"zero timeout", "/api/v1/query", url.Values{"query": {"x"}, "timeout": {"0s"}},
			`invalid parameter "timeout": timeout must be positive, got 0s`},
		{"bad lookback", "/api/v1/query", url.Values{"query": {"x"}, "lookback_delta": {"long"}},
			`error parsing lookback delta duration: cannot parse "long" to a valid duration`},
		{"negative limit", "/api/v1/query", url.Values{"query": {"x"}, "limit": {"-1"}},
			`invalid parameter "limit": limit must be non-negative`},
		{"series without match", "/api/v1/series", url.Values{}, "no match[] parameter provided"},
		{"series matching everything", "/api/v1/series", url.Values{"match[]": {`{job=~".*"}`}},
			`invalid parameter "match[]": match[] must contain at least one non-empty matcher`},
		{"series bad selector", "/api/v1/series", url.Values{"match[]": {`x{`}}, `invalid parameter "match[]": 1:3: parse error`},
		{"labels bad time", "/api/v1/labels", url.Values{"start": {"then"}},
			`invalid parameter "start": invalid time value for 'start': cannot parse "then" to a valid timestamp`},
		{"label values bad selector", "/api/v1/label/job/values", url.Values{"match[]": {`{`}}, `1:2: parse error`},
		{"invalid label name", "/api/v1/label/%FF/values", url.Values{}, `invalid label name: "\xff"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, post := range []bool{false, true} {
				if post && strings.HasPrefix(c.path, "/api/v1/label/") {
					continue // GET only, as in Prometheus
				}
				var (
					code int
					r    apiResponse
				)
				if post {
					code, r = postForm(t, srv.URL+c.path, c.params)
				} else {
					code, r = get(t, srv.URL, c.path, c.params)
				}
				require.Equal(t, http.StatusBadRequest, code, r.Error)
				require.Equal(t, "error", r.Status)
				require.Equal(t, "bad_data", r.ErrorType)
				require.Contains(t, r.Error, c.msg)
			}
		})
	}
	require.Empty(t, b.recorded(), "no bad request reaches storage")
}

// TestLimits checks the timeout and max-samples limits answer as Prometheus
// does: 503 timeout and 422 execution.
func TestLimits(t *testing.T) {
	rangeQ := url.Values{"query": {"sum(rate(x[5m]))"}, "start": {fmtTime(testBase, false)},
		"end": {fmtTime(testBase+3600_000, true)}, "step": {"15s"}}

	// The backend blocks until the query's context ends, as a slow disk
	// would: the deadline, not luck, decides.
	t.Run("engine timeout", func(t *testing.T) {
		srv, b := newMemAPI(t, Options{Timeout: 50 * time.Millisecond})
		b.block = true
		code, r := get(t, srv.URL, "/api/v1/query_range", rangeQ)
		require.Equal(t, http.StatusServiceUnavailable, code, r.Error)
		require.Equal(t, "timeout", r.ErrorType)
		require.Contains(t, r.Error, "context deadline exceeded")
	})
	t.Run("request timeout", func(t *testing.T) {
		srv, b := newMemAPI(t, Options{})
		b.block = true
		p := url.Values{"timeout": {"0.05"}} // float seconds
		for k, v := range rangeQ {
			p[k] = v
		}
		code, r := get(t, srv.URL, "/api/v1/query_range", p)
		require.Equal(t, http.StatusServiceUnavailable, code, r.Error)
		require.Equal(t, "timeout", r.ErrorType)
	})
	t.Run("expired before it starts", func(t *testing.T) {
		srv, _ := newMemAPI(t, Options{Timeout: time.Nanosecond})
		code, r := get(t, srv.URL, "/api/v1/query", url.Values{"query": {"x"}, "time": {fmtTime(testBase, false)}})
		if code == http.StatusOK {
			t.Skip("the 1 ns timer had not fired yet") // never seen, but timers are not a promise
		}
		require.Equal(t, http.StatusServiceUnavailable, code, r.Error)
		require.Equal(t, "timeout", r.ErrorType)
		require.Contains(t, r.Error, "query timed out")
	})
	t.Run("max samples", func(t *testing.T) {
		srv, _ := newMemAPI(t, Options{MaxSamples: 100})
		code, r := get(t, srv.URL, "/api/v1/query_range", rangeQ)
		require.Equal(t, http.StatusUnprocessableEntity, code, r.Error)
		require.Equal(t, "execution", r.ErrorType)
		require.Equal(t, "query processing would load too many samples into memory in query execution (query.maxSamples=100)", r.Error)
	})
	t.Run("under the limits", func(t *testing.T) {
		srv, _ := newMemAPI(t, Options{MaxSamples: 1000})
		code, r := get(t, srv.URL, "/api/v1/query_range", rangeQ)
		require.Equal(t, http.StatusOK, code, r.Error)
	})
}

// TestStorageErrors checks how backend failures are classified.
func TestStorageErrors(t *testing.T) {
	cases := []struct {
		err  error
		code int
		typ  string
	}{
		{errors.New("disk on fire"), http.StatusUnprocessableEntity, "execution"},
		{fmt.Errorf("ns nope: %w", tstorage.ErrUnknownNamespace), http.StatusBadRequest, "bad_data"},
	}
	for _, c := range cases {
		t.Run(c.err.Error(), func(t *testing.T) {
			srv, b := newMemAPI(t, Options{})
			b.err = c.err
			for _, path := range []string{"/api/v1/query", "/api/v1/series", "/api/v1/labels", "/api/v1/label/job/values"} {
				code, r := get(t, srv.URL, path, url.Values{"query": {"x"}, "match[]": {"x"}, "time": {fmtTime(testBase, false)}})
				require.Equal(t, c.code, code, "%s: %s", path, r.Error)
				require.Equal(t, c.typ, r.ErrorType, path)
				require.Contains(t, r.Error, c.err.Error(), path)
			}
		})
	}
}
