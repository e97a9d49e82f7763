package rpc

import (
	"context"
	"sync"
	"time"
)

// pacer limits the bytes per second all peer streaming calls of a server
// send, so a bootstrapping peer cannot starve the node's own reads and
// writes of disk and network. Each reply reserves the time its bytes take
// at the rate, back to back after earlier reservations, and waits until
// its reservation ends before it is sent: there is no burst, so n bytes
// never leave faster than n/rate even from an idle server.
type pacer struct {
	rate float64 // bytes per second; 0 = unlimited
	now  func() time.Time

	mu   sync.Mutex
	next time.Time // end of the last reservation
}

func newPacer(bytesPerSecond int64) *pacer {
	return &pacer{rate: float64(bytesPerSecond), now: time.Now}
}

// reserve books n bytes and returns when they may be sent and how long
// the booking lasts (to give it back if the caller stops waiting).
func (p *pacer) reserve(n int) (at time.Time, d time.Duration) {
	d = time.Duration(float64(n) / p.rate * float64(time.Second))
	p.mu.Lock()
	defer p.mu.Unlock()
	start := p.now()
	if p.next.After(start) {
		start = p.next
	}
	p.next = start.Add(d)
	return p.next, d
}

// cancel gives back a booking of d ending at at, as far as no later
// booking was made since: later callers keep their place, which is safe
// because they only wait longer than needed.
func (p *pacer) cancel(at time.Time, d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.next.Equal(at) {
		p.next = p.next.Add(-d)
	}
}

// wait blocks until n bytes may be sent or ctx ends (its error then).
func (p *pacer) wait(ctx context.Context, n int) error {
	if p == nil || p.rate <= 0 || n <= 0 {
		return nil
	}
	at, d := p.reserve(n)
	delay := at.Sub(p.now())
	if delay <= 0 {
		return nil
	}
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		p.cancel(at, d)
		return ctx.Err()
	}
}
