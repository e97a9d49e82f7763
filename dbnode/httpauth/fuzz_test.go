package httpauth

import (
	"encoding/base64"
	"net/http/httptest"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"
)

// FuzzAuthenticate: any Authorization header (and path) is answered
// without a panic, and only the configured credentials authenticate.
func FuzzAuthenticate(f *testing.F) {
	h, err := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	if err != nil {
		f.Fatal(err)
	}
	users := map[string]string{"alice": string(h)}
	a, err := New(Options{
		Users:  func() (map[string]string, error) { return users, nil },
		Roles:  map[string]Role{"alice": Read},
		Tokens: []Token{{Role: Write, Value: "tok"}},
	})
	if err != nil {
		f.Fatal(err)
	}
	f.Add("Bearer tok", "/api/v1/query")
	f.Add("Basic "+base64.StdEncoding.EncodeToString([]byte("alice:pw")), "/api/v1/write")
	f.Add("Basic !!!", "/metrics")
	f.Add("Bearer ", "/debug/pprof/")
	f.Add("Basic "+base64.StdEncoding.EncodeToString([]byte("alice:")), "/")
	f.Fuzz(func(t *testing.T, header, path string) {
		r := httptest.NewRequest("GET", "/", nil)
		r.URL.Path = path
		r.Header.Set("Authorization", header)
		_ = Required(r)
		role, _, err := a.Authenticate(r)
		if err != nil {
			return
		}
		if tok, ok := strings.CutPrefix(header, "Bearer "); ok && strings.TrimSpace(tok) == "tok" && role == Write {
			return
		}
		if u, p, ok := r.BasicAuth(); ok && u == "alice" && p == "pw" && role == Read {
			return
		}
		t.Fatalf("header %q authenticated as %v", header, role)
	})
}
