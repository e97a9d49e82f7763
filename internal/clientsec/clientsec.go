// Package clientsec builds the HTTP transport the CLI's commands (bench,
// repair status) use to reach a node with HTTPS and auth on: TLS from PEM
// files, and a bearer token or basic auth added to every request. One
// place, so every command takes the same flags and behaves alike.
package clientsec

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/tessera-tsdb/tessera/internal/tlsfiles"
)

// Security are the credentials and TLS files for a node with HTTPS and
// auth on. An https:// URL verifies the node against CAFile (the system
// roots when empty).
type Security struct {
	// BearerToken is sent as "Authorization: Bearer <token>".
	BearerToken string
	// BasicAuth is "user:password".
	BasicAuth string
	// CAFile verifies the node's certificate; CertFile and KeyFile are a
	// client certificate, for a node that requires one.
	CAFile, CertFile, KeyFile string
}

// Env names the environment variables the CLI reads: secrets there stay
// out of `ps`.
const (
	EnvBearerToken = "TESSERA_BEARER_TOKEN"
	EnvBasicAuth   = "TESSERA_BASIC_AUTH"
	EnvCAFile      = "TESSERA_CA_FILE"
	EnvCertFile    = "TESSERA_CERT_FILE"
	EnvKeyFile     = "TESSERA_KEY_FILE"
)

// CredentialsFromEnv fills the bearer token and basic auth from the
// environment when neither was given on the command line.
func (s *Security) CredentialsFromEnv() {
	if s.BearerToken == "" && s.BasicAuth == "" {
		s.BearerToken = os.Getenv(EnvBearerToken)
		s.BasicAuth = os.Getenv(EnvBasicAuth)
	}
}

// Client is an HTTP client with s's TLS files and credentials, built the
// way bench builds its own, for other callers that talk to a secured
// node (the compose cluster's tests).
func (s Security) Client(timeout time.Duration) (*http.Client, error) {
	rt, err := s.Wrap(http.DefaultTransport.(*http.Transport).Clone())
	if err != nil {
		return nil, err
	}
	return &http.Client{Transport: rt, Timeout: timeout}, nil
}

// Wrap puts TLS settings on tr and returns a transport that adds the
// credentials to every request.
func (s Security) Wrap(tr *http.Transport) (http.RoundTripper, error) {
	if s.BearerToken != "" && s.BasicAuth != "" {
		return nil, errors.New("use --bearer-token or --basic-auth, not both")
	}
	files := tlsfiles.Files{CAFile: s.CAFile, CertFile: s.CertFile, KeyFile: s.KeyFile}
	if files.Enabled() {
		tc, err := tlsfiles.Client(files)
		if err != nil {
			return nil, fmt.Errorf("TLS (--ca-file, --cert-file, --key-file): %w", err)
		}
		tr.TLSClientConfig = tc
	}
	var set func(*http.Request)
	switch {
	case s.BearerToken != "":
		set = func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+s.BearerToken) }
	case s.BasicAuth != "":
		user, pw, ok := strings.Cut(s.BasicAuth, ":")
		if !ok {
			return nil, errors.New("--basic-auth wants user:password")
		}
		set = func(r *http.Request) { r.SetBasicAuth(user, pw) }
	default:
		return tr, nil
	}
	return authTransport{tr, set}, nil
}

// authTransport adds credentials to each request.
type authTransport struct {
	*http.Transport
	set func(*http.Request)
}

func (a authTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	a.set(r)
	return a.Transport.RoundTrip(r)
}
