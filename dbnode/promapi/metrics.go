package promapi

import (
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/uber-go/tally/v4"
)

// Instrument counts and times the query API's requests on their way to
// next (the node's root handler): tessera_query_requests_total{endpoint,code}
// and tessera_query_request_duration_seconds{endpoint} with scope
// "tessera_query". Other paths pass through untouched. It sits in front
// of the mux rather than inside Register so the routes stay one list.
func Instrument(next http.Handler, scope tally.Scope) http.Handler {
	m := &queryMetrics{scope: scope, requests: map[[2]string]tally.Counter{}, latency: map[string]tally.Histogram{}}
	// Created up front, so dashboards see every series from the start.
	for _, e := range queryEndpoints {
		m.histogram(e)
		m.counter(e, "2xx")
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		endpoint := queryEndpoint(r.URL.Path)
		if endpoint == "" {
			next.ServeHTTP(w, r)
			return
		}
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		next.ServeHTTP(sw, r)
		m.histogram(endpoint).RecordDuration(time.Since(start))
		m.counter(endpoint, codeClass(sw.code)).Inc(1)
	})
}

// queryEndpoints are the endpoint label values, one per query API route.
var queryEndpoints = []string{"query", "query_range", "series", "labels", "label_values"}

func queryEndpoint(path string) string {
	switch path {
	case "/api/v1/query":
		return "query"
	case "/api/v1/query_range":
		return "query_range"
	case "/api/v1/series":
		return "series"
	case "/api/v1/labels":
		return "labels"
	}
	if strings.HasPrefix(path, "/api/v1/label/") && strings.HasSuffix(path, "/values") {
		return "label_values"
	}
	return ""
}

func codeClass(code int) string {
	switch {
	case code < 300:
		return "2xx"
	case code < 500:
		return "4xx"
	default:
		return "5xx"
	}
}

var queryBuckets = tally.DurationBuckets{time.Millisecond, 5 * time.Millisecond, 25 * time.Millisecond,
	100 * time.Millisecond, 500 * time.Millisecond, time.Second, 5 * time.Second, 30 * time.Second, 2 * time.Minute}

type queryMetrics struct {
	scope    tally.Scope
	mu       sync.Mutex
	requests map[[2]string]tally.Counter
	latency  map[string]tally.Histogram
}

func (m *queryMetrics) counter(endpoint, code string) tally.Counter {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := [2]string{endpoint, code}
	c, ok := m.requests[k]
	if !ok {
		c = m.scope.Tagged(map[string]string{"endpoint": endpoint, "code": code}).Counter("requests")
		m.requests[k] = c
	}
	return c
}

func (m *queryMetrics) histogram(endpoint string) tally.Histogram {
	m.mu.Lock()
	defer m.mu.Unlock()
	h, ok := m.latency[endpoint]
	if !ok {
		h = m.scope.Tagged(map[string]string{"endpoint": endpoint}).Histogram("request_duration_seconds", queryBuckets)
		m.latency[endpoint] = h
	}
	return h
}

// statusWriter remembers the status code written.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	w.code = code
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
