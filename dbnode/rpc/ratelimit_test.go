package rpc

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestPacerReservations checks the booking arithmetic on a frozen clock:
// bookings queue back to back, and a cancelled last one is given back.
func TestPacerReservations(t *testing.T) {
	now := time.Unix(1000, 0)
	p := newPacer(100) // bytes per second
	p.now = func() time.Time { return now }

	at, d := p.reserve(100)
	require.Equal(t, now.Add(time.Second), at)
	require.Equal(t, time.Second, d)
	at2, d2 := p.reserve(50)
	require.Equal(t, now.Add(1500*time.Millisecond), at2)
	p.cancel(at, d) // not the last booking: kept, the later one keeps its place
	require.Equal(t, now.Add(1500*time.Millisecond), p.next)
	p.cancel(at2, d2)
	require.Equal(t, now.Add(time.Second), p.next)

	// After an idle spell, bookings start from now, not from the past.
	now = now.Add(time.Hour)
	at, _ = p.reserve(10)
	require.Equal(t, now.Add(100*time.Millisecond), at)
}

func TestPacerUnlimitedAndCancelled(t *testing.T) {
	var nilPacer *pacer
	require.NoError(t, nilPacer.wait(context.Background(), 1<<30))
	require.NoError(t, newPacer(0).wait(context.Background(), 1<<30))

	p := newPacer(10) // 1 MB would take a day
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	require.ErrorIs(t, p.wait(ctx, 1<<20), context.Canceled)
	require.Less(t, time.Since(start), 5*time.Second)
	require.False(t, p.next.After(time.Now()), "a cancelled booking is given back")
}

func TestPageBytes(t *testing.T) {
	cases := []struct {
		name   string
		max    int
		rate   int64
		asked  uint32
		expect int
	}{
		{"default", DefaultMaxMsgSize, 0, 0, DefaultStreamPageBytes},
		{"asked", DefaultMaxMsgSize, 0, 1000, 1000},
		{"capped at half the message limit", 1 << 20, 0, 0, 1 << 19},
		{"capped at one second of rate", DefaultMaxMsgSize, 100_000, 0, 100_000},
		{"rate cap has a floor", DefaultMaxMsgSize, 10, 0, minPacedPageBytes},
		{"small ask under the rate", DefaultMaxMsgSize, 100_000, 10, 10},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := &Server{opts: ServerOptions{MaxMsgSize: tc.max, MaxStreamBytesPerSecond: tc.rate}}
			require.Equal(t, tc.expect, s.pageBytes(tc.asked))
		})
	}
}
