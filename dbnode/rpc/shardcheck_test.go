package rpc

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// countingOwnership allows even shards and counts the questions.
type countingOwnership struct{ asked map[uint32]int }

func (o *countingOwnership) CheckShard(shard uint32, _ Op) error {
	o.asked[shard]++
	if shard%2 == 0 {
		return nil
	}
	return fmt.Errorf("odd shard %d", shard)
}

func TestShardCheckAsksOncePerShard(t *testing.T) {
	own := &countingOwnership{asked: map[uint32]int{}}
	c := newShardCheck(own, OpWrite, 100)
	for _, sh := range []uint32{4, 5, 4, 99, 5, 1 << 30, 1<<30 + 1, 1 << 30, 63, 64, 65} {
		require.Equal(t, sh%2 == 0, c.allowed(sh), "shard %d", sh)
	}
	for sh, n := range own.asked {
		require.Equal(t, 1, n, "shard %d asked %d times", sh, n)
	}
	require.True(t, c.seen(5))
	require.True(t, c.seen(1<<30))
	require.False(t, c.seen(6))
	require.False(t, c.seen(7<<20))
	var refused []uint32
	for _, r := range c.refused {
		refused = append(refused, r.shard)
	}
	require.Equal(t, []uint32{5, 99, 1<<30 + 1, 63, 65}, refused, "refusals in the order first seen, once each")
}
