package httpauth

import (
	"fmt"
	"net/http"
	"strings"
)

// Role is what a principal may do. Admin may do everything; read and
// write are separate, so a Prometheus that only sends remote write cannot
// read the data back and a Grafana that only reads cannot write.
type Role uint8

const (
	// Open needs no credentials (only as a requirement, never granted).
	Open Role = iota
	// Read: remote read, the PromQL API (query, series, labels, metadata),
	// reading the placement, /metrics.
	Read
	// Write: remote write and OTLP ingest.
	Write
	// Admin: everything, and alone what changes cluster state (placement
	// changes) or exposes the process (/debug/pprof).
	Admin
)

func (r Role) String() string {
	switch r {
	case Open:
		return "open"
	case Read:
		return "read"
	case Write:
		return "write"
	case Admin:
		return "admin"
	}
	return fmt.Sprintf("role(%d)", uint8(r))
}

// ParseRole parses read, write or admin.
func ParseRole(s string) (Role, error) {
	switch s {
	case "read":
		return Read, nil
	case "write":
		return Write, nil
	case "admin":
		return Admin, nil
	}
	return Open, fmt.Errorf("role %q: want read, write or admin", s)
}

// allows reports whether a principal holding has may call an endpoint
// that needs need.
func (has Role) allows(need Role) bool {
	return need == Open || has == Admin || has == need
}

// Required is the role a request needs. The classes are by path (and for
// the placement, method); anything not named below needs admin, so a route
// added later is closed until someone classifies it.
//
//   - open: /health and /ready, which load balancers and orchestrators
//     probe without credentials and which say nothing about the data.
//   - read: /metrics. Prometheus scrapes it and its scrape config carries
//     basic auth or a bearer token as easily as remote write does; it
//     names series counts, rates and the process's internals, which is
//     more than an anonymous caller should see on a non-loopback port.
//   - read: the operator's console (dbnode/console): the page at /, its
//     assets under /console/ and the JSON it polls. It shows the placement,
//     readiness, hint queues and rates, what a reader may see anyway; its
//     placement changes call the placement API, which needs admin.
func Required(r *http.Request) Role {
	p := r.URL.Path
	switch p {
	case "/health", "/ready":
		return Open
	case "/metrics":
		return Read
	case "/", consolePath:
		return Read
	case "/api/v1/prom/remote/write", "/api/v1/write", "/api/v1/otlp/v1/metrics":
		return Write
	case "/api/v1/prom/remote/read", "/api/v1/read",
		"/api/v1/query", "/api/v1/query_range", "/api/v1/query_exemplars",
		"/api/v1/series", "/api/v1/labels", "/api/v1/metadata",
		"/api/v1/status/buildinfo", "/api/v1/format_query", "/api/v1/parse_query":
		return Read
	}
	if strings.HasPrefix(p, "/api/v1/label/") || strings.HasPrefix(p, consoleAssets) {
		return Read
	}
	get := r.Method == http.MethodGet || r.Method == http.MethodHead
	if p == placementPath && get {
		return Read
	}
	// Background work's state (hint queues, repair, backup upload and
	// restore progress): the console
	// shows it to readers, and `tessera repair status` reads it.
	if get && (p == "/api/v1/status/hints" || p == "/api/v1/status/repair" ||
		p == "/api/v1/status/backup" || p == "/api/v1/status/restore") {
		return Read
	}
	// Series counts by metric and label (the console's cardinality page):
	// what /api/v1/series already shows a reader, counted.
	if get && p == "/api/v1/status/tsdb" {
		return Read
	}
	return Admin
}

// placementPath is placementhttp.Path (not imported: that package depends
// on etcd, this one on nothing of ours).
const placementPath = "/api/v1/services/tessera/placement"

// consolePath and consoleAssets are console.Path and console.AssetPrefix
// (not imported, as above).
const (
	consolePath   = "/api/v1/console/cluster"
	consoleAssets = "/console/"
)
