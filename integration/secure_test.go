package integration

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"
	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/config"
	"github.com/tessera-tsdb/tessera/dbnode/rpc"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
	"github.com/tessera-tsdb/tessera/internal/testcerts"
	"github.com/tessera-tsdb/tessera/internal/tlsfiles"
	"github.com/tessera-tsdb/tessera/placement"
	"golang.org/x/crypto/bcrypt"
)

// withAuth is an http.RoundTripper that adds one Authorization header
// to what base (http.DefaultTransport when nil) sends.
type withAuth struct {
	base http.RoundTripper
	set  func(*http.Request)
}

func (a withAuth) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	a.set(r)
	if a.base == nil {
		return http.DefaultTransport.RoundTrip(r)
	}
	return a.base.RoundTrip(r)
}

func bearerClient(tok string) *http.Client {
	return &http.Client{Transport: withAuth{nil, func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+tok) }}}
}

func basicClient(user, pw string) *http.Client {
	return &http.Client{Transport: withAuth{nil, func(r *http.Request) { r.SetBasicAuth(user, pw) }}}
}

// TestSecureClusterMTLSAndRoles runs three nodes whose node RPC is mutual
// TLS (each with its own certificate from one throwaway cluster CA) and
// whose HTTP API needs credentials: a remote write with the write role
// reaches every replica over mTLS, a remote read with the read role gets
// every sample back through each node, a fourth node bootstraps its shards
// from the others over mTLS, and the wrong role, no credentials or a peer
// without a cluster certificate are refused.
func TestSecureClusterMTLSAndRoles(t *testing.T) {
	dir := t.TempDir()
	ca, err := testcerts.NewCA("tessera cluster CA")
	require.NoError(t, err)
	h, err := bcrypt.GenerateFromPassword([]byte("grafana-pw"), bcrypt.MinCost)
	require.NoError(t, err)
	web := filepath.Join(dir, "web.yml")
	require.NoError(t, os.WriteFile(web, []byte("basic_auth_users:\n  grafana: "+string(h)+"\n"), 0o600))
	var i int
	secure := func(c *config.Config) {
		i++
		f, err := ca.WriteNode(dir, c.ID, "127.0.0.1", "localhost")
		require.NoError(t, err)
		c.RPC.TLS = config.TLSFiles{CertFile: f.Cert, KeyFile: f.Key, CAFile: f.CA}
		c.HTTP.WebConfigFile = web
		c.HTTP.Auth.Users = map[string]string{"grafana": "read"}
		c.HTTP.Auth.Tokens = []config.BearerToken{
			{Role: "write", Token: "prometheus-write-token"},
			{Role: "admin", Token: "ops-admin-token"},
		}
	}
	e, nodes, ec := clusterNWith(t, 3, secure)
	require.Equal(t, 3, i)

	writer := &dataset{series: map[string][]prompb.Sample{}, client: bearerClient("prometheus-write-token")}
	now := time.Now().UnixMilli()
	for j := 0; j < 3; j++ {
		require.NoError(t, writer.write(nodes[j].url(), 0, 200, now-int64(3-j)*1000))
	}
	// Every replica holds every series: the coordinators reached their
	// peers over mutual TLS.
	for _, n := range nodes {
		res, err := n.n.DB().Query(context.Background(), "default",
			[]*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, "__name__", "it_metric")}, now-60_000, now+1, storage.QueryOptions{})
		require.NoError(t, err)
		require.Len(t, res, 200, "series on %s", n.cfg.ID)
	}
	// Read back everything through each node with the read role (basic
	// auth from the web config file), the same dataset now sent as the
	// reader.
	writer.client = basicClient("grafana", "grafana-pw")
	for _, n := range nodes {
		require.NoError(t, writer.check(n.url(), now-60_000, now+1), "read through %s", n.cfg.ID)
	}

	// The write role cannot read; the read role cannot write; nobody
	// without credentials can do either.
	_, err = remoteReadWith(bearerClient("prometheus-write-token"), nodes[0].url(), now-60_000, now+1)
	require.ErrorContains(t, err, "403")
	require.ErrorContains(t, err, "needs role read")
	readerWrites := &dataset{series: map[string][]prompb.Sample{}, client: basicClient("grafana", "grafana-pw")}
	err = readerWrites.write(nodes[1].url(), 0, 1, now)
	require.ErrorContains(t, err, "403")
	require.ErrorContains(t, err, "needs role write")
	anon := newDataset()
	require.ErrorContains(t, anon.write(nodes[2].url(), 0, 1, now), "401")
	_, err = remoteRead(nodes[2].url(), now-60_000, now+1)
	require.ErrorContains(t, err, "401")

	// Placement changes need admin; reading the placement needs read.
	for _, c := range []struct {
		client *http.Client
		method string
		path   string
		want   int
	}{
		{basicClient("grafana", "grafana-pw"), "GET", "/api/v1/services/tessera/placement", 200},
		{basicClient("grafana", "grafana-pw"), "DELETE", "/api/v1/services/tessera/placement/node3", 403},
		{bearerClient("prometheus-write-token"), "GET", "/debug/pprof/", 403},
		{bearerClient("ops-admin-token"), "GET", "/debug/pprof/", 200},
		{http.DefaultClient, "GET", "/health", 200},
		{http.DefaultClient, "GET", "/metrics", 401},
		// The console: its page and JSON need read.
		{http.DefaultClient, "GET", "/", 401},
		{http.DefaultClient, "GET", "/api/v1/console/cluster", 401},
		{basicClient("grafana", "grafana-pw"), "GET", "/", 200},
		{basicClient("grafana", "grafana-pw"), "GET", "/console/console.js", 200},
		{basicClient("grafana", "grafana-pw"), "GET", "/api/v1/console/cluster", 200},
	} {
		req, err := http.NewRequest(c.method, nodes[0].url()+c.path, nil)
		require.NoError(t, err)
		resp, err := c.client.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, c.want, resp.StatusCode, "%s %s", c.method, c.path)
	}

	// A fourth node joins: the shards it takes bootstrap from their
	// owners over mutual TLS, and every replica, read alone over mTLS,
	// holds every acknowledged sample of its shards.
	cfg4 := nodeConfig(t, "node4", "rack4", e.client)
	secure(&cfg4)
	n4 := startNode(t, cfg4)
	casPlacement(t, ec, func(p placement.Placement) (placement.Placement, error) { return placement.Add(p, n4.instance()) })
	p := settled(t, ec, 120*time.Second)
	in4, ok := p.Instance("node4")
	require.True(t, ok)
	require.NotEmpty(t, in4.Shards)
	operator, err := tlsfiles.Client(tlsfiles.Files{CertFile: filepath.Join(dir, "node1.crt"), KeyFile: filepath.Join(dir, "node1.key"), CAFile: filepath.Join(dir, "ca.crt")})
	require.NoError(t, err)
	checkEachReplicaWith(t, rpc.ClientOptions{TLS: operator}, p, writer)

	// A peer without a certificate from the cluster CA is refused by the
	// node RPC.
	tc, err := tlsfiles.Client(tlsfiles.Files{CAFile: filepath.Join(dir, "ca.crt")})
	require.NoError(t, err)
	c, err := rpc.Dial(nodes[0].n.RPCAddr(), rpc.ClientOptions{TLS: tc, Timeout: 10 * time.Second})
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Health(context.Background())
	require.Error(t, err, "a peer without a client certificate must be refused")
}
