package node

import (
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/tessera-tsdb/tessera/internal/zapslog"
)

// etcdServerLogger sends the embedded etcd member's logs to the node's
// logger: its info and debug as debug, its warnings and real errors as
// they are, except what it logs on every clean start and stop (advice
// about its listener layout, the warnings and errors of its serving
// goroutines as their listeners close), which is debug.
func etcdServerLogger(log *slog.Logger) *zap.Logger {
	return zapslog.New(log, (&etcdServerPolicy{}).level, "component", "etcd")
}

// routineShutdown are the errors embedded etcd logs at error level while
// it stops as asked: "setting up serving from embedded etcd failed." with
// one of these is its serving loops noticing their listener closed.
var routineShutdown = []string{
	"server closed",                    // cmux: "mux: server closed"; net/http: "http: Server closed"
	"use of closed network connection", // accept on a closed listener
	"the server has been stopped",      // grpc.ErrServerStopped
}

// routineStart are warnings embedded etcd gives on every start about
// choices Tessera made for it: one port for its gRPC and HTTP (the
// client URL), and simple auth tokens (etcd auth is not enabled by the
// node; whoever enables it configures the token too).
var routineStart = map[string]bool{
	"Running http and grpc server on single port. This is not recommended for production.": true,
	"simple token is not cryptographically signed":                                         true,
}

// routineTransient are errors embedded etcd logs on a clean start and
// retries by itself: its version monitor tries to write the storage
// version before the backend has saved a raft term (a new member, or a
// loaded machine where the first apply is late), fails "missing term
// information", and succeeds on its next tick. Keyed by message, the
// error text that makes it routine.
var routineTransient = map[string]string{
	"failed to update storage version": "missing term information",
}

// slowness are the warnings an embedded member repeats, every few
// hundred milliseconds, while its machine is loaded: each is worth
// seeing, but not a hundred times a minute over the node's own lines.
// The first of each kind in a minute is a warning; the rest are debug.
var slowness = []string{
	"leader failed to send out heartbeat on time; took too long, leader is overloaded likely from slow disk",
	"apply request took too long",
	"slow fdatasync",
	"request stats",
	"waiting for ReadIndex response took too long, retrying",
}

// slownessEvery is how often each slowness warning is let through.
const slownessEvery = time.Minute

// etcdServerPolicy demotes embedded etcd's routine messages. Once the
// member announces it is closing (embed.Etcd.Close logs "closing etcd
// server" first), its warnings are about its own peer connections and
// listeners going away as asked, and are debug; its errors stay errors
// unless they are one of routineShutdown.
type etcdServerPolicy struct {
	stopping atomic.Bool
	// lastSlow is when each slowness warning last went out as one.
	mu       sync.Mutex
	lastSlow map[string]time.Time
}

// rateLimited says whether a slowness warning at t comes within
// slownessEvery of the last one of its kind that went out.
func (p *etcdServerPolicy) rateLimited(msg string, t time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if last, ok := p.lastSlow[msg]; ok && t.Sub(last) < slownessEvery {
		return true
	}
	if p.lastSlow == nil {
		p.lastSlow = map[string]time.Time{}
	}
	p.lastSlow[msg] = t
	return false
}

func (p *etcdServerPolicy) level(e zapcore.Entry, fields map[string]any) slog.Level {
	if e.Message == "closing etcd server" {
		p.stopping.Store(true)
	}
	if routineStart[e.Message] {
		return slog.LevelDebug
	}
	if want, ok := routineTransient[e.Message]; ok {
		if msg, _ := fields["error"].(string); strings.Contains(msg, want) {
			return slog.LevelDebug
		}
	}
	if e.Level == zapcore.WarnLevel && p.stopping.Load() {
		return slog.LevelDebug
	}
	if e.Level == zapcore.WarnLevel && slices.Contains(slowness, e.Message) && p.rateLimited(e.Message, e.Time) {
		return slog.LevelDebug
	}
	if e.Level >= zapcore.WarnLevel {
		if msg, _ := fields["error"].(string); msg != "" {
			low := strings.ToLower(msg)
			for _, r := range routineShutdown {
				if strings.Contains(low, r) {
					return slog.LevelDebug
				}
			}
		}
	}
	return zapslog.Demote(e, fields)
}

// etcdClientLogger sends the etcd client's logs to the node's logger. The
// client warns on every retry while etcd is away, which the node already
// reports in its own words; so everything below error is debug.
func etcdClientLogger(log *slog.Logger) *zap.Logger {
	return zapslog.New(log, func(e zapcore.Entry, _ map[string]any) slog.Level {
		if e.Level >= zapcore.ErrorLevel {
			return slog.LevelWarn
		}
		return slog.LevelDebug
	}, "component", "etcd-client")
}
