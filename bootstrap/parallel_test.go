package bootstrap

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// parallel runs every index once, never more than limit at once.
func TestParallelRunsEachOnceWithinLimit(t *testing.T) {
	var running, peak, calls atomic.Int64
	seen := make([]atomic.Int32, 100)
	err := parallel(context.Background(), 3, len(seen), func(ctx context.Context, i int) error {
		n := running.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		seen[i].Add(1)
		calls.Add(1)
		running.Add(-1)
		return nil
	})
	require.NoError(t, err)
	require.EqualValues(t, 100, calls.Load())
	for i := range seen {
		require.EqualValues(t, 1, seen[i].Load(), "index %d", i)
	}
	require.LessOrEqual(t, peak.Load(), int64(3))
}

// The first error is returned, cancels the running calls' ctx and stops
// new ones from starting.
func TestParallelStopsAtFirstError(t *testing.T) {
	boom := errors.New("boom")
	var started atomic.Int64
	err := parallel(context.Background(), 2, 1000, func(ctx context.Context, i int) error {
		started.Add(1)
		if i == 0 {
			return boom
		}
		<-ctx.Done() // only the failure's cancel ends this
		return ctx.Err()
	})
	require.ErrorIs(t, err, boom)
	require.Less(t, started.Load(), int64(1000))
}

// A cancelled parent ctx ends it with the ctx's error.
func TestParallelParentCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := parallel(ctx, 2, 10, func(ctx context.Context, i int) error { return ctx.Err() })
	require.ErrorIs(t, err, context.Canceled)
}
