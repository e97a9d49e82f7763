package crosssite

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const placementPath = "/api/v1/services/tessera/placement"

// TestGuard: what a browser page can send to a node is refused, with the
// reason; what Prometheus, the OTLP SDKs, the collector, the console page
// itself and curl send passes.
func TestGuard(t *testing.T) {
	reached := false
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reached = true })
	for _, tc := range []struct {
		name     string
		loopback bool
		method   string
		path     string
		host     string
		headers  map[string]string
		want     int
		why      string
	}{
		{"form POST text/plain to the placement", true, "POST", placementPath, "127.0.0.1:7201",
			map[string]string{"Content-Type": "text/plain"}, 415, `Content-Type "text/plain" is not application/json`},
		{"form POST urlencoded to the placement", false, "POST", placementPath + "/init", "10.0.0.1:7201",
			map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, 415, "not application/json"},
		{"POST without a Content-Type", false, "POST", placementPath + "/mark-available", "10.0.0.1:7201", nil, 415, "has none"},
		{"cross-site by Sec-Fetch-Site", false, "POST", placementPath, "10.0.0.1:7201",
			map[string]string{"Content-Type": "application/json", "Sec-Fetch-Site": "cross-site"}, 403, "Sec-Fetch-Site"},
		{"same-site is another origin too", false, "DELETE", placementPath + "/node2", "10.0.0.1:7201",
			map[string]string{"Sec-Fetch-Site": "same-site"}, 403, "cross-origin"},
		{"cross-origin by Origin", false, "POST", placementPath, "10.0.0.1:7201",
			map[string]string{"Content-Type": "application/json", "Origin": "https://evil.example"}, 403, "evil.example"},
		{"cross-site ingest from a page", false, "POST", "/api/v1/write", "10.0.0.1:7201",
			map[string]string{"Content-Type": "application/x-protobuf", "Origin": "https://evil.example"}, 403, "cross-origin"},
		{"DNS rebinding on a loopback node", true, "GET", placementPath, "evil.example:7201", nil, 403, "DNS rebinding"},
		{"DNS rebinding, a state change", true, "POST", placementPath, "evil.example:7201",
			map[string]string{"Content-Type": "application/json"}, 403, "loopback only"},

		{"the console's own POST", true, "POST", placementPath, "127.0.0.1:7201",
			map[string]string{"Content-Type": "application/json", "Origin": "http://127.0.0.1:7201", "Sec-Fetch-Site": "same-origin"}, 200, ""},
		{"the console's DELETE (no body)", true, "DELETE", placementPath + "/node4", "localhost:7201",
			map[string]string{"Origin": "http://localhost:7201", "Sec-Fetch-Site": "same-origin"}, 200, ""},
		{"curl with JSON", false, "POST", placementPath + "/init", "node1:7201",
			map[string]string{"Content-Type": "application/json; charset=utf-8"}, 200, ""},
		{"Prometheus remote write", false, "POST", "/api/v1/prom/remote/write", "node1:7201",
			map[string]string{"Content-Type": "application/x-protobuf", "Content-Encoding": "snappy"}, 200, ""},
		{"OTLP collector", true, "POST", "/api/v1/otlp/v1/metrics", "127.0.0.1:7201",
			map[string]string{"Content-Type": "application/x-protobuf"}, 200, ""},
		{"Grafana's PromQL POST form", false, "POST", "/api/v1/query", "node1:7201",
			map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, 200, ""},
		{"reads on a non-loopback node take any Host", false, "GET", placementPath, "tessera.example:7201", nil, 200, ""},
		{"IPv6 loopback", true, "GET", "/ready", "[::1]:7201", nil, 200, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reached = false
			r := httptest.NewRequest(tc.method, "http://"+tc.host+tc.path, strings.NewReader(`{"instances":[{"id":"evil"}]}`))
			if tc.method == "DELETE" {
				r = httptest.NewRequest(tc.method, "http://"+tc.host+tc.path, nil)
			}
			r.Host = tc.host
			for k, v := range tc.headers {
				r.Header.Set(k, v)
			}
			w := httptest.NewRecorder()
			Guard(next, Options{LoopbackOnly: tc.loopback}).ServeHTTP(w, r)
			require.Equal(t, tc.want, w.Code, w.Body.String())
			require.Equal(t, tc.want == 200, reached)
			require.Contains(t, w.Body.String(), tc.why)
		})
	}
}
