package client

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/dbnode/vfs"
	"github.com/tessera-tsdb/tessera/placement"
)

func testPlacement(t *testing.T, version int64) placement.Placement {
	t.Helper()
	p, err := placement.Init([]placement.Instance{
		{ID: "a", IsolationGroup: "r1", Endpoint: "127.0.0.1:1", Weight: 1},
		{ID: "b", IsolationGroup: "r2", Endpoint: "127.0.0.1:2", Weight: 1},
	}, 16, 2)
	require.NoError(t, err)
	p.Version = version
	return p
}

// The cached placement is what a node routes by while etcd is down, so it
// must survive a restart, and a cache that cannot be written or read must
// never take the node's current view away.
func TestTopologyCacheThroughVFS(t *testing.T) {
	path := filepath.Join(t.TempDir(), "data", "placement.json")
	fs := vfs.NewFaulty(vfs.OS())
	topo, err := NewTopology(fs, path)
	require.NoError(t, err)
	require.Nil(t, topo.Get())

	require.NoError(t, topo.Update(testPlacement(t, 3)))
	again, err := NewTopology(fs, path)
	require.NoError(t, err)
	require.NotNil(t, again.Get(), "placement not reloaded from the cache")
	require.EqualValues(t, 3, again.Get().Placement.Version)

	// A failing disk: the update still routes, the error says so, and the
	// cache keeps the previous placement intact.
	fs.Set(func(op vfs.Op, _ string, _ int) (bool, int) { return op == vfs.OpSync, 0 })
	err = topo.Update(testPlacement(t, 4))
	require.ErrorIs(t, err, vfs.ErrInjected)
	require.EqualValues(t, 4, topo.Get().Placement.Version)
	fs.Set(nil)
	again, err = NewTopology(fs, path)
	require.NoError(t, err)
	require.EqualValues(t, 3, again.Get().Placement.Version)

	// A damaged cache is ignored: etcd has the truth.
	require.NoError(t, os.WriteFile(path, []byte("{not json"), 0o644))
	again, err = NewTopology(fs, path)
	require.NoError(t, err)
	require.Nil(t, again.Get())
}
