package node

import (
	"sync/atomic"

	"github.com/tessera-tsdb/tessera/dbnode/httpapi"
)

// lifecycle is the node's own state as its HTTP API reads it
// (httpapi.State, given to httpapi.New): the backend once the cluster
// session exists, why the node is not ready, and the damage storage found
// at start. Run moves it forward step by step; the API asks it on every
// request, so no package below node is told about the node's progress.
type lifecycle struct {
	backend atomic.Pointer[backendBox]
	ready   atomic.Pointer[readyFunc]
	damage  atomic.Pointer[[]string]
}

type backendBox struct{ b httpapi.Backend }

// readyFunc says, when /ready is asked, why the node is not ready ("" when
// it is) and the progress to show beside the reason.
type readyFunc func() (reason string, progress any)

var _ httpapi.State = (*lifecycle)(nil)

func newLifecycle() *lifecycle {
	l := &lifecycle{}
	l.setReason("recovering: storage is not open yet")
	return l
}

// Backend implements httpapi.State.
func (l *lifecycle) Backend() httpapi.Backend {
	if b := l.backend.Load(); b != nil {
		return b.b
	}
	return nil
}

// Ready implements httpapi.State.
func (l *lifecycle) Ready() (string, any) { return (*l.ready.Load())() }

// Damage implements httpapi.State.
func (l *lifecycle) Damage() []string {
	if d := l.damage.Load(); d != nil {
		return *d
	}
	return nil
}

// serve makes HTTP writes and reads go to b from now on.
func (l *lifecycle) serve(b httpapi.Backend) { l.backend.Store(&backendBox{b}) }

// setReason marks the node ready (msg == "") or not, with the reason.
func (l *lifecycle) setReason(msg string) {
	l.setReadyFunc(func() (string, any) { return msg, nil })
}

// setReadyFunc makes /ready call f on every request (a bootstrap round's
// live progress). f must be cheap and safe to call concurrently.
func (l *lifecycle) setReadyFunc(f func() (string, any)) {
	rf := readyFunc(f)
	l.ready.Store(&rf)
}

// setDamage replaces the damage found at start.
func (l *lifecycle) setDamage(lines []string) { l.damage.Store(&lines) }
