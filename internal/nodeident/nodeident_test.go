package nodeident_test

import (
	"crypto/x509"
	"encoding/pem"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/internal/nodeident"
	"github.com/tessera-tsdb/tessera/internal/testcerts"
)

func parse(t *testing.T, l testcerts.Leaf) *x509.Certificate {
	b, _ := pem.Decode(l.CertPEM)
	c, err := x509.ParseCertificate(b.Bytes)
	require.NoError(t, err)
	return c
}

// TestNodeIdentity: a node certificate names its node; the operator's and
// a plain certificate from the same CA name none, and a node given one
// says so at start (CheckOwn).
func TestNodeIdentity(t *testing.T) {
	ca, err := testcerts.NewCA("ca")
	require.NoError(t, err)
	node, err := ca.IssueNode("node7", "127.0.0.1")
	require.NoError(t, err)
	id, ok := nodeident.ID(parse(t, node))
	require.True(t, ok)
	require.Equal(t, "node7", id)
	require.Equal(t, "spiffe://tessera/node/node7", nodeident.URI("node7").String())

	op, err := ca.IssueOperator("alice")
	require.NoError(t, err)
	_, ok = nodeident.ID(parse(t, op))
	require.False(t, ok, "an operator certificate is no node")
	require.Equal(t, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, parse(t, op).ExtKeyUsage, "an operator certificate cannot serve")
	plain, err := ca.Issue("web", "127.0.0.1")
	require.NoError(t, err)
	_, ok = nodeident.ID(parse(t, plain))
	require.False(t, ok)

	dir := t.TempDir()
	f, err := ca.WriteNode(dir, "node1", "127.0.0.1")
	require.NoError(t, err)
	id, err = nodeident.CheckOwn(f.Cert)
	require.NoError(t, err)
	require.Equal(t, "node1", id)
	f, err = ca.WriteOperator(dir, "operator")
	require.NoError(t, err)
	_, err = nodeident.CheckOwn(f.Cert)
	require.ErrorContains(t, err, "not a node certificate")
}
