// Package waitfor is how tests wait: on a condition, polled on a ticker,
// with a deadline, never on a bare sleep.
package waitfor

import (
	"errors"
	"testing"
	"time"
)

// Condition polls cond every `every` until it returns nil, and fails t with
// cond's last error if d passes first. It returns how long it waited.
func Condition(t testing.TB, d, every time.Duration, what string, cond func() error) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(every)
	defer tick.Stop()
	err := errors.New("never checked")
	for {
		if err = cond(); err == nil {
			return time.Since(start)
		}
		select {
		case <-tick.C:
		case <-deadline.C:
			t.Fatalf("timed out after %v waiting for %s: %v", d, what, err)
			return time.Since(start)
		}
	}
}
