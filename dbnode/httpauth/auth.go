// Package httpauth authenticates HTTP callers (basic auth against the
// bcrypt hashes of the web config file, or bearer tokens) and checks the
// role each endpoint needs (see Required). A missing or wrong credential
// is answered 401 with WWW-Authenticate; a known caller without the role
// is answered 403 naming the role needed.
package httpauth

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/uber-go/tally/v4"
	"golang.org/x/crypto/bcrypt"
)

// Token is one bearer token and the role it grants: the value inline or
// in a file (trailing white space trimmed; re-read when the file changes).
type Token struct {
	Role  Role
	Value string
	File  string
}

// Options configure an Authenticator.
type Options struct {
	// Users returns the basic auth users (name -> bcrypt hash) as they
	// are now; called at most once a second (webconfig.Users of the web
	// config file). Nil: no basic auth.
	Users func() (map[string]string, error)
	// Roles grants each basic auth user its role.
	Roles map[string]Role
	// Tokens are the bearer tokens.
	Tokens  []Token
	Logger  *slog.Logger
	Metrics tally.Scope
}

// Authenticator wraps handlers with the role check.
type Authenticator struct {
	opts Options

	mu       sync.Mutex
	users    map[string]string
	checked  time.Time
	tokens   map[[32]byte]Role
	tokStamp string
	ok       map[[32]byte]bool // bcrypt outcomes by hash(user, hash, password)
	bcryptMu sync.Mutex        // one bcrypt at a time: it is CPU-bound by design

	denied func(reason string) tally.Counter
}

