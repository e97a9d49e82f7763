package promapi

import (
	"context"
	"errors"

	"github.com/prometheus/prometheus/promql"
)

// slots is a promql.QueryTracker that only bounds how many queries
// evaluate at once (Prometheus' --query.max-concurrency), so that the
// samples limit, which is per query, also bounds memory. Queries beyond
// the bound wait for a slot until their deadline. Unlike Prometheus'
// tracker it keeps no file of active queries across crashes.
type slots chan struct{}

func newSlots(n int) slots { return make(slots, n) }

func (s slots) GetMaxConcurrent() int { return cap(s) }

// Insert blocks until a slot is free or ctx ends, which it reports as the
// engine's own timeout and cancellation errors.
func (s slots) Insert(ctx context.Context, _ string) (int, error) {
	select {
	case s <- struct{}{}:
		return 0, nil
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return 0, promql.ErrQueryTimeout("query queue")
		}
		return 0, promql.ErrQueryCanceled("query queue")
	}
}

func (s slots) Delete(int) { <-s }

func (s slots) Close() error { return nil }
