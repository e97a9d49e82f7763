package integration

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/config"
	"github.com/tessera-tsdb/tessera/dbnode/rpc"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
	"github.com/tessera-tsdb/tessera/internal/testcerts"
	"github.com/tessera-tsdb/tessera/internal/tlsfiles"
	"github.com/tessera-tsdb/tessera/placement"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// secureClient trusts the cluster CA and adds one Authorization header
// (none when set is nil).
func secureClient(t *testing.T, caFile string, set func(*http.Request)) *http.Client {
	tc, err := tlsfiles.Client(tlsfiles.Files{CAFile: caFile})
	require.NoError(t, err)
	tr := &http.Transport{TLSClientConfig: tc}
	t.Cleanup(tr.CloseIdleConnections)
	if set == nil {
		return &http.Client{Transport: tr, Timeout: 30 * time.Second}
	}
	return &http.Client{Transport: withAuth{tr, set}, Timeout: 30 * time.Second}
}

// TestSecureExampleStarts runs config/examples/secure as shipped (paths
// and ports moved into the test's own directory and free ports): three
// seeds whose etcd, node RPC and HTTPS all need certificates from a
// throwaway CA (written by the same code as scripts/gencerts), with roles
// on HTTP. A placement is created over TLS etcd, every node gets ready,
// and a remote write with the write token is read back over HTTPS with
// the read user.
func TestSecureExampleStarts(t *testing.T) {
	dir := t.TempDir()
	creds, err := testcerts.WriteCluster(filepath.Join(dir, "secure"), []string{"node1", "node2", "node3"}, "127.0.0.1", "localhost")
	require.NoError(t, err)
	// One pass over the text (strings.Replacer): replacing one address
	// after another could rewrite a free port just put in, when it begins
	// with an example's port ("127.0.0.1:23721" holds "127.0.0.1:2372"),
	// and leave a six-digit port (a CI run saw 261392).
	var ports []string
	for _, p := range []string{"7201", "7202", "7203", "9001", "9002", "9003", "2371", "2372", "2373", "2381", "2382", "2383"} {
		ports = append(ports, "127.0.0.1:"+p, freePort(t))
	}
	moved := strings.NewReplacer(ports...)
	var nodes []*tnode
	for i := 1; i <= 3; i++ {
		raw, err := os.ReadFile(fmt.Sprintf("../config/examples/secure/node%d.yml", i))
		require.NoError(t, err)
		text := strings.ReplaceAll(string(raw), "./secure/", filepath.Join(dir, "secure")+"/")
		text = strings.ReplaceAll(text, "./data/", filepath.Join(dir, "data")+"/")
		text = moved.Replace(text)
		cfg, err := config.Parse(strings.NewReader(text))
		require.NoError(t, err, "node%d", i)
		nodes = append(nodes, startNode(t, cfg))
	}

	// The operator's view: etcd over TLS with the client certificate.
	tc, err := tlsfiles.Client(tlsfiles.Files{CAFile: creds.CAFile, CertFile: creds.OperatorCert, KeyFile: creds.OperatorKey})
	require.NoError(t, err)
	ec, err := clientv3.New(clientv3.Config{Endpoints: nodes[0].cfg.Etcd.Endpoints, TLS: tc, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	require.NoError(t, err)
	t.Cleanup(func() { ec.Close() })
	var ins []placement.Instance
	for _, n := range nodes {
		ins = append(ins, n.instance())
	}
	p, err := placement.Init(ins, 4096, 3)
	require.NoError(t, err)
	eventually(t, 60*time.Second, "etcd cluster of three seeds formed", func() error {
		_, err := ec.Get(t.Context(), "probe")
		return err
	})
	putPlacement(t, ec, p)

	open := secureClient(t, creds.CAFile, nil)
	for _, n := range nodes {
		url := "https://" + n.cfg.HTTP.Listen
		eventually(t, 90*time.Second, n.cfg.ID+" ready over HTTPS", func() error {
			resp, err := open.Get(url + "/ready")
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != 200 {
				return fmt.Errorf("%d %s", resp.StatusCode, b)
			}
			return nil
		})
	}

	d := newDataset()
	d.client = secureClient(t, creds.CAFile, func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+creds.WriteToken) })
	now := time.Now().UnixMilli()
	for j, n := range nodes {
		require.NoError(t, d.write("https://"+n.cfg.HTTP.Listen, 0, 100, now-int64(3-j)*1000))
	}
	d.client = secureClient(t, creds.CAFile, func(r *http.Request) { r.SetBasicAuth(creds.ReaderUser, creds.ReaderPass) })
	for _, n := range nodes {
		require.NoError(t, d.check("https://"+n.cfg.HTTP.Listen, now-60_000, now+1), "read through %s", n.cfg.ID)
	}
	// Plain HTTP is not served.
	resp, err := http.Get("http://" + nodes[0].cfg.HTTP.Listen + "/ready")
	if err == nil {
		resp.Body.Close()
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "plain HTTP on the HTTPS port")
	}

	// The operator's certificate, which just wrote the placement through
	// etcd, is from the same CA but is no node: the node RPC, which
	// writes, overwrites and reads every series without roles, refuses it
	// on every call (issue 32, case 2). A node's certificate is served.
	nodeCert, err := tlsfiles.Client(tlsfiles.Files{CAFile: creds.CAFile,
		CertFile: filepath.Join(dir, "secure", "node2.crt"), KeyFile: filepath.Join(dir, "secure", "node2.key")})
	require.NoError(t, err)
	asNode, err := rpc.Dial(nodes[0].n.RPCAddr(), rpc.ClientOptions{TLS: nodeCert, Timeout: 10 * time.Second})
	require.NoError(t, err)
	defer asNode.Close()
	_, err = asNode.Health(t.Context())
	require.NoError(t, err, "a node certificate is served")

	asOperator, err := rpc.Dial(nodes[0].n.RPCAddr(), rpc.ClientOptions{TLS: tc, Timeout: 10 * time.Second})
	require.NoError(t, err)
	defer asOperator.Close()
	_, err = asOperator.WriteBatch(t.Context(), "default", []storage.Sample{{ID: []byte(`{__name__="evil"}`), Shard: 0, T: now, V: 1}})
	require.Error(t, err, "the operator certificate must not write over the node RPC")
	_, err = asOperator.Health(t.Context())
	require.Error(t, err, "nor reach anything else on it")
	require.Equal(t, codes.Unavailable, status.Code(err), "%v", err)
}
