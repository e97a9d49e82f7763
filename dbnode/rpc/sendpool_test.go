package rpc

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSendPool: Get returns the length asked for in a power-of-two
// capacity, a buffer put back is handed out again for a size of its tier,
// and a buffer not from the pool is not kept.
func TestSendPool(t *testing.T) {
	p := &sendPool{}
	for _, n := range []int{0, 1, 2, 3, 1000, 1024, 1025, 5 << 20} {
		b := p.Get(n)
		require.Len(t, *b, n)
		c := cap(*b)
		require.True(t, c > 0 && c&(c-1) == 0, "cap %d for %d", c, n)
		require.GreaterOrEqual(t, c, n)
		p.Put(b)
	}
	odd := make([]byte, 3, 3)
	p.Put(&odd) // dropped: not a tier's capacity
	b := p.Get(3)
	require.Equal(t, 4, cap(*b))
}
