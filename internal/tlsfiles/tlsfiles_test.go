package tlsfiles

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/internal/testcerts"
	"github.com/tessera-tsdb/tessera/internal/waitfor"
)

func leafCN(t *testing.T, c *tls.Certificate) string {
	x, err := x509.ParseCertificate(c.Certificate[0])
	require.NoError(t, err)
	return x.Subject.CommonName
}

func rotate(t *testing.T, path string, b []byte) {
	require.NoError(t, os.WriteFile(path+".tmp", b, 0o600))
	require.NoError(t, os.Rename(path+".tmp", path))
}

// TestKeyPairReload: a rotated certificate is served from the next
// handshake on (checked at most once a second), server and client side;
// a broken rotation keeps the last good pair.
func TestKeyPairReload(t *testing.T) {
	dir := t.TempDir()
	ca, err := testcerts.NewCA("ca")
	require.NoError(t, err)
	f, err := ca.WriteLeaf(dir, "node", "127.0.0.1")
	require.NoError(t, err)
	files := Files{CertFile: f.Cert, KeyFile: f.Key, CAFile: f.CA}
	srv, err := ServerMutual(files)
	require.NoError(t, err)
	cli, err := Client(files)
	require.NoError(t, err)
	require.Equal(t, tls.RequireAndVerifyClientCert, srv.ClientAuth)
	c, err := srv.GetCertificate(nil)
	require.NoError(t, err)
	require.Equal(t, "node", leafCN(t, c))

	l, err := ca.Issue("node-rotated", "127.0.0.1")
	require.NoError(t, err)
	rotate(t, f.Key, l.KeyPEM)
	rotate(t, f.Cert, l.CertPEM)
	waitfor.Condition(t, 20*time.Second, 100*time.Millisecond, "rotated certificate", func() error {
		s, err := srv.GetCertificate(nil)
		if err != nil {
			return err
		}
		c, err := cli.GetClientCertificate(nil)
		if err != nil {
			return err
		}
		if leafCN(t, s) != "node-rotated" || leafCN(t, c) != "node-rotated" {
			return errors.New("still the old certificate")
		}
		return nil
	})

	// A half-written rotation: a fresh load fails, the running config
	// keeps serving the last good pair (looking at the files each time).
	recheckEvery = 0
	t.Cleanup(func() { recheckEvery = time.Second })
	rotate(t, f.Cert, []byte("half written"))
	_, err = ServerMutual(files)
	require.Error(t, err)
	for range 3 {
		c, err := srv.GetCertificate(nil)
		require.NoError(t, err, "a broken rotation keeps the last good pair")
		require.Equal(t, "node-rotated", leafCN(t, c))
	}
}

func TestErrorsNameTheFile(t *testing.T) {
	dir := t.TempDir()
	_, err := ServerMutual(Files{CertFile: "a", KeyFile: "b"})
	require.ErrorContains(t, err, "caFile")
	_, err = Client(Files{CAFile: filepath.Join(dir, "nope.crt")})
	require.ErrorContains(t, err, "nope.crt")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "junk.crt"), []byte("junk"), 0o600))
	_, err = Client(Files{CAFile: filepath.Join(dir, "junk.crt")})
	require.ErrorContains(t, err, "no PEM certificate")
	_, err = Client(Files{CertFile: "only-cert"})
	require.ErrorContains(t, err, "go together")
	_, err = Client(Files{CertFile: filepath.Join(dir, "x.crt"), KeyFile: filepath.Join(dir, "x.key")})
	require.ErrorContains(t, err, "x.crt")
}
