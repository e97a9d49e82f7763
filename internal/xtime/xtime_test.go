package xtime

import (
	"math"
	"math/big"
	"testing"

	"github.com/stretchr/testify/require"
)

// floorRef is BlockStart computed with big integers, clamped at MinInt64.
func floorRef(t, size int64) int64 {
	q := new(big.Int).Div(big.NewInt(t), big.NewInt(size)) // Euclidean: floor for size > 0
	f := q.Mul(q, big.NewInt(size))
	if f.Cmp(big.NewInt(math.MinInt64)) < 0 {
		return math.MinInt64
	}
	return f.Int64()
}

func TestBlockStartAtTheEdges(t *testing.T) {
	sizes := []int64{1, 7, 7_200_000, 86_400_000, math.MaxInt64}
	ts := []int64{math.MinInt64, math.MinInt64 + 1, math.MinInt64 + 7_199_999, math.MinInt64 + 7_200_000,
		-7_200_001, -7_200_000, -1, 0, 1, 7_199_999, 7_200_000, math.MaxInt64 - 1, math.MaxInt64}
	for _, size := range sizes {
		for _, tt := range ts {
			got := BlockStart(tt, size)
			require.Equal(t, floorRef(tt, size), got, "BlockStart(%d, %d)", tt, size)
			require.LessOrEqual(t, got, tt)
		}
	}
}

func TestAddSaturates(t *testing.T) {
	require.Equal(t, int64(math.MaxInt64), Add(math.MaxInt64, 1))
	require.Equal(t, int64(math.MaxInt64), Add(math.MaxInt64-5, 10))
	require.Equal(t, int64(math.MinInt64), Add(math.MinInt64, -1))
	require.Equal(t, int64(math.MinInt64), Add(math.MinInt64+5, -10))
	require.Equal(t, int64(3), Add(1, 2))
	require.Equal(t, int64(-1), Add(math.MaxInt64, math.MinInt64))
}
