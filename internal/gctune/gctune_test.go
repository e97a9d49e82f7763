package gctune

import (
	"context"
	"os"
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestPercentFor(t *testing.T) {
	c := Defaults()
	const mib = 1 << 20
	for _, tc := range []struct {
		live int64
		want int
	}{
		{0, 100},
		{10 * mib, 100},  // small heap: Go's default
		{256 * mib, 100}, // room = live = Headroom
		{512 * mib, 50},  // 256 MiB of room
		{1024 * mib, 25}, // the room reaches MinPercent of live
		{4096 * mib, 25}, // and stays at MinPercent
		{768 * mib, 33},  // 256/768
		{1 << 50, 25},    // no overflow
	} {
		require.Equal(t, tc.want, c.PercentFor(tc.live), "live %d", tc.live)
	}
	require.Equal(t, 1, Config{Percent: 100, MinPercent: 0, Headroom: 0}.PercentFor(1<<30), "never 0 (which would mean a collection per allocation)")
}

// Tune applies the rule after a real collection, and Run restores Percent
// when it ends.
func TestTunerSetsGOGC(t *testing.T) {
	if os.Getenv("GOGC") != "" {
		require.Nil(t, New(Defaults()), "GOGC set: the environment wins")
		t.Skip("GOGC is set")
	}
	prev := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(prev) })

	// A Headroom of 1 byte and MinPercent 40: any heap gets 40.
	tu := New(Config{Percent: 100, MinPercent: 40, Headroom: 1})
	require.NotNil(t, tu)
	runtime.GC()
	require.Equal(t, 40, tu.Tune())
	require.Equal(t, 40, debug.SetGCPercent(40), "GOGC in force")

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); tu.Run(ctx, 10*time.Millisecond) }()
	cancel()
	<-done // Run returns once ctx ends
	require.Equal(t, 100, debug.SetGCPercent(100), "Run restored Percent")
}