// New checks the options (every token readable, every role user known) and
// returns the Authenticator.
func New(opts Options) (*Authenticator, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Metrics == nil {
		opts.Metrics = tally.NoopScope
	}
	a := &Authenticator{opts: opts, ok: map[[32]byte]bool{}}
	var cmu sync.Mutex
	counters := map[string]tally.Counter{}
	a.denied = func(reason string) tally.Counter {
		cmu.Lock()
		defer cmu.Unlock()
		c, ok := counters[reason]
		if !ok {
			c = opts.Metrics.Tagged(map[string]string{"reason": reason}).Counter("auth_denied")
			counters[reason] = c
		}
		return c
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.refreshLocked(true); err != nil {
		return nil, err
	}
	for u := range opts.Roles {
		if _, ok := a.users[u]; !ok {
			return nil, fmt.Errorf("user %q has a role but no password in the web config's basic_auth_users", u)
		}
	}
	for u := range a.users {
		if _, ok := opts.Roles[u]; !ok {
			return nil, fmt.Errorf("basic auth user %q has no role (http.auth.users)", u)
		}
	}
	return a, nil
}

// Enabled reports whether any credential is configured; without one the
// node serves every endpoint to anyone.
func (a *Authenticator) Enabled() bool {
	return a != nil && (a.opts.Users != nil || len(a.opts.Tokens) > 0)
}

// refreshLocked re-reads users and token files when a second has passed
// since the last look. A read that fails keeps what was loaded before
// (logged), except at start (force), where it is an error.
func (a *Authenticator) refreshLocked(force bool) error {
	now := time.Now()
	if !force && now.Sub(a.checked) < time.Second {
		return nil
	}
	a.checked = now
	if a.opts.Users != nil {
		u, err := a.opts.Users()
		if err != nil {
			if force {
				return fmt.Errorf("basic auth users: %w", err)
			}
			a.opts.Logger.Error("basic auth users: keeping the last good set", "err", err)
		} else {
			a.users = u
		}
	}
	var stamp strings.Builder
	for _, t := range a.opts.Tokens {
		if t.File != "" {
			stamp.WriteString(fileStamp(t.File))
		}
		stamp.WriteByte('|')
	}
	if a.tokens != nil && stamp.String() == a.tokStamp {
		return nil
	}
	toks := make(map[[32]byte]Role, len(a.opts.Tokens))
	for i, t := range a.opts.Tokens {
		v := t.Value
		if t.File != "" {
			b, err := os.ReadFile(t.File)
			if err == nil && len(strings.TrimSpace(string(b))) == 0 {
				err = errors.New("file is empty")
			}
			if err != nil {
				if force {
					return fmt.Errorf("token %d (%s): %w", i, t.File, err)
				}
				a.opts.Logger.Error("bearer token file: keeping the last good tokens", "file", t.File, "err", err)
				return nil
			}
			v = strings.TrimSpace(string(b))
		}
		toks[sha256.Sum256([]byte(v))] = t.Role
	}
	a.tokens, a.tokStamp = toks, stamp.String()
	return nil
}

func fileStamp(path string) string {
	st, err := os.Stat(path)
	if err != nil {
		return "missing"
	}
	return fmt.Sprintf("%d/%d", st.ModTime().UnixNano(), st.Size())
}

// fakeHash is compared against for unknown users, so that a wrong name
// takes as long as a wrong password (bcrypt of a random string). Made on
// first use: as a package variable it cost every start of the binary
// ~50 ms of CPU (`GODEBUG=inittrace=1 tessera version`), `tessera
// placement add` included.
var fakeHash = sync.OnceValue(func() []byte {
	h, _ := bcrypt.GenerateFromPassword([]byte("not a password: tessera unknown user"), bcrypt.DefaultCost)
	return h
})

// Authenticate returns the caller's role, or an error for a missing or
// wrong credential.
func (a *Authenticator) Authenticate(r *http.Request) (Role, string, error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return Open, "", errors.New("no credentials")
	}
	a.mu.Lock()
	_ = a.refreshLocked(false)
	users, tokens := a.users, a.tokens
	a.mu.Unlock()
	if tok, ok := strings.CutPrefix(h, "Bearer "); ok {
		if role, ok := tokens[sha256.Sum256([]byte(strings.TrimSpace(tok)))]; ok {
			return role, "token", nil
		}
		return Open, "", errors.New("unknown bearer token")
	}
	user, pass, ok := r.BasicAuth()
	if !ok {
		return Open, "", errors.New("unsupported Authorization scheme: want Basic or Bearer")
	}
	hash, known := users[user]
	if !known {
		hash = string(fakeHash())
	}
	key := sha256.Sum256([]byte(user + "\x00" + hash + "\x00" + pass))
	a.mu.Lock()
	good, cached := a.ok[key]
	a.mu.Unlock()
	if !cached {
		a.bcryptMu.Lock()
		good = bcrypt.CompareHashAndPassword([]byte(hash), []byte(pass)) == nil
		a.bcryptMu.Unlock()
		a.mu.Lock()
		if len(a.ok) >= 1024 {
			clear(a.ok)
		}
		a.ok[key] = good
		a.mu.Unlock()
	}
	if !known || !good {
		return Open, "", errors.New("wrong user name or password")
	}
	return a.opts.Roles[user], user, nil
}

// Wrap checks every request against Required before h sees it. With no
// credential configured it returns h unchanged.
func (a *Authenticator) Wrap(h http.Handler) http.Handler {
	if !a.Enabled() {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		need := Required(r)
		if need == Open {
			h.ServeHTTP(w, r)
			return
		}
		has, who, err := a.Authenticate(r)
		if err != nil {
			a.denied("unauthenticated").Inc(1)
			w.Header().Set("WWW-Authenticate", `Basic realm="tessera", charset="UTF-8"`)
			w.Header().Add("WWW-Authenticate", `Bearer realm="tessera"`)
			http.Error(w, fmt.Sprintf("401 unauthorized: %v; %s %s needs role %s", err, r.Method, r.URL.Path, need), http.StatusUnauthorized)
			return
		}
		if !has.allows(need) {
			a.denied("forbidden").Inc(1)
			http.Error(w, fmt.Sprintf("403 forbidden: %s %s needs role %s (or admin); %s has role %s", r.Method, r.URL.Path, need, principal(who), has), http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}

func principal(who string) string {
	if who == "token" {
		return "this bearer token"
	}
	return fmt.Sprintf("user %q", who)
}
