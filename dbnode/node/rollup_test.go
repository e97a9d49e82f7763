package node

import (
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/config"
)

// TestRollupNamespaceStarts: a node with a rollup namespace starts (it
// used to refuse, when nothing computed rollups) and its storage knows the
// namespace as a rollup at the configured resolution, so flushes of the
// source compute it (dbnode/storage/rollup.go).
func TestRollupNamespaceStarts(t *testing.T) {
	cfg := config.Default()
	cfg.DataDir = t.TempDir()
	cfg.HTTP.Listen = "127.0.0.1:0"
	cfg.RPC.Listen = "127.0.0.1:0"
	cfg.RPC.Advertise = "127.0.0.1:0"
	cfg.Namespaces = append(cfg.Namespaces, config.Namespace{
		Name: "r5m", RollupOf: "default", Resolution: 5 * time.Minute, Retention: 90 * 24 * time.Hour,
	})
	cfg.Defaults()
	require.NoError(t, cfg.Validate())
	n, err := New(cfg, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = n.httpLn.Close()
		_ = n.rpcLn.Close()
		_ = n.closer.Close()
	})
	db, err := n.openStorage()
	require.NoError(t, err)
	defer db.Close()
	ok, res := db.IsRollup("r5m")
	require.True(t, ok)
	require.Equal(t, 5*time.Minute, res)
	ok, _ = db.IsRollup("default")
	require.False(t, ok)

	// The namespace status shows each namespace's resolution and
	// retention; a rollup that has not rolled up a block yet shows no
	// progress rather than a zero time.
	st := namespaceStatuses(db)
	require.Len(t, st, 2)
	require.Equal(t, "default", st[0].Name)
	require.Empty(t, st[0].Resolution)
	require.Equal(t, namespaceStatus{Name: "r5m", RollupOf: "default", Resolution: "5m0s", Retention: "2160h0m0s", BlockSize: st[1].BlockSize}, st[1])
	require.NotEmpty(t, st[1].BlockSize)
}
