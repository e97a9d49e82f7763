package config

import (
	"net/url"
	"strconv"
)

// Security holds the node-wide security switches.
type Security struct {
	// AllowInsecure lets a node start although one of its surfaces (HTTP,
	// node RPC, embedded etcd client or peer URL) listens on a
	// non-loopback address without authentication. Without it such a node
	// refuses to start and names each open surface and the setting that
	// closes it; with it the node warns once per surface at start and
	// says so on /metrics (tessera_security_insecure_surfaces) and in the
	// console. For networks the operator closes by other means (a private
	// container network, a firewall). Default false.
	AllowInsecure bool `yaml:"allowInsecure"`
}

// TLSFiles names PEM files: a certificate and its key, and the
// certificate authority that verifies the other side.
type TLSFiles struct {
	CertFile string `yaml:"certFile"`
	KeyFile  string `yaml:"keyFile"`
	CAFile   string `yaml:"caFile"`
	// ServerName, for a client, is the name the server's certificate must
	// carry when it differs from the host dialled. Default: the host.
	ServerName string `yaml:"serverName"`
}

// Enabled reports whether any file is named.
func (t TLSFiles) Enabled() bool { return t.CertFile != "" || t.KeyFile != "" || t.CAFile != "" }

// HTTPAuth grants roles on the HTTP API. Roles: write (remote write),
// read (remote read, PromQL API, series, labels, placement reads,
// /metrics), admin (everything, including placement changes and
// /debug/pprof). /health and /ready stay open. With no user and no token
// the API is open to anyone who reaches it: the embedded default listens
// on loopback only, and a node on another address refuses to start
// unless security.allowInsecure is set.
type HTTPAuth struct {
	// Users maps each basic auth user of the web config file
	// (basic_auth_users) to its role.
	Users map[string]string `yaml:"users"`
	// Tokens are bearer tokens, each with its role.
	Tokens []BearerToken `yaml:"tokens"`
}

// BearerToken is one token: inline (Token) or in a file (TokenFile,
// re-read when it changes), never both.
type BearerToken struct {
	Role      string `yaml:"role"`
	Token     string `yaml:"token"`
	TokenFile string `yaml:"tokenFile"`
}

// Enabled reports whether any credential is configured.
func (a HTTPAuth) Enabled() bool { return len(a.Users) > 0 || len(a.Tokens) > 0 }

func validRole(r string) bool { return r == "read" || r == "write" || r == "admin" }

func (c *Config) validateSecurity(bad func(field, format string, args ...any)) {
	pair := func(field string, t TLSFiles) {
		if (t.CertFile == "") != (t.KeyFile == "") {
			bad(field, "certFile and keyFile go together (got certFile %q, keyFile %q)", t.CertFile, t.KeyFile)
		}
	}
	if len(c.HTTP.Auth.Users) > 0 && c.HTTP.WebConfigFile == "" {
		bad("http.auth.users", "basic auth users need their password hashes in http.webConfigFile (basic_auth_users)")
	}
	for u, r := range c.HTTP.Auth.Users {
		if !validRole(r) {
			bad("http.auth.users."+u, "role %q: want read, write or admin", r)
		}
	}
	for i, t := range c.HTTP.Auth.Tokens {
		f := func(n string) string { return "http.auth.tokens[" + strconv.Itoa(i) + "]." + n }
		if !validRole(t.Role) {
			bad(f("role"), "%q: want read, write or admin", t.Role)
		}
		if (t.Token == "") == (t.TokenFile == "") {
			bad(f("token"), "set exactly one of token and tokenFile")
		}
	}
	if r := c.RPC.TLS; r.Enabled() && (r.CertFile == "" || r.KeyFile == "" || r.CAFile == "") {
		bad("rpc.tls", "mutual TLS needs certFile, keyFile and caFile (got %q, %q, %q)", r.CertFile, r.KeyFile, r.CAFile)
	}
	pair("etcd.tls", c.Etcd.TLS)
	if c.Etcd.Password != "" && c.Etcd.PasswordFile != "" {
		bad("etcd.password", "set password or passwordFile, not both")
	}
	if (c.Etcd.Password != "" || c.Etcd.PasswordFile != "") && c.Etcd.Username == "" {
		bad("etcd.username", "a password needs a username")
	}
	if c.Etcd.Embedded.Enabled {
		for _, e := range []struct {
			field, url string
			tls        TLSFiles
		}{
			{"etcd.embedded.clientTLS", c.Etcd.Embedded.ClientURL, c.Etcd.Embedded.ClientTLS},
			{"etcd.embedded.peerTLS", c.Etcd.Embedded.PeerURL, c.Etcd.Embedded.PeerTLS},
		} {
			if !e.tls.Enabled() {
				continue
			}
			if e.tls.CertFile == "" || e.tls.KeyFile == "" {
				bad(e.field, "TLS needs certFile and keyFile")
			}
			if u, err := url.Parse(e.url); err == nil && u.Scheme != "https" {
				bad(e.field, "is set but the URL %q is not https://", e.url)
			}
		}
	}
}
