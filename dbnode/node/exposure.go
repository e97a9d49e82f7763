package node

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"

	prom "github.com/prometheus/client_golang/prometheus"
	"github.com/tessera-tsdb/tessera/config"
)

// openSurface is one listener reachable beyond this machine that takes
// any caller: what it is, where it listens and the setting that closes it.
type openSurface struct {
	Name string // http, rpc, etcd-client, etcd-peer
	Addr string
	Fix  string
}

// openSurfaces lists the node's surfaces that listen on a non-loopback
// address without authentication. What counts as authentication, per
// surface:
//
//   - http: http.auth (basic auth users or bearer tokens with roles), or
//     client certificates required by http.webConfigFile
//     (client_auth_type: RequireAndVerifyClientCert), httpClientCerts;
//   - rpc: mutual TLS (rpc.tls);
//   - etcd-client, etcd-peer: the embedded member's URL is https:// and
//     its TLS names a CA, so client certificates are required
//     (etcd.embedded.clientTLS / peerTLS with caFile).
//
// An address is loopback when its host is a loopback IP or "localhost";
// an empty host, 0.0.0.0, :: and any other name count as reachable (a
// name may resolve anywhere, and the check runs before binding).
func openSurfaces(cfg config.Config, httpClientCerts bool) []openSurface {
	var out []openSurface
	if !loopbackHostPort(cfg.HTTP.Listen) && !cfg.HTTP.Auth.Enabled() && !httpClientCerts {
		out = append(out, openSurface{"http", cfg.HTTP.Listen,
			"set http.auth (users with http.webConfigFile basic_auth_users, or tokens), or require client certificates in http.webConfigFile"})
	}
	if !loopbackHostPort(cfg.RPC.Listen) && !cfg.RPC.TLS.Enabled() {
		out = append(out, openSurface{"rpc", cfg.RPC.Listen,
			"set rpc.tls (certFile, keyFile, caFile: mutual TLS with node certificates)"})
	}
	if e := cfg.Etcd.Embedded; e.Enabled {
		for _, s := range []struct {
			name, listen, field string
			tls                 config.TLSFiles
		}{
			{"etcd-client", firstNonEmpty(e.ListenClientURL, e.ClientURL), "etcd.embedded.clientTLS", e.ClientTLS},
			{"etcd-peer", firstNonEmpty(e.ListenPeerURL, e.PeerURL), "etcd.embedded.peerTLS", e.PeerTLS},
		} {
			u, err := url.Parse(s.listen)
			if err != nil || loopbackHost(u.Hostname()) {
				continue // a bad URL fails the member's start with its name
			}
			if u.Scheme == "https" && s.tls.CAFile != "" && s.tls.CertFile != "" {
				continue
			}
			out = append(out, openSurface{s.name, s.listen,
				"serve it over https:// and set " + s.field + " (certFile, keyFile and caFile: client certificates required)"})
		}
	}
	return out
}

// errOpenSurfaces is the refusal to start, naming each surface.
func errOpenSurfaces(open []openSurface) error {
	var b strings.Builder
	b.WriteString("refusing to start: listening beyond loopback without authentication")
	for _, s := range open {
		fmt.Fprintf(&b, "; %s on %s (%s)", s.Name, s.Addr, s.Fix)
	}
	b.WriteString("; or, on a network closed by other means, set security.allowInsecure: true")
	return errors.New(b.String())
}

// checkExposure refuses a node with open surfaces unless the operator
// allowed it, and then warns once per surface. It returns the surfaces
// for the gauge and the console.
func checkExposure(cfg config.Config, httpClientCerts bool, log *slog.Logger) ([]openSurface, error) {
	open := openSurfaces(cfg, httpClientCerts)
	if len(open) == 0 {
		return nil, nil
	}
	if !cfg.Security.AllowInsecure {
		return nil, errOpenSurfaces(open)
	}
	for _, s := range open {
		log.Warn("INSECURE: "+s.Name+" listens beyond loopback WITHOUT authentication (security.allowInsecure is true): anyone who reaches it gets in; "+s.Fix,
			"surface", s.Name, "listen", s.Addr)
	}
	return open, nil
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func loopbackHostPort(hostport string) bool {
	h, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return false
	}
	return loopbackHost(h)
}

func loopbackHost(h string) bool {
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// insecureGauge publishes tessera_security_insecure_surfaces{surface} = 1
// for each open surface, so a dashboard or an alert sees a node that runs
// with security.allowInsecure; a closed node has no series.
func insecureGauge(reg prom.Registerer, open []openSurface) {
	g := prom.NewGaugeVec(prom.GaugeOpts{
		Name: "tessera_security_insecure_surfaces",
		Help: "1 for each surface (http, rpc, etcd-client, etcd-peer) listening beyond loopback without authentication, let through by security.allowInsecure.",
	}, []string{"surface"})
	reg.MustRegister(g)
	for _, s := range open {
		g.WithLabelValues(s.Name).Set(1)
	}
}
