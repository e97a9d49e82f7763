package retain

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestTrim(t *testing.T) {
	small := make([]byte, 10, MaxBytes)
	var over bool
	Trim(&over, &small)
	require.False(t, over)
	require.Len(t, small, 10, "a buffer at the bound is kept as is")

	big := make([]byte, 0, MaxBytes+1)
	Trim(&over, &big)
	require.True(t, over)
	require.Nil(t, big)

	type pair struct{ a, b []byte } // 48 bytes
	pairs := make([]pair, 0, MaxBytes/48+1)
	over = false
	Trim(&over, &pairs)
	require.True(t, over, "the bound is in bytes, not elements")
	require.Nil(t, pairs)
}

func TestReleaserRunsOnceAfterBurst(t *testing.T) {
	ran := make(chan struct{}, 10)
	r := &Releaser{Quiet: 20 * time.Millisecond, free: func() { ran <- struct{}{} }}
	defer r.Stop()
	for range 5 {
		r.Dropped()
	}
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("no release after the burst")
	}
	r.Dropped()
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("no release after a later drop")
	}
	require.Empty(t, ran, "one release per quiet period")
}
