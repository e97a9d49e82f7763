// Package crosssite refuses, on the node's HTTP API, what a web page in an
// operator's browser could make that browser send to a node it reaches
// (on loopback too, and with the browser's cached basic auth
// credentials):
//
//   - a state-changing request from another origin: a non-safe method with
//     an Origin naming another host, or Sec-Fetch-Site cross-site or
//     same-site (net/http's CrossOriginProtection): 403 naming the header;
//   - an admin request (placement changes, console actions, anything
//     httpauth classes admin) whose body is not application/json: an HTML
//     form can send text/plain, urlencoded or multipart bodies without a
//     CORS preflight, never application/json: 415;
//   - on a node listening on loopback only, a Host header that is not a
//     loopback name (DNS rebinding: a page whose own name resolves to
//     127.0.0.1 is same-origin with itself): 403.
//
// Prometheus, the OTLP SDKs and the collector send no Origin and no
// Sec-Fetch-Site, and ingest bodies are protobuf: none of this touches
// them.
package crosssite

import (
	"fmt"
	"mime"
	"net"
	"net/http"
	"strings"

	"github.com/tessera-tsdb/tessera/dbnode/httpauth"
)

// Options configure Guard.
type Options struct {
	// LoopbackOnly says the node listens on a loopback address only: the
	// Host header must then be a loopback IP or localhost.
	LoopbackOnly bool
}

// Guard wraps next with the checks above.
func Guard(next http.Handler, opts Options) http.Handler {
	cop := http.NewCrossOriginProtection()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if opts.LoopbackOnly && !loopbackHost(r.Host) {
			http.Error(w, fmt.Sprintf("refused: Host %q is not a name of this node, which listens on loopback only (a page on another name reaching it through DNS rebinding?); use 127.0.0.1, [::1] or localhost", r.Host), http.StatusForbidden)
			return
		}
		if safe(r.Method) {
			next.ServeHTTP(w, r)
			return
		}
		if err := cop.Check(r); err != nil {
			http.Error(w, fmt.Sprintf("refused: a cross-origin request may not change state (%v; Origin %q, Sec-Fetch-Site %q, Host %q)",
				err, r.Header.Get("Origin"), r.Header.Get("Sec-Fetch-Site"), r.Host), http.StatusForbidden)
			return
		}
		if httpauth.Required(r) == httpauth.Admin {
			if why := notJSON(r); why != "" {
				http.Error(w, "refused: "+why+"; send the body as application/json (an HTML form cannot)", http.StatusUnsupportedMediaType)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

func safe(method string) bool {
	return method == http.MethodGet || method == http.MethodHead || method == http.MethodOptions
}

// notJSON says why r's body is not acceptable for a state change, or "".
// A request with no body and no Content-Type (DELETE, which no form can
// send) passes.
func notJSON(r *http.Request) string {
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		if r.ContentLength == 0 && r.Method == http.MethodDelete {
			return ""
		}
		return "a " + r.Method + " that changes state needs Content-Type: application/json, and this one has none"
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || mt != "application/json" {
		return fmt.Sprintf("Content-Type %q is not application/json", ct)
	}
	return ""
}

// loopbackHost reports whether a Host header (host or host:port) names
// loopback. An empty Host (HTTP/1.0 without one) is no browser's.
func loopbackHost(hostport string) bool {
	if hostport == "" {
		return true
	}
	h := hostport
	if sh, _, err := net.SplitHostPort(hostport); err == nil {
		h = sh
	}
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}
