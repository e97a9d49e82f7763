package httpauth

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/internal/waitfor"
	"golang.org/x/crypto/bcrypt"
)

// endpoint classes, one request of each.
var classes = []struct {
	need   Role
	method string
	path   string
}{
	{Open, "GET", "/health"},
	{Open, "GET", "/ready"},
	{Read, "GET", "/metrics"},
	{Write, "POST", "/api/v1/prom/remote/write"},
	{Write, "POST", "/api/v1/write"},
	{Read, "POST", "/api/v1/prom/remote/read"},
	{Read, "GET", "/api/v1/query"},
	{Read, "POST", "/api/v1/query_range"},
	{Read, "GET", "/api/v1/series"},
	{Read, "GET", "/api/v1/labels"},
	{Read, "GET", "/api/v1/label/job/values"},
	{Read, "GET", "/api/v1/services/tessera/placement"},
	{Admin, "POST", "/api/v1/services/tessera/placement"},
	{Admin, "POST", "/api/v1/services/tessera/placement/init"},
	{Admin, "DELETE", "/api/v1/services/tessera/placement/node2"},
	{Read, "GET", "/"},
	{Read, "GET", "/console/console.js"},
	{Read, "GET", "/api/v1/console/cluster"},
	{Read, "GET", "/api/v1/status/hints"},
	{Read, "GET", "/api/v1/status/repair"},
	{Admin, "POST", "/api/v1/status/repair"},
	{Read, "GET", "/api/v1/status/backup"},
	{Read, "GET", "/api/v1/status/restore"},
	{Admin, "POST", "/api/v1/admin/snapshot"},
	{Admin, "GET", "/api/v1/admin/snapshots"},
	{Admin, "DELETE", "/api/v1/admin/snapshots/x"},
	{Admin, "POST", "/api/v1/admin/backup/upload"},
	{Read, "GET", "/api/v1/status/tsdb"},
	{Admin, "POST", "/api/v1/status/tsdb"},
	{Read, "GET", "/console/query.html"},
	{Read, "GET", "/console/cardinality.html"},
	{Admin, "POST", "/api/v1/services/tessera/placement/mark-available"},
	{Admin, "GET", "/debug/pprof/"},
	{Admin, "GET", "/debug/pprof/profile"},
	{Admin, "GET", "/some/route/nobody/classified"},
}

func hash(t *testing.T, pw string) string {
	h, err := bcrypt.GenerateFromPassword([]byte(pw), bcrypt.MinCost)
	require.NoError(t, err)
	return string(h)
}

// server is a real HTTP server whose every path answers 200 "served"
// behind the role check.
func server(t *testing.T, tokenFile string) *httptest.Server {
	users := map[string]string{"reader": hash(t, "r-pw"), "writer": hash(t, "w-pw"), "admin": hash(t, "a-pw")}
	a, err := New(Options{
		Users: func() (map[string]string, error) { return users, nil },
		Roles: map[string]Role{"reader": Read, "writer": Write, "admin": Admin},
		Tokens: []Token{
			{Role: Read, Value: "read-token"},
			{Role: Write, Value: "write-token"},
			{Role: Admin, File: tokenFile},
		},
	})
	require.NoError(t, err)
	require.True(t, a.Enabled())
	s := httptest.NewServer(a.Wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("served"))
	})))
	t.Cleanup(s.Close)
	return s
}

func do(t *testing.T, base, method, path string, set func(*http.Request)) (int, http.Header, string) {
	req, err := http.NewRequest(method, base+path, nil)
	require.NoError(t, err)
	if set != nil {
		set(req)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 512)
	n, _ := resp.Body.Read(buf)
	b.Write(buf[:n])
	return resp.StatusCode, resp.Header, b.String()
}

