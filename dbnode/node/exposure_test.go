package node

import (
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/config"
)

// TestOpenSurfaces: each surface counts as open only when it listens
// beyond loopback without its kind of authentication.
func TestOpenSurfaces(t *testing.T) {
	tlsAll := config.TLSFiles{CertFile: "n.crt", KeyFile: "n.key", CAFile: "ca.crt"}
	base := func() config.Config {
		var c config.Config
		c.HTTP.Listen, c.RPC.Listen = "127.0.0.1:7201", "127.0.0.1:9000"
		c.Etcd.Embedded = config.EmbeddedEtcd{Enabled: true, ClientURL: "http://127.0.0.1:2379", PeerURL: "http://127.0.0.1:2380"}
		return c
	}
	for _, tc := range []struct {
		name string
		edit func(*config.Config)
		want string // surface names, comma separated
	}{
		{"all loopback", func(*config.Config) {}, ""},
		{"localhost", func(c *config.Config) { c.HTTP.Listen = "localhost:7201"; c.RPC.Listen = "[::1]:9000" }, ""},
		{"everything on all interfaces", func(c *config.Config) {
			c.HTTP.Listen, c.RPC.Listen = "0.0.0.0:7201", ":9000"
			c.Etcd.Embedded.ListenClientURL, c.Etcd.Embedded.ListenPeerURL = "http://0.0.0.0:2379", "http://[::]:2380"
		}, "http,rpc,etcd-client,etcd-peer"},
		{"a host name counts as reachable", func(c *config.Config) { c.RPC.Listen = "node1:9000" }, "rpc"},
		{"http with a token", func(c *config.Config) {
			c.HTTP.Listen = "0.0.0.0:7201"
			c.HTTP.Auth.Tokens = []config.BearerToken{{Role: "admin", Token: "t"}}
		}, ""},
		{"rpc with mutual TLS", func(c *config.Config) { c.RPC.Listen, c.RPC.TLS = "0.0.0.0:9000", tlsAll }, ""},
		{"etcd https with client certificates", func(c *config.Config) {
			c.Etcd.Embedded.ClientURL, c.Etcd.Embedded.ClientTLS = "https://10.0.0.1:2379", tlsAll
			c.Etcd.Embedded.PeerURL, c.Etcd.Embedded.PeerTLS = "https://10.0.0.1:2380", tlsAll
		}, ""},
		{"etcd TLS without a CA takes any client", func(c *config.Config) {
			c.Etcd.Embedded.ClientURL = "https://10.0.0.1:2379"
			c.Etcd.Embedded.ClientTLS = config.TLSFiles{CertFile: "n.crt", KeyFile: "n.key"}
		}, "etcd-client"},
		{"external etcd is not this node's surface", func(c *config.Config) {
			c.Etcd.Embedded = config.EmbeddedEtcd{}
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := base()
			tc.edit(&c)
			var names []string
			for _, s := range openSurfaces(c, false) {
				names = append(names, s.Name)
			}
			require.Equal(t, tc.want, strings.Join(names, ","))
		})
	}
}

// TestOpenNodeRefusesToStart: a node with HTTP and RPC on all interfaces
// and no authentication does not start, and the error names each surface
// and the setting that closes it; with security.allowInsecure it starts,
// warns per surface and exports the gauge.
func TestOpenNodeRefusesToStart(t *testing.T) {
	var cfg config.Config
	cfg.DataDir = t.TempDir()
	cfg.HTTP.Listen, cfg.RPC.Listen = "0.0.0.0:0", "0.0.0.0:0"
	cfg.Defaults()
	_, err := New(cfg, slog.New(slog.DiscardHandler))
	require.Error(t, err)
	for _, want := range []string{"http on 0.0.0.0:0", "set http.auth", "rpc on 0.0.0.0:0", "set rpc.tls", "security.allowInsecure: true"} {
		require.ErrorContains(t, err, want)
	}

	cfg.Security.AllowInsecure = true
	var logs logBuffer
	n, err := New(cfg, slog.New(slog.NewTextHandler(&logs, nil)))
	require.NoError(t, err)
	defer func() { n.httpLn.Close(); n.rpcLn.Close(); n.closer.Close() }()
	require.Equal(t, 2, strings.Count(logs.String(), "INSECURE:"), logs.String())
	require.NoError(t, testutil.GatherAndCompare(n.reg, strings.NewReader(`
# HELP tessera_security_insecure_surfaces 1 for each surface (http, rpc, etcd-client, etcd-peer) listening beyond loopback without authentication, let through by security.allowInsecure.
# TYPE tessera_security_insecure_surfaces gauge
tessera_security_insecure_surfaces{surface="http"} 1
tessera_security_insecure_surfaces{surface="rpc"} 1
`), "tessera_security_insecure_surfaces"))
}

// TestShippedConfigsExposure: the example configs and the secure compose
// variant open nothing beyond loopback; the plain compose configs do, and
// say so with security.allowInsecure (they would not start otherwise).
func TestShippedConfigsExposure(t *testing.T) {
	closed, err := filepath.Glob("../../config/examples/*/*.yml")
	require.NoError(t, err)
	secure, err := filepath.Glob("../../deploy/compose/secure/*.yml")
	require.NoError(t, err)
	for _, f := range append(closed, secure...) {
		c, err := config.Load(f)
		require.NoError(t, err, f)
		require.Empty(t, openSurfaces(c, false), f)
		require.False(t, c.Security.AllowInsecure, f)
	}
	plain, err := filepath.Glob("../../deploy/compose/*.yml")
	require.NoError(t, err)
	require.NotEmpty(t, plain)
	for _, f := range plain {
		c, err := config.Load(f)
		require.NoError(t, err, f)
		require.NotEmpty(t, openSurfaces(c, false), f)
		require.True(t, c.Security.AllowInsecure, "%s: listens beyond loopback without auth, so it must say allowInsecure", f)
	}
}
