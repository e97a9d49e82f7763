package node

import (
	"context"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/config"
	"github.com/tessera-tsdb/tessera/internal/waitfor"
)

// TestRunReturnsConsistencyLevelErrors: a consistency level the client
// cannot parse fails Run naming the field (Run used to drop the parse
// error and build a session with the zero level), before etcd or storage
// start, and the listeners New bound are released.
func TestRunReturnsConsistencyLevelErrors(t *testing.T) {
	for _, tc := range []struct {
		field string
		set   func(*config.Cluster)
	}{
		{"cluster.writeConsistency", func(c *config.Cluster) { c.WriteConsistency = "quorum" }},
		{"cluster.readConsistency", func(c *config.Cluster) { c.ReadConsistency = "most" }},
	} {
		t.Run(tc.field, func(t *testing.T) {
			cfg := config.Default()
			cfg.DataDir = t.TempDir()
			cfg.HTTP.Listen = "127.0.0.1:0"
			cfg.RPC.Listen = "127.0.0.1:0"
			cfg.RPC.Advertise = "127.0.0.1:0"
			n, err := New(cfg, slog.New(slog.DiscardHandler))
			require.NoError(t, err)
			httpAddr, rpcAddr := n.HTTPAddr(), n.RPCAddr()
			// Validate refuses these spellings, so the only way to reach
			// Run with one is a config changed after New.
			tc.set(&n.cfg.Cluster)
			err = n.Run(context.Background())
			require.ErrorContains(t, err, tc.field)
			require.Nil(t, n.DB(), "storage must not open on a bad level")
			// The HTTP server's goroutine closes its listener as it
			// returns, which may be just after Run did.
			for _, a := range []string{httpAddr, rpcAddr} {
				waitfor.Condition(t, 10*time.Second, 10*time.Millisecond, "Run released "+a, func() error {
					ln, err := net.Listen("tcp", a)
					if err != nil {
						return err
					}
					return ln.Close()
				})
			}
		})
	}
}
