package main

import (
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tessera-tsdb/tessera/dbnode/httpauth"
	"github.com/tessera-tsdb/tessera/dbnode/webconfig"
	"github.com/tessera-tsdb/tessera/internal/testcerts"
	"github.com/tessera-tsdb/tessera/repair"
)

// secureRepairStatus serves a repair status over HTTPS (a throwaway CA)
// behind the same role check a node uses: "read-token" may read it,
// "write-token" may not.
func secureRepairStatus(t *testing.T, st repair.Status) (url, caFile string) {
	t.Helper()
	dir := t.TempDir()
	ca, err := testcerts.NewCA("repair status CA")
	require.NoError(t, err)
	f, err := ca.WriteLeaf(dir, "node", "127.0.0.1")
	require.NoError(t, err)
	web := filepath.Join(dir, "web.yml")
	require.NoError(t, os.WriteFile(web, []byte("tls_server_config:\n  cert_file: node.crt\n  key_file: node.key\n"), 0o600))
	auth, err := httpauth.New(httpauth.Options{
		Tokens: []httpauth.Token{{Role: httpauth.Read, Value: "read-token"}, {Role: httpauth.Write, Value: "write-token"}},
	})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle(repair.StatusPath, repair.StatusHandler(func() repair.Status { return st }))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: auth.Wrap(mux), ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() { defer close(done); _ = webconfig.Serve(ln, srv, web, slog.New(slog.DiscardHandler)) }()
	t.Cleanup(func() { srv.Close(); <-done })
	return "https://" + ln.Addr().String(), f.CA
}

// TestRepairStatusSecured: `tessera repair status` reaches a node with
// HTTPS and auth on through the flags and environment bench takes, and
// says why when it cannot.
func TestRepairStatusSecured(t *testing.T) {
	want := repair.Status{Enabled: true, Every: 30 * time.Second, Total: repair.Tally{SeriesRepaired: 7}}
	url, ca := secureRepairStatus(t, want)
	run := func(env []string, args ...string) (string, error) {
		cmd := exec.Command(binary, append([]string{"repair", "status", "--url", url, "--timeout", "30s"}, args...)...)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	out, err := run([]string{"TESSERA_BEARER_TOKEN=read-token"}, "--ca-file", ca, "-o", "json")
	require.NoError(t, err, out)
	var got repair.Status
	require.NoError(t, json.Unmarshal([]byte(out), &got), out)
	require.Equal(t, want.Every, got.Every)
	require.Equal(t, int64(7), got.Total.SeriesRepaired)

	out, err = run([]string{"TESSERA_CA_FILE=" + ca}, "--bearer-token", "read-token")
	require.NoError(t, err, out)
	require.Contains(t, out, "every 30s")

	out, err = run(nil, "--ca-file", ca)
	require.Error(t, err)
	require.Contains(t, out, "HTTP 401")

	out, err = run(nil, "--ca-file", ca, "--bearer-token", "write-token")
	require.Error(t, err)
	require.Contains(t, out, "HTTP 403")

	out, err = run(nil, "--bearer-token", "read-token") // the node's CA is not trusted
	require.Error(t, err)
	require.Contains(t, out, "certificate")

	out, err = run(nil, "--ca-file", ca, "--basic-auth", "no-colon")
	require.Error(t, err)
	require.Contains(t, out, "user:password")
}
