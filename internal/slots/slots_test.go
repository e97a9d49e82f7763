package slots

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestGrowSteps(t *testing.T) {
	var got []int
	for n := 0; n < 100; n = Grow(n, 8) {
		got = append(got, n)
	}
	require.Equal(t, []int{0, 8, 12, 16, 24, 32, 48, 64, 96}, got)
	// From any size, a table grown at load 3/4 is at least half full.
	for n := 8; n < 1<<30; n = Grow(n, 8) {
		full := n * 3 / 4
		require.GreaterOrEqual(t, 2*(full+1), Grow(n, 8), "size %d", n)
	}
}

func TestHomeInRange(t *testing.T) {
	for _, n := range []int{1, 8, 12, 24, 96, 1 << 20, 3 << 19} {
		require.Equal(t, 0, Home(0, n))
		require.Equal(t, n-1, Home(math.MaxUint32, n))
		require.Equal(t, n/2, Home(1<<31, n))
		prev := 0
		for h := uint64(0); h <= math.MaxUint32; h += 1 << 22 {
			i := Home(uint32(h), n)
			require.GreaterOrEqual(t, i, prev, "monotone")
			require.Less(t, i, n)
			prev = i
		}
	}
	// Spread: every slot of a 12-slot table is some hash's home, equally often.
	counts := make([]int, 12)
	for h := uint64(0); h <= math.MaxUint32; h += 1 << 16 {
		counts[Home(uint32(h), 12)]++
	}
	for i, c := range counts {
		require.InDelta(t, 65536/12, c, 1, "slot %d", i)
	}
}

func TestNextAndBetween(t *testing.T) {
	require.Equal(t, 1, Next(0, 12))
	require.Equal(t, 0, Next(11, 12))
	require.True(t, Between(3, 7, 5))
	require.True(t, Between(3, 7, 7))
	require.False(t, Between(3, 7, 3))
	require.False(t, Between(3, 7, 8))
	require.True(t, Between(10, 2, 11), "wrapped run")
	require.True(t, Between(10, 2, 1))
	require.False(t, Between(10, 2, 5))
	require.False(t, Between(10, 2, 10))
}
