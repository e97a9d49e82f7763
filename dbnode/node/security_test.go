package node

import (
	"bytes"
	"context"
	"go.uber.org/zap"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/config"
	"github.com/tessera-tsdb/tessera/internal/testcerts"
	"github.com/tessera-tsdb/tessera/placement/etcdtest"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}

// TestEmbeddedEtcdTLSAndAuth starts the node's embedded etcd with TLS on
// its client and peer URLs (client certificates required), turns on etcd
// auth, and connects as the node does (etcd.tls + username/password).
func TestEmbeddedEtcdTLSAndAuth(t *testing.T) {
	dir := t.TempDir()
	ca, err := testcerts.NewCA("cluster CA")
	require.NoError(t, err)
	f, err := ca.WriteLeaf(dir, "node1", "127.0.0.1", "localhost")
	require.NoError(t, err)
	tf := config.TLSFiles{CertFile: f.Cert, KeyFile: f.Key, CAFile: f.CA}

	var cfg config.Config
	cfg.DataDir = filepath.Join(dir, "data")
	cfg.Etcd.Embedded.Enabled = true
	cfg.Etcd.Embedded.ClientURL = "https://" + freeAddr(t)
	cfg.Etcd.Embedded.PeerURL = "https://" + freeAddr(t)
	cfg.Etcd.Embedded.ClientTLS = tf
	cfg.Etcd.Embedded.PeerTLS = tf
	cfg.Etcd.TLS = tf
	cfg.Defaults()
	require.NoError(t, cfg.Validate())
	e, err := startEmbeddedEtcd(cfg, freeBytes, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	t.Cleanup(e.Close)

	connect := func(et config.Etcd) (*clientv3.Client, error) {
		c := clientv3.Config{Endpoints: cfg.Etcd.Endpoints, DialTimeout: 10 * time.Second, Logger: zap.NewNop()}
		if err := etcdClientConfig(et, &c); err != nil {
			return nil, err
		}
		return clientv3.New(c)
	}
	put := func(et config.Etcd) error {
		c, err := connect(et)
		if err != nil {
			return err
		}
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err = c.Put(ctx, "k", "v")
		return err
	}

	// Turn etcd auth on: a root user with a password.
	admin, err := connect(cfg.Etcd)
	require.NoError(t, err)
	etcdtest.EnableAuth(t, admin, "s3cret")
	admin.Close()

	pwFile := filepath.Join(dir, "etcd.password")
	require.NoError(t, os.WriteFile(pwFile, []byte("s3cret\n"), 0o600))
	good := cfg.Etcd
	good.Username, good.PasswordFile = "root", pwFile
	require.NoError(t, put(good), "TLS client certificate and password")

	inline := good
	inline.PasswordFile, inline.Password = "", "s3cret"
	require.NoError(t, put(inline))

	wrongPw := good
	wrongPw.PasswordFile, wrongPw.Password = "", "guess"
	require.ErrorContains(t, put(wrongPw), "authentication failed")

	noAuth := cfg.Etcd
	require.Error(t, put(noAuth), "auth is on: no user, no write")

	// Without the CA the client refuses the server; without a client
	// certificate the server refuses the client.
	noCA := good
	noCA.TLS.CAFile = ""
	require.Error(t, put(noCA))
	noCert := good
	noCert.TLS.CertFile, noCert.TLS.KeyFile = "", ""
	require.Error(t, put(noCert))
}

// logBuffer is a goroutine-safe log sink.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestWarnsCredentialsInClear: a node whose HTTP API listens beyond
// loopback with credentials but over plain HTTP says so at start; on
// loopback it does not.
func TestWarnsCredentialsInClear(t *testing.T) {
	for _, tc := range []struct {
		name   string
		listen string
		warn   bool
	}{
		{"all interfaces, token, plain HTTP", "0.0.0.0:0", true},
		{"loopback, token, plain HTTP", "127.0.0.1:0", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var cfg config.Config
			cfg.DataDir = t.TempDir()
			cfg.HTTP.Listen = tc.listen
			cfg.RPC.Listen = "127.0.0.1:0"
			cfg.HTTP.Auth.Tokens = []config.BearerToken{{Role: "admin", Token: "t"}}
			cfg.Defaults()
			var logs logBuffer
			n, err := New(cfg, slog.New(slog.NewTextHandler(&logs, nil)))
			require.NoError(t, err)
			n.httpLn.Close()
			n.rpcLn.Close()
			n.closer.Close()
			if tc.warn {
				require.Contains(t, logs.String(), "WITHOUT TLS", "credentials over plain HTTP beyond loopback")
			} else {
				require.NotContains(t, logs.String(), "WITHOUT TLS")
			}
		})
	}
}
