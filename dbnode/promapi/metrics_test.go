package promapi

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/uber-go/tally/v4"
)

func TestInstrumentCountsQueryEndpoints(t *testing.T) {
	scope := tally.NewTestScope("", nil)
	h := Instrument(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("bad") != "" {
			w.WriteHeader(http.StatusBadRequest)
		}
	}), scope)
	for _, u := range []string{"/api/v1/query?q=1", "/api/v1/query?bad=1", "/api/v1/query_range", "/api/v1/label/job/values", "/api/v1/write"} {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, u, nil))
	}
	counts := map[string]int64{}
	for _, c := range scope.Snapshot().Counters() {
		counts[c.Tags()["endpoint"]+" "+c.Tags()["code"]] = c.Value()
	}
	require.Equal(t, int64(1), counts["query 2xx"])
	require.Equal(t, int64(1), counts["query 4xx"])
	require.Equal(t, int64(1), counts["query_range 2xx"])
	require.Equal(t, int64(1), counts["label_values 2xx"])
	require.Equal(t, int64(0), counts["series 2xx"]) // created up front, never hit
	_, other := counts[" "]
	require.False(t, other, "non-query paths are not counted")
}
