package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// HealthOptions configure the per-host health probe. The defaults live in
// config (cluster.healthCheck*); zero Interval turns probing off, and hosts
// are then always considered up.
type HealthOptions struct {
	// Interval between probes of one host.
	Interval time.Duration
	// Timeout of one probe.
	Timeout time.Duration
	// Failures is how many consecutive failed probes mark a host down; the
	// first success marks it up again.
	Failures int
}

// HostDownError is returned at once for calls to a host that stopped
// answering health checks, and cancels the calls in flight to it when it
// goes down: a frozen replica (SIGSTOP, a long GC pause, a dead network)
// then fails a read or write at level all quickly instead of after the
// request timeout, and reads skip it when choosing whom to ask.
type HostDownError struct {
	Instance, Endpoint string
	Since              time.Time
	Last               error
}

func (e *HostDownError) Error() string {
	return fmt.Sprintf("not answering health checks since %s: %v", e.Since.Format(time.RFC3339Nano), e.Last)
}

// health is one host's up/down state, fed by probe.
type health struct {
	instance, endpoint string

	mu      sync.Mutex
	fails   int
	first   time.Time // first failure of the current streak
	lastErr error
	down    *HostDownError // nil while up
	// upCtx is cancelled when the host goes down; calls watch it.
	upCtx    context.Context
	upCancel context.CancelFunc
}

func newHealth(instance, endpoint string) *health {
	h := &health{instance: instance, endpoint: endpoint}
	h.upCtx, h.upCancel = context.WithCancel(context.Background())
	return h
}

// Down returns the error calls to the host get, nil while it is up.
func (h *health) Down() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.down == nil {
		return nil
	}
	return h.down
}

// guard returns a context for one call to the host: it is cancelled, with
// the host's HostDownError as cause, if the host goes down during the
// call. It fails at once if the host is down already.
func (h *health) guard(ctx context.Context) (context.Context, context.CancelFunc, error) {
	h.mu.Lock()
	down, up := h.down, h.upCtx
	h.mu.Unlock()
	if down != nil {
		return nil, nil, down
	}
	cctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(up, func() {
		if err := h.Down(); err != nil {
			cancel(err)
		}
	})
	return cctx, func() { stop(); cancel(context.Canceled) }, nil
}

// callErr replaces the error of a call cancelled because the host went
// down by the reason, so the caller's message names it.
func callErr(cctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	var down *HostDownError
	if cause := context.Cause(cctx); errors.As(cause, &down) {
		return down
	}
	return err
}

// record notes one probe's outcome and reports a state change.
func (h *health) record(err error, now time.Time, failures int) (wentDown, cameUp bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err == nil {
		h.fails = 0
		if h.down != nil {
			h.down = nil
			h.upCtx, h.upCancel = context.WithCancel(context.Background())
			return false, true
		}
		return false, false
	}
	if h.fails == 0 {
		h.first = now
	}
	h.fails++
	h.lastErr = err
	if h.down == nil && h.fails >= failures {
		h.down = &HostDownError{Instance: h.instance, Endpoint: h.endpoint, Since: h.first, Last: err}
		h.upCancel()
		return true, false
	}
	if h.down != nil {
		h.down = &HostDownError{Instance: h.instance, Endpoint: h.endpoint, Since: h.first, Last: err}
	}
	return false, false
}

// probe checks the host every Interval until stop is closed. A probe that
// fails is followed by the next at once when it already waited Interval
// (a ticker drops the missed ticks), so with the config defaults (every
// 1 s, 1 s timeout, 2 failures) a frozen host is down within about 3 s.
// Those defaults keep a healthy but loaded node up: a Health call does no
// work on the node, and on a 2-core machine running the race detector its
// latency stays far below 1 s; two consecutive misses mean the process
// or its network is not answering at all.
func (h *health) probe(peer Peer, opts HealthOptions, stop <-chan struct{}, log *slog.Logger) {
	t := time.NewTicker(opts.Interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), opts.Timeout)
		go func() {
			select {
			case <-stop:
				cancel()
			case <-ctx.Done():
			}
		}()
		_, err := peer.Health(ctx)
		cancel()
		select {
		case <-stop:
			return
		default:
		}
		down, up := h.record(err, time.Now(), opts.Failures)
		switch {
		case down:
			log.Warn("host down: not answering health checks", "instance", h.instance, "endpoint", h.endpoint, "err", err)
		case up:
			log.Info("host up again", "instance", h.instance, "endpoint", h.endpoint)
		}
	}
}
