package webconfig

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/internal/testcerts"
	"github.com/tessera-tsdb/tessera/internal/waitfor"
	"golang.org/x/crypto/bcrypt"
)

// serveFile serves "hello" with the web config at path on a loopback
// port until the test ends.
func serveFile(t *testing.T, path string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("hello"))
	}), ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- Serve(ln, srv, path, slog.New(slog.DiscardHandler)) }()
	t.Cleanup(func() {
		require.NoError(t, srv.Close())
		require.ErrorIs(t, <-done, http.ErrServerClosed)
	})
	return ln.Addr().String()
}

func clientFor(caPEM []byte, cert *tls.Certificate) *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	tc := &tls.Config{RootCAs: pool}
	if cert != nil {
		tc.Certificates = []tls.Certificate{*cert}
	}
	tr := &http.Transport{TLSClientConfig: tc, DisableKeepAlives: true}
	return &http.Client{Transport: tr, Timeout: 20 * time.Second}
}

func get(c *http.Client, url string) (string, error) {
	resp, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return fmt.Sprintf("%d %s", resp.StatusCode, b), err
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	// Write then rename, as a rotation does, so a handshake never reads
	// half a file.
	tmp := path + ".tmp"
	require.NoError(t, os.WriteFile(tmp, b, 0o600))
	require.NoError(t, os.Rename(tmp, path))
}

// TestHTTPSServedAndPlainRefused: with tls_server_config the listener
// speaks TLS only, with a certificate the generated CA verifies.
func TestHTTPSServedAndPlainRefused(t *testing.T) {
	dir := t.TempDir()
	ca, err := testcerts.NewCA("test CA")
	require.NoError(t, err)
	_, err = ca.WriteLeaf(dir, "server", "127.0.0.1")
	require.NoError(t, err)
	cfg := filepath.Join(dir, "web.yml")
	writeFile(t, cfg, []byte("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"))
	addr := serveFile(t, cfg)

	got, err := get(clientFor(ca.CertPEM, nil), "https://"+addr+"/")
	require.NoError(t, err)
	require.Equal(t, "200 hello", got)

	// Plain HTTP gets no page: Go's server answers a plaintext request on
	// a TLS port with 400 "client sent an HTTP request to an HTTPS server".
	got, err = get(http.DefaultClient, "http://"+addr+"/")
	if err == nil {
		require.True(t, strings.HasPrefix(got, "400 "), got)
		require.NotContains(t, got, "hello")
	}
	// A client that does not trust the CA refuses the server.
	_, err = get(clientFor(nil, nil), "https://"+addr+"/")
	require.ErrorContains(t, err, "certificate")
}

// TestHTTPSClientCA: client_ca_file with RequireAndVerifyClientCert
// refuses a client without a certificate from that CA.
func TestHTTPSClientCA(t *testing.T) {
	dir := t.TempDir()
	ca, err := testcerts.NewCA("test CA")
	require.NoError(t, err)
	_, err = ca.WriteLeaf(dir, "server", "127.0.0.1")
	require.NoError(t, err)
	leaf, err := ca.Issue("prometheus")
	require.NoError(t, err)
	cert, err := tls.X509KeyPair(leaf.CertPEM, leaf.KeyPEM)
	require.NoError(t, err)
	cfg := filepath.Join(dir, "web.yml")
	writeFile(t, cfg, []byte("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  client_ca_file: ca.crt\n  client_auth_type: RequireAndVerifyClientCert\n"))
	addr := serveFile(t, cfg)
	got, err := get(clientFor(ca.CertPEM, &cert), "https://"+addr+"/")
	require.NoError(t, err)
	require.Equal(t, "200 hello", got)
	_, err = get(clientFor(ca.CertPEM, nil), "https://"+addr+"/")
	require.Error(t, err)
}

// TestCertReload: replacing the certificate files takes effect for the
// next connection, without restarting the server.
func TestCertReload(t *testing.T) {
	dir := t.TempDir()
	oldCA, err := testcerts.NewCA("old CA")
	require.NoError(t, err)
	_, err = oldCA.WriteLeaf(dir, "server", "127.0.0.1")
	require.NoError(t, err)
	cfg := filepath.Join(dir, "web.yml")
	writeFile(t, cfg, []byte("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"))
	addr := serveFile(t, cfg)
	oldClient, err := get(clientFor(oldCA.CertPEM, nil), "https://"+addr+"/")
	require.NoError(t, err)
	require.Equal(t, "200 hello", oldClient)

	newCA, err := testcerts.NewCA("new CA")
	require.NoError(t, err)
	l, err := newCA.Issue("server", "127.0.0.1")
	require.NoError(t, err)
	writeFile(t, filepath.Join(dir, "server.key"), l.KeyPEM)
	writeFile(t, filepath.Join(dir, "server.crt"), l.CertPEM)
	waitfor.Condition(t, 20*time.Second, 50*time.Millisecond, "new certificate served", func() error {
		_, err := get(clientFor(newCA.CertPEM, nil), "https://"+addr+"/")
		return err
	})
	_, err = get(clientFor(oldCA.CertPEM, nil), "https://"+addr+"/")
	require.ErrorContains(t, err, "certificate", "the old certificate must be gone")
}

func TestPlainWithoutTLSSection(t *testing.T) {
	dir := t.TempDir()
	h, err := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	require.NoError(t, err)
	cfg := filepath.Join(dir, "web.yml")
	writeFile(t, cfg, []byte("basic_auth_users:\n  alice: "+string(h)+"\n"))
	addr := serveFile(t, cfg)
	got, err := get(http.DefaultClient, "http://"+addr+"/")
	require.NoError(t, err)
	// Basic auth is the role check's job, not this package's.
	require.Equal(t, "200 hello", got)
	users, err := Users(cfg)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"alice": string(h)}, users)
}

func TestLoadErrorsNameTheProblem(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "web.yml")
	writeFile(t, cfg, []byte("tls_server_config:\n  cert_file: missing.crt\n  key_file: missing.key\n"))
	_, err := Load(cfg)
	require.ErrorContains(t, err, "missing.crt")
	writeFile(t, cfg, []byte("basic_auth_users:\n  alice: not-a-bcrypt-hash\n"))
	_, err = Load(cfg)
	require.Error(t, err)
	writeFile(t, cfg, []byte("tls_server_confg: {}\n"))
	_, err = Load(cfg)
	require.ErrorContains(t, err, "tls_server_confg")
}
