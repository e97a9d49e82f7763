package pace

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestUnlimitedNeverWaits(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.NoError(t, New(0).Wait(ctx, 1<<40))
	var nilLimiter *Limiter
	require.NoError(t, nilLimiter.Wait(ctx, 1<<40))
}

func TestWaitEndsWithContext(t *testing.T) {
	l := New(1) // one byte a second: a megabyte is due in 12 days
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, l.Wait(ctx, 1<<20), context.Canceled)
}
