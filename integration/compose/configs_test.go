package compose

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/config"
)

// TestComposeConfigsLoad checks every config baked into the image against
// the node's schema, without docker: a typo there would otherwise show up
// only as a container that keeps restarting.
func TestComposeConfigsLoad(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(repoRoot(t), "deploy", "compose", "*.yml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	seeds := 0
	for _, f := range files {
		c, err := config.Load(f)
		require.NoError(t, err, f)
		if filepath.Base(f) == "single.yml" {
			continue
		}
		require.Equal(t, "/data", c.DataDir, f)
		require.False(t, c.Cluster.AutoInit, "%s: the init service creates the placement", f)
		require.Equal(t, []string{"node1:2379", "node2:2379", "node3:2379"}, c.Etcd.Endpoints, f)
		require.Equal(t, c.ID+":9000", c.RPC.Advertise, f)
		if c.Etcd.Embedded.Enabled {
			seeds++
			require.Equal(t, "http://"+c.ID+":2379", c.Etcd.Embedded.ClientURL, f)
		}
	}
	require.Equal(t, 3, seeds, "nodes 1-3 are the etcd seeds")
}

// TestComposeSecureConfigsLoad checks deploy/compose/secure/*.yml (mounted
// by docker-compose.secure.yml) without docker: each loads, differs from
// its plain counterpart only in security settings, and reads every
// certificate, key, web config and token from /secure, where the
// override mounts $TESSERA_SECURE_DIR.
func TestComposeSecureConfigsLoad(t *testing.T) {
	root := repoRoot(t)
	files, err := filepath.Glob(filepath.Join(root, "deploy", "compose", "secure", "*.yml"))
	require.NoError(t, err)
	require.Len(t, files, 3, "node1..node3, the seeds")
	for _, f := range files {
		c, err := config.Load(f)
		require.NoError(t, err, f)
		plain, err := config.Load(filepath.Join(root, "deploy", "compose", filepath.Base(f)))
		require.NoError(t, err, f)
		require.Equal(t, plain.ID, c.ID, f)
		require.Equal(t, plain.IsolationGroup, c.IsolationGroup, f)
		require.Equal(t, plain.DataDir, c.DataDir, f)
		require.Equal(t, plain.RPC.Advertise, c.RPC.Advertise, f)
		require.Equal(t, plain.Cluster, c.Cluster, f)
		require.Equal(t, plain.Etcd.Endpoints, c.Etcd.Endpoints, f)
		e := c.Etcd.Embedded
		require.True(t, e.Enabled, f)
		require.Equal(t, "https://"+c.ID+":2379", e.ClientURL, f)
		require.Equal(t, "https://"+c.ID+":2380", e.PeerURL, f)
		require.Equal(t, strings.ReplaceAll(plain.Etcd.Embedded.InitialCluster, "http://", "https://"), e.InitialCluster, f)

		require.Equal(t, "/secure/web-"+c.ID+".yml", c.HTTP.WebConfigFile, f)
		own := config.TLSFiles{CertFile: "/secure/" + c.ID + ".crt", KeyFile: "/secure/" + c.ID + ".key", CAFile: "/secure/ca.crt"}
		for what, tls := range map[string]config.TLSFiles{"rpc.tls": c.RPC.TLS, "etcd.tls": c.Etcd.TLS, "clientTLS": e.ClientTLS, "peerTLS": e.PeerTLS} {
			require.Equal(t, own, tls, "%s: %s", f, what)
		}
		require.Equal(t, map[string]string{"grafana": "read"}, c.HTTP.Auth.Users, f)
		for _, tok := range c.HTTP.Auth.Tokens {
			require.Equal(t, "/secure/"+tok.Role+".token", tok.TokenFile, f)
		}
	}
}