// TestRolesOnEveryClass: each role, by basic auth and by bearer token, is
// allowed exactly the classes it grants; others get 403 naming the role
// needed; no or bad credentials get 401 with WWW-Authenticate.
func TestRolesOnEveryClass(t *testing.T) {
	tokFile := filepath.Join(t.TempDir(), "admin.token")
	require.NoError(t, os.WriteFile(tokFile, []byte("admin-token\n"), 0o600))
	s := server(t, tokFile)
	type cred struct {
		name string
		role Role
		set  func(*http.Request)
	}
	basic := func(u, p string) func(*http.Request) { return func(r *http.Request) { r.SetBasicAuth(u, p) } }
	bearer := func(tok string) func(*http.Request) {
		return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+tok) }
	}
	creds := []cred{
		{"basic reader", Read, basic("reader", "r-pw")},
		{"basic writer", Write, basic("writer", "w-pw")},
		{"basic admin", Admin, basic("admin", "a-pw")},
		{"bearer read", Read, bearer("read-token")},
		{"bearer write", Write, bearer("write-token")},
		{"bearer admin (token file)", Admin, bearer("admin-token")},
	}
	for _, c := range creds {
		for _, cl := range classes {
			code, _, body := do(t, s.URL, cl.method, cl.path, c.set)
			allowed := cl.need == Open || c.role == Admin || c.role == cl.need
			if allowed {
				require.Equal(t, 200, code, "%s on %s %s: %s", c.name, cl.method, cl.path, body)
				continue
			}
			require.Equal(t, 403, code, "%s on %s %s", c.name, cl.method, cl.path)
			require.Contains(t, body, "needs role "+cl.need.String())
		}
	}
	bad := []cred{
		{"none", Open, nil},
		{"wrong password", Open, basic("reader", "nope")},
		{"unknown user", Open, basic("mallory", "r-pw")},
		{"unknown token", Open, bearer("guess")},
		{"other scheme", Open, func(r *http.Request) { r.Header.Set("Authorization", "Digest abc") }},
	}
	for _, c := range bad {
		for _, cl := range classes {
			code, h, body := do(t, s.URL, cl.method, cl.path, c.set)
			if cl.need == Open {
				require.Equal(t, 200, code, "%s on open %s", c.name, cl.path)
				continue
			}
			require.Equal(t, 401, code, "%s on %s %s", c.name, cl.method, cl.path)
			require.Contains(t, strings.Join(h.Values("WWW-Authenticate"), ","), "Basic")
			require.Contains(t, strings.Join(h.Values("WWW-Authenticate"), ","), "Bearer")
			require.Contains(t, body, "needs role "+cl.need.String())
		}
	}
}

// TestTokenFileReload: a rotated token file is picked up without a
// restart (checked at most once a second), and the old token stops
// working.
func TestTokenFileReload(t *testing.T) {
	tokFile := filepath.Join(t.TempDir(), "admin.token")
	require.NoError(t, os.WriteFile(tokFile, []byte("old-token"), 0o600))
	s := server(t, tokFile)
	bearer := func(tok string) func(*http.Request) {
		return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+tok) }
	}
	code, _, _ := do(t, s.URL, "GET", "/debug/pprof/", bearer("old-token"))
	require.Equal(t, 200, code)
	require.NoError(t, os.WriteFile(tokFile, []byte("a-new-and-longer-token"), 0o600))
	waitCode(t, s.URL, bearer("a-new-and-longer-token"), 200)
	code, _, _ = do(t, s.URL, "GET", "/debug/pprof/", bearer("old-token"))
	require.Equal(t, 401, code)
}

func TestNewRefusesUsersWithoutRoles(t *testing.T) {
	users := map[string]string{"bob": hash(t, "x")}
	_, err := New(Options{Users: func() (map[string]string, error) { return users, nil }})
	require.ErrorContains(t, err, `"bob" has no role`)
	_, err = New(Options{Users: func() (map[string]string, error) { return users, nil },
		Roles: map[string]Role{"bob": Read, "carol": Admin}})
	require.ErrorContains(t, err, `"carol" has a role but no password`)
	_, err = New(Options{Tokens: []Token{{Role: Read, File: "/nonexistent/token"}}})
	require.ErrorContains(t, err, "/nonexistent/token")
}

func TestDisabledPassesThrough(t *testing.T) {
	a, err := New(Options{})
	require.NoError(t, err)
	require.False(t, a.Enabled())
	h := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	rec := httptest.NewRecorder()
	a.Wrap(h).ServeHTTP(rec, httptest.NewRequest("POST", "/api/v1/services/tessera/placement", nil))
	require.Equal(t, 200, rec.Code)
}

func TestParseRole(t *testing.T) {
	for _, r := range []Role{Read, Write, Admin} {
		got, err := ParseRole(r.String())
		require.NoError(t, err)
		require.Equal(t, r, got)
	}
	_, err := ParseRole("root")
	require.ErrorContains(t, err, `"root"`)
}

func waitCode(t *testing.T, base string, set func(*http.Request), want int) {
	waitfor.Condition(t, 20*time.Second, 100*time.Millisecond, "token reload", func() error {
		if code, _, body := do(t, base, "GET", "/debug/pprof/", set); code != want {
			return fmt.Errorf("%d %s", code, body)
		}
		return nil
	})
}
