package bench

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/dbnode/httpapi"
	"github.com/tessera-tsdb/tessera/dbnode/httpapi/httpapitest"
	"github.com/tessera-tsdb/tessera/dbnode/httpauth"
	"github.com/tessera-tsdb/tessera/dbnode/storage/storagetest"
	"github.com/tessera-tsdb/tessera/dbnode/webconfig"
	"github.com/tessera-tsdb/tessera/internal/testcerts"
	"golang.org/x/crypto/bcrypt"
)

// newSecureNode serves remote write and read over HTTPS (a throwaway CA)
// behind the role check. Bench both writes and reads back, so its
// credentials are admin ones; "write-only" is a token that cannot read.
func newSecureNode(t *testing.T) (url, caFile string) {
	t.Helper()
	dir := t.TempDir()
	ca, err := testcerts.NewCA("bench CA")
	require.NoError(t, err)
	f, err := ca.WriteLeaf(dir, "node", "127.0.0.1")
	require.NoError(t, err)
	h, err := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	require.NoError(t, err)
	web := filepath.Join(dir, "web.yml")
	require.NoError(t, os.WriteFile(web, []byte("tls_server_config:\n  cert_file: node.crt\n  key_file: node.key\nbasic_auth_users:\n  ops: "+string(h)+"\n"), 0o600))
	auth, err := httpauth.New(httpauth.Options{
		Users:  func() (map[string]string, error) { return webconfig.Users(web) },
		Roles:  map[string]httpauth.Role{"ops": httpauth.Admin},
		Tokens: []httpauth.Token{{Role: httpauth.Admin, Value: "bench-token"}, {Role: httpauth.Write, Value: "write-only"}},
	})
	require.NoError(t, err)
	db := storagetest.Open(t, 64, nil)
	api := httpapitest.New(t, httpapi.Options{Namespace: "default", NumShards: 64, Backend: httpapi.Local{DB: db}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: auth.Wrap(api.Handler()), ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() { defer close(done); _ = webconfig.Serve(ln, srv, web, slog.New(slog.DiscardHandler)) }()
	t.Cleanup(func() { srv.Close(); <-done })
	return "https://" + ln.Addr().String(), f.CA
}

// TestWriteVerifySecured: bench writes and verifies over HTTPS with a
// bearer token and with basic auth; without credentials, or with a role
// that cannot read back, it reports the refusal.
func TestWriteVerifySecured(t *testing.T) {
	url, ca := newSecureNode(t)
	base := Options{URL: url, Series: 50, Samples: 10, Interval: 10 * time.Second, Batch: 100,
		Concurrency: 2, Start: time.Now().Add(-time.Hour).UnixMilli(), Metric: "bench_tls"}
	for name, sec := range map[string]Security{
		"bearer": {BearerToken: "bench-token", CAFile: ca},
		"basic":  {BasicAuth: "ops:pw", CAFile: ca},
	} {
		t.Run(name, func(t *testing.T) {
			o := base
			o.Security = sec
			res, err := Write(context.Background(), o, io.Discard)
			require.NoError(t, err)
			require.Zero(t, res.Failed)
			require.NoError(t, Verify(context.Background(), o, io.Discard))
		})
	}
	o := base
	o.Security = Security{CAFile: ca}
	_, err := Write(context.Background(), o, io.Discard)
	require.ErrorContains(t, err, "HTTP 401")
	o.Security = Security{CAFile: ca, BearerToken: "write-only"}
	err = Verify(context.Background(), o, io.Discard)
	require.ErrorContains(t, err, "HTTP 403")
	o.Security = Security{BearerToken: "bench-token"} // no CA: the node is not trusted
	_, err = Write(context.Background(), o, io.Discard)
	require.ErrorContains(t, err, "certificate")
	o.Security = Security{BasicAuth: "no-colon", CAFile: ca}
	_, err = Write(context.Background(), o, io.Discard)
	require.ErrorContains(t, err, "user:password")
}
