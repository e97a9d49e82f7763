package rpc

import (
	"context"
	"crypto/tls"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/dbnode/commitlog"
	"github.com/tessera-tsdb/tessera/internal/nodeident"
	"github.com/tessera-tsdb/tessera/internal/testcerts"
	"github.com/tessera-tsdb/tessera/internal/tlsfiles"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// mtlsFiles are the certificates mtlsFixture wrote: a cluster CA's
// server and client node certificates, an operator certificate and a
// plain one (no node identity) from the same CA, and a node certificate
// from a second CA. Every set trusts the cluster CA.
type mtlsFiles struct {
	server, client, operator, plain, foreign tlsfiles.Files
}

func mtlsFixture(t *testing.T) mtlsFiles {
	t.Helper()
	dir := t.TempDir()
	ca, err := testcerts.NewCA("cluster CA")
	require.NoError(t, err)
	s, err := ca.WriteNode(dir, "node1", "127.0.0.1", "localhost")
	require.NoError(t, err)
	c, err := ca.WriteNode(dir, "node2", "127.0.0.1")
	require.NoError(t, err)
	op, err := ca.WriteOperator(dir, "operator")
	require.NoError(t, err)
	pl, err := ca.WriteLeaf(dir, "plain", "127.0.0.1", "localhost")
	require.NoError(t, err)
	other, err := testcerts.NewCA("another CA")
	require.NoError(t, err)
	o, err := other.WriteNode(t.TempDir(), "intruder", "127.0.0.1")
	require.NoError(t, err)
	files := func(f testcerts.Files) tlsfiles.Files {
		return tlsfiles.Files{CertFile: f.Cert, KeyFile: f.Key, CAFile: c.CA}
	}
	return mtlsFiles{server: files(s), client: files(c), operator: files(op), plain: files(pl), foreign: files(o)}
}

// nodeServerTLS and nodeClientTLS are what the node builds from rpc.tls
// (dbnode/node/security.go): mutual TLS with the cluster CA, and a node
// certificate required of the other end.
func nodeServerTLS(t *testing.T, f tlsfiles.Files) *tls.Config {
	c, err := tlsfiles.ServerMutual(f)
	require.NoError(t, err)
	return nodeident.Require(c, nodeident.ServerSide)
}

func nodeClientTLS(t *testing.T, f tlsfiles.Files) *tls.Config {
	c, err := tlsfiles.Client(f)
	require.NoError(t, err)
	return nodeident.Require(c, nodeident.ClientSide)
}

func healthErr(c *Client) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := c.Health(ctx)
	return err
}

// TestMutualTLS runs real handshakes over loopback: a peer with a node
// certificate from the cluster CA is served; one without a client
// certificate, with the operator's certificate from the same CA (issue
// 32: it wrote and read series over the node RPC), with a certificate
// from another CA, or plaintext is refused.
func TestMutualTLS(t *testing.T) {
	fx := mtlsFixture(t)
	stc := nodeServerTLS(t, fx.server)
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
		{"node certificate", nodeClientTLS(t, fx.client), false, ""},
		{"no client certificate", clientTLS(tlsfiles.Files{CAFile: fx.client.CAFile}), true, "certificate required"},
		{"operator certificate from the cluster CA", clientTLS(fx.operator), true, "bad certificate"},
		{"plain certificate from the cluster CA", clientTLS(fx.plain), true, "bad certificate"},
		{"certificate from another CA", clientTLS(fx.foreign), true, "unknown certificate authority"},
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

// TestMutualTLSClientChecksServer: a node dialling a peer refuses a server
// whose certificate the cluster CA signed but which is not a node's.
func TestMutualTLSClientChecksServer(t *testing.T) {
	fx := mtlsFixture(t)
	db := openStorage(t, commitlog.ModeSync)
	srv, err := tlsfiles.ServerMutual(fx.plain)
	require.NoError(t, err)
	c := serve(t, db, nil, ServerOptions{NodeID: "node1", TLS: srv}, ClientOptions{TLS: nodeClientTLS(t, fx.client), Timeout: 10 * time.Second})
	err = healthErr(c)
	require.Error(t, err)
	require.Contains(t, err.Error(), "not a node certificate")
}
