// Package ctxsleep is the one way background loops wait: a sleep that a
// context's end cuts short, so a node shuts down without waiting out a
// backoff.
package ctxsleep

import (
	"context"
	"time"
)

// Sleep waits for d or until ctx ends, whichever comes first, and returns
// ctx.Err() in the second case.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
