package bootstrap

import (
	"context"
	"sync"
	"time"

	"github.com/tessera-tsdb/tessera/internal/ctxsleep"
)

// limiter paces streaming to a byte rate: after moving n bytes, a caller
// waits until the average since start is back under the rate.
type limiter struct {
	rate  int64
	mu    sync.Mutex
	start time.Time
	sent  int64
}

func newLimiter(rate int64) *limiter { return &limiter{rate: rate} }

func (l *limiter) wait(ctx context.Context, n int64) error {
	if l.rate <= 0 {
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
