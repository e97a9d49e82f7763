package repair

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/ident"
)

// A write node 0 lacks that is newer than a pass's settled cutoff (as a
// joiner's is right after its bootstrap) is left alone by the pass and
// pulled by CatchUp, for the shards named only.
func TestCatchUpPullsUnsettledSamplesOfNamedShards(t *testing.T) {
	c := newCluster(t, 2)
	ids := seed(c, 0, 1)
	// After the cutoff (12:49) and before now (13:00): node 1 alone.
	recent := every(settled.Add(time.Minute), settled.Add(10*time.Minute), time.Minute)
	c.write([]int{1}, ids[0], recent, flat(7))
	c.write([]int{1}, ids[1], recent, flat(8))
	sh0, sh1 := ident.Shard(ids[0], testShards), ident.Shard(ids[1], testShards)
	require.NotEqual(t, sh0, sh1, "the test needs the two series in different shards")

	r := c.repairer(0, nil)
	p, err := r.RunPass(context.Background())
	require.NoError(t, err)
	require.Zero(t, p.SamplesRepaired, "a pass compares settled data only")

	tl := r.CatchUp(context.Background(), []uint32{sh0})
	require.Zero(t, tl.Errors)
	require.Equal(t, int64(len(recent)), tl.SamplesRepaired)
	lo, _ := Window(c.dbs[0].Namespaces()[0], c.clk.Now(), 0)
	hi := c.clk.Now().UnixMilli() + 1
	require.Equal(t, readAll(t, c.dbs[1], ids[0], lo, hi), readAll(t, c.dbs[0], ids[0], lo, hi))
	require.NotEqual(t, readAll(t, c.dbs[1], ids[1], lo, hi), readAll(t, c.dbs[0], ids[1], lo, hi),
		"a shard not named is not caught up")

	// Caught up: a second call pulls nothing.
	require.Zero(t, r.CatchUp(context.Background(), []uint32{sh0}).SamplesRepaired)
}

// A catch-up may run while a periodic pass does (the node starts both on
// their own loops): both pull into the same shards, and the shard ends
// converged either way. Run under -race.
func TestCatchUpBesideAPass(t *testing.T) {
	c := newCluster(t, 2)
	ids := seed(c, 1)
	recent := every(settled.Add(time.Minute), settled.Add(10*time.Minute), time.Minute)
	for _, id := range ids {
		c.write([]int{1}, id, recent, flat(3))
	}
	r := c.repairer(0, nil)
	all := make([]uint32, testShards)
	for s := range all {
		all[s] = uint32(s)
	}
	done := make(chan Tally)
	go func() { done <- r.CatchUp(context.Background(), all) }()
	_, err := r.RunPass(context.Background())
	require.NoError(t, err)
	require.Zero(t, (<-done).Errors)
	lo, _ := Window(c.dbs[0].Namespaces()[0], c.clk.Now(), 0)
	hi := c.clk.Now().UnixMilli() + 1
	for _, id := range ids {
		require.Equal(t, readAll(t, c.dbs[1], id, lo, hi), readAll(t, c.dbs[0], id, lo, hi))
	}
}
