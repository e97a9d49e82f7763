package ctxsleep

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestSleep(t *testing.T) {
	require.NoError(t, Sleep(context.Background(), time.Millisecond))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	// An hour would fail the test by its timeout if the context were ignored.
	require.ErrorIs(t, Sleep(ctx, time.Hour), context.Canceled)
}
