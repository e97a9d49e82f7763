// Package webconfig reads the Prometheus ecosystem's web configuration
// file (exporter-toolkit's web.config.file: tls_server_config and
// basic_auth_users with bcrypt hashes) and serves HTTPS from it on a
// listener the node bound itself.
//
// The TLS part is exporter-toolkit's own: the file is parsed into its
// web.Config and turned into a tls.Config by web.ConfigToTLSConfig, again
// at every TLS handshake, so replacing the certificate files (or the web
// config) takes effect for the next connection without a restart, as in
// Prometheus. Basic auth users are not enforced here (exporter-toolkit's
// handler would require them on every path, bearer tokens and /health
// included): Users hands them to the node's role check (dbnode/httpauth).
package webconfig

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"

	"github.com/prometheus/exporter-toolkit/web"
	"go.yaml.in/yaml/v2"
)

// Load reads and validates the file (exporter-toolkit's checks: strict
// YAML, bcrypt hashes, TLS files readable), with the toolkit's defaults
// (TLS 1.2 to 1.3, HTTP/2 on) and relative paths taken from the file's
// directory.
func Load(path string) (*web.Config, error) {
	if err := web.Validate(path); err != nil {
		return nil, fmt.Errorf("web config %s: %w", path, err)
	}
	return parse(path)
}

func parse(path string) (*web.Config, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("web config: %w", err)
	}
	c := &web.Config{
		TLSConfig:  web.TLSConfig{MinVersion: tls.VersionTLS12, MaxVersion: tls.VersionTLS13},
		HTTPConfig: web.HTTPConfig{HTTP2: true},
	}
	if err := yaml.UnmarshalStrict(raw, c); err != nil {
		return nil, fmt.Errorf("web config %s: %w", path, err)
	}
	c.TLSConfig.SetDirectory(filepath.Dir(path))
	return c, nil
}

// Users returns the file's basic_auth_users (user -> bcrypt hash) as they
// are on disk now.
func Users(path string) (map[string]string, error) {
	c, err := parse(path)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(c.Users))
	for u, h := range c.Users {
		out[u] = string(h)
	}
	return out, nil
}

// TLSEnabled reports whether the file configures HTTPS.
func TLSEnabled(c *web.Config) bool { return c != nil && c.TLSConfig.IsEnabled() }

// ClientCertsRequired reports whether the file makes HTTPS require and
// verify a client certificate (client_auth_type:
// RequireAndVerifyClientCert): then every caller authenticates by its
// certificate.
func ClientCertsRequired(c *web.Config) bool {
	return TLSEnabled(c) && c.TLSConfig.ClientAuth == "RequireAndVerifyClientCert"
}

// Serve serves srv on ln: plain HTTP when path is empty or the file has no
// tls_server_config, else HTTPS with the configuration re-read at every
// handshake. A handshake whose re-read fails (a half-written file) is
// refused and logged; the next one tries again.
func Serve(ln net.Listener, srv *http.Server, path string, log *slog.Logger) error {
	if path == "" {
		return srv.Serve(ln)
	}
	c, err := Load(path)
	if err != nil {
		return err
	}
	if !TLSEnabled(c) {
		return srv.Serve(ln)
	}
	first, err := web.ConfigToTLSConfig(&c.TLSConfig)
	if err != nil {
		return fmt.Errorf("web config %s: %w", path, err)
	}
	protos := []string{"http/1.1"}
	if c.HTTPConfig.HTTP2 {
		protos = []string{"h2", "http/1.1"}
	} else {
		srv.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){}
	}
	first.NextProtos = protos
	first.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		c, err := parse(path)
		if err == nil {
			var tc *tls.Config
			if tc, err = web.ConfigToTLSConfig(&c.TLSConfig); err == nil {
				tc.NextProtos = protos
				return tc, nil
			}
		}
		log.Error("web config: cannot reload TLS settings; refusing the handshake", "file", path, "err", err)
		return nil, err
	}
	srv.TLSConfig = first
	return srv.ServeTLS(ln, "", "")
}
