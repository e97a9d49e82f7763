package rpc

import (
	"context"
	"crypto/tls"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/dbnode/commitlog"
	"github.com/tessera-tsdb/tessera/internal/testcerts"
	"github.com/tessera-tsdb/tessera/internal/tlsfiles"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// mtlsFixture writes a cluster CA with a server and a client certificate,
// and a second CA with a client certificate of its own.
func mtlsFixture(t *testing.T) (server, client, foreign tlsfiles.Files) {
	t.Helper()
	dir := t.TempDir()
	ca, err := testcerts.NewCA("cluster CA")
	require.NoError(t, err)
	s, err := ca.WriteLeaf(dir, "node1", "127.0.0.1", "localhost")
	require.NoError(t, err)
	c, err := ca.WriteLeaf(dir, "node2", "127.0.0.1")
	require.NoError(t, err)
	other, err := testcerts.NewCA("another CA")
	require.NoError(t, err)
	odir := t.TempDir()
	o, err := other.WriteLeaf(odir, "intruder", "127.0.0.1")
	require.NoError(t, err)
	return tlsfiles.Files{CertFile: s.Cert, KeyFile: s.Key, CAFile: s.CA},
		tlsfiles.Files{CertFile: c.Cert, KeyFile: c.Key, CAFile: c.CA},
		// The intruder trusts the cluster CA (it can verify the server)
		// but its own certificate is signed by another CA.
		tlsfiles.Files{CertFile: o.Cert, KeyFile: o.Key, CAFile: c.CA}
}

func healthErr(c *Client) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := c.Health(ctx)
	return err
}

// TestMutualTLS runs real handshakes over loopback: a peer with a
// certificate from the cluster CA is served; one without a client
// certificate, one with a certificate from another CA and a plaintext one
// are refused.
func TestMutualTLS(t *testing.T) {
	srvFiles, cliFiles, foreign := mtlsFixture(t)
	stc, err := tlsfiles.ServerMutual(srvFiles)
	require.NoError(t, err)
	db := openStorage(t, commitlog.ModeSync)

	clientTLS := func(f tlsfiles.Files) *tls.Config {
		tc, err := tlsfiles.Client(f)
		require.NoError(t, err)
		return tc
	}
	cases := []struct {
		name    string
		tls     *tls.Config
		refused bool
		why     string // in the refusal
	}{
		{"cluster CA client certificate", clientTLS(cliFiles), false, ""},
		{"no client certificate", clientTLS(tlsfiles.Files{CAFile: cliFiles.CAFile}), true, "certificate required"},
		{"certificate from another CA", clientTLS(foreign), true, "unknown certificate authority"},
		{"plaintext", nil, true, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := serve(t, db, nil, ServerOptions{NodeID: "node1", TLS: stc}, ClientOptions{TLS: tc.tls, Timeout: 10 * time.Second})
			err := healthErr(c)
			if tc.refused {
				require.Error(t, err, "the server must refuse this peer")
				require.Equal(t, codes.Unavailable, status.Code(err), "%v", err)
				if tc.tls != nil {
					// The reason, read off a raw handshake: gRPC's error
					// may be the broken pipe of its first write instead.
					conn, err := tls.Dial("tcp", c.Addr(), tc.tls)
					if err == nil {
						_, err = conn.Read(make([]byte, 1))
						conn.Close()
					}
					require.ErrorContains(t, err, tc.why)
				}
				return
			}
			require.NoError(t, err)
		})
	}
}
