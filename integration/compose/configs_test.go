package compose

import (
	"path/filepath"
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
