package node

import (
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/config"
)

// TestRollupNamespaceRefusesToStart: a rollup namespace passes config
// validation but nothing computes it yet, so the node refuses to start and
// names the key, instead of serving an empty namespace.
func TestRollupNamespaceRefusesToStart(t *testing.T) {
	cfg := config.Default()
	cfg.DataDir = t.TempDir()
	cfg.Namespaces = append(cfg.Namespaces, config.Namespace{
		Name: "r5m", RollupOf: "default", Resolution: 5 * time.Minute, Retention: 90 * 24 * time.Hour,
	})
	cfg.Defaults()
	require.NoError(t, cfg.Validate())
	_, err := New(cfg, slog.New(slog.DiscardHandler))
	require.ErrorContains(t, err, `namespaces[1].rollupOf: namespace "r5m" is a rollup of "default", but this build does not compute rollups yet`)
}
