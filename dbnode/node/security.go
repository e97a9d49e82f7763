package node

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"

	"github.com/tessera-tsdb/tessera/config"
	"github.com/tessera-tsdb/tessera/dbnode/httpauth"
	"github.com/tessera-tsdb/tessera/dbnode/webconfig"
	"github.com/tessera-tsdb/tessera/internal/nodeident"
	"github.com/tessera-tsdb/tessera/internal/tlsfiles"
	"github.com/uber-go/tally/v4"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// security is what the node needs from its TLS and auth settings, built
// once in New so a bad file fails start-up with its name.
type security struct {
	auth    *httpauth.Authenticator
	httpsOn bool
	// httpClientCerts: the web config requires client certificates, which
	// authenticates every HTTP caller.
	httpClientCerts bool
	rpcServer       *tls.Config // nil: plaintext
	rpcClient       *tls.Config
	// httpsProbe is rpc.tls as a plain client of the cluster CA, for the
	// console's probes of other nodes' HTTPS (which need not serve node
	// certificates).
	httpsProbe *tls.Config
}

func newSecurity(cfg config.Config, log *slog.Logger, metrics tally.Scope) (*security, error) {
	s := &security{}
	opts := httpauth.Options{Logger: log, Metrics: metrics, Roles: map[string]httpauth.Role{}}
	if f := cfg.HTTP.WebConfigFile; f != "" {
		wc, err := webconfig.Load(f)
		if err != nil {
			return nil, fmt.Errorf("http.webConfigFile: %w", err)
		}
		s.httpsOn = webconfig.TLSEnabled(wc)
		s.httpClientCerts = webconfig.ClientCertsRequired(wc)
		if len(wc.Users) > 0 {
			opts.Users = func() (map[string]string, error) { return webconfig.Users(f) }
		}
	}
	for u, r := range cfg.HTTP.Auth.Users {
		role, err := httpauth.ParseRole(r)
		if err != nil {
			return nil, fmt.Errorf("http.auth.users.%s: %w", u, err)
		}
		opts.Roles[u] = role
	}
	for i, t := range cfg.HTTP.Auth.Tokens {
		role, err := httpauth.ParseRole(t.Role)
		if err != nil {
			return nil, fmt.Errorf("http.auth.tokens[%d].role: %w", i, err)
		}
		opts.Tokens = append(opts.Tokens, httpauth.Token{Role: role, Value: t.Token, File: t.TokenFile})
	}
	var err error
	if s.auth, err = httpauth.New(opts); err != nil {
		return nil, fmt.Errorf("http.auth: %w", err)
	}
	if r := cfg.RPC.TLS; r.Enabled() {
		// Both ends of the node RPC must be nodes (internal/nodeident),
		// not merely hold a certificate from the CA: the operator's etcd
		// client certificate comes from the same CA.
		id, err := nodeident.CheckOwn(r.CertFile)
		if err != nil {
			return nil, fmt.Errorf("rpc.tls.certFile: %w", err)
		}
		if id != cfg.ID {
			log.Warn("the node certificate names another node ID than this node's", "certificate", id, "id", cfg.ID, "file", r.CertFile)
		}
		files := tlsFiles(r)
		if s.rpcServer, err = tlsfiles.ServerMutual(files); err != nil {
			return nil, fmt.Errorf("rpc.tls: %w", err)
		}
		nodeident.Require(s.rpcServer, nodeident.ServerSide)
		if s.httpsProbe, err = tlsfiles.Client(files); err != nil {
			return nil, fmt.Errorf("rpc.tls: %w", err)
		}
		s.rpcClient = nodeident.Require(s.httpsProbe.Clone(), nodeident.ClientSide)
	}
	return s, nil
}

// warnIfOpen logs, once at start, that credentials cross the network in
// clear: an HTTP API with authentication reachable beyond this machine
// over plain HTTP. (Without authentication there, the node refuses to
// start unless security.allowInsecure says otherwise: checkExposure.)
func (s *security) warnIfOpen(log *slog.Logger, addr net.Addr) {
	if isLoopback(addr) || !s.auth.Enabled() || s.httpsOn {
		return
	}
	log.Warn("HTTP API listens on a non-loopback address with authentication but WITHOUT TLS: passwords and tokens cross the network in clear; add tls_server_config to http.webConfigFile",
		"http", addr.String())
}

func isLoopback(addr net.Addr) bool {
	ta, ok := addr.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}

// handler puts the role check in front of h.
func (s *security) handler(h http.Handler) http.Handler { return s.auth.Wrap(h) }

func tlsFiles(t config.TLSFiles) tlsfiles.Files {
	return tlsfiles.Files{CertFile: t.CertFile, KeyFile: t.KeyFile, CAFile: t.CAFile, ServerName: t.ServerName}
}

// etcdClientConfig adds etcd.tls and etcd.username/password to c.
func etcdClientConfig(e config.Etcd, c *clientv3.Config) error {
	if e.TLS.Enabled() {
		tc, err := tlsfiles.Client(tlsFiles(e.TLS))
		if err != nil {
			return fmt.Errorf("etcd.tls: %w", err)
		}
		c.TLS = tc
	}
	if e.Username != "" {
		c.Username = e.Username
		c.Password = e.Password
		if e.PasswordFile != "" {
			b, err := os.ReadFile(e.PasswordFile)
			if err != nil {
				return fmt.Errorf("etcd.passwordFile: %w", err)
			}
			c.Password = strings.TrimSpace(string(b))
		}
	}
	return nil
}
