// Package pace keeps background data movement (peer bootstrap, repair) to
// a byte rate, so it cannot starve live reads and writes.
package pace

import (
	"context"
	"sync"
	"time"

	"github.com/tessera-tsdb/tessera/internal/ctxsleep"
)

// Limiter paces to a byte rate: after moving n bytes, a caller waits until
// the average since the first call is back under the rate. It is safe for
// concurrent use; a rate <= 0 never waits.
type Limiter struct {
	rate  int64
	mu    sync.Mutex
	start time.Time
	sent  int64
}

// New returns a limiter of rate bytes per second (<= 0: unlimited).
func New(rate int64) *Limiter { return &Limiter{rate: rate} }

// Wait accounts n bytes and sleeps until they are due, or ctx ends.
func (l *Limiter) Wait(ctx context.Context, n int64) error {
	if l == nil || l.rate <= 0 {
		return nil
	}
	l.mu.Lock()
	if l.start.IsZero() {
		l.start = time.Now()
	}
	l.sent += n
	due := l.start.Add(time.Duration(float64(l.sent) / float64(l.rate) * float64(time.Second)))
	l.mu.Unlock()
	d := time.Until(due)
	if d <= 0 {
		return nil
	}
	return ctxsleep.Sleep(ctx, d)
}
