package compose

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestComposeCluster walks the README's "Local cluster" section against
// the real docker-compose.yml: build, up, write and read at majority, one
// node stopped and started, node 4 added and removed with the placement
// CLI. Everything the project created is removed at the end, pass or fail.
func TestComposeCluster(t *testing.T) {
	compose := composeOrSkip(t)
	p := newProject(t, compose)
	t.Logf("compose %q, project %s, image %s", strings.Join(compose, " "), p.name, p.image)

	start := time.Now()
	p.build()
	t.Logf("build (binary + image): %v", time.Since(start).Round(time.Millisecond))

	// Up: three seeds form etcd, the init service writes the RF 3
	// placement, every node bootstraps its 4096 shards and turns healthy.
	p.teardownOnCleanup()
	start = time.Now()
	p.up()
	t.Logf("node1 %s, etcd %s", p.http, p.etcd)
	p.waitSeedsReady(start)
	pl, err := p.placement()
	require.NoError(t, err)
	require.Equal(t, 3, pl.ReplicaFactor)
	require.EqualValues(t, 4096, pl.NumShards)

	// The placement CLI also runs inside the compose network.
	out := p.mustDC(2*time.Minute, "run", "--rm", "-T", "placement", "get")
	require.Contains(t, out, "node3:9000")

	// Writes and reads at majority (the level set in deploy/compose/*.yml).
	const series = 500
	w := written{}
	base := time.Now().Add(-3 * time.Minute).Truncate(time.Second)
	at := func(k int) time.Time { return base.Add(time.Duration(k) * 5 * time.Second) }
	from, to := base.Add(-time.Minute), time.Now().Add(5*time.Minute)
	for k := 0; k < 3; k++ {
		require.NoError(t, w.write(p.http, series, at(k)))
	}
	require.NoError(t, w.check(p.http, from, to))
	n, err := instantQuery(p.http, "count("+metric+")")
	require.NoError(t, err)
	require.EqualValues(t, series, n)

	// One node down: majority still met by the other two.
	p.mustDC(2*time.Minute, "stop", "node3")
	for k := 3; k < 6; k++ {
		require.NoError(t, w.write(p.http, series, at(k)), "write at majority with node3 stopped")
	}
	require.NoError(t, w.check(p.http, from, to), "read at majority with node3 stopped")
	start = time.Now()
	p.mustDC(2*time.Minute, "start", "node3")
	eventually(t, 2*time.Minute, "node3 healthy again", func() error { return p.healthy("node3") })
	t.Logf("node3 restart to healthy: %v", time.Since(start).Round(time.Millisecond))
	require.NoError(t, w.write(p.http, series, at(6)))
	require.NoError(t, w.check(p.http, from, to))

	// Add node 4 (rack1, so it takes half of node1's shards), and wait for
	// it to stream them from its peers and mark them AVAILABLE.
	start = time.Now()
	p.mustDC(2*time.Minute, "--profile", "node4", "up", "-d", "node4")
	out, err = p.cli("add", "--instance", "id=node4,group=rack1,weight=1,endpoint=node4:9000,http=node4:7201")
	require.NoError(t, err)
	require.Contains(t, out, "node4")
	require.NoError(t, w.write(p.http, series, at(7)), "write while node4 joins")
	eventually(t, 3*time.Minute, "node4's shards AVAILABLE", func() error {
		pl, err := p.placement()
		if err != nil {
			return err
		}
		return settled(pl, "node1", "node2", "node3", "node4")
	})
	t.Logf("wall time of adding node4 (up -d node4, placement add, all shards AVAILABLE): %v", time.Since(start).Round(time.Millisecond))
	pl, err = p.placement()
	require.NoError(t, err)
	in, ok := pl.Instance("node4")
	require.True(t, ok)
	require.Len(t, in.Shards, 2048, "node4 shares rack1 with node1: half the shards each")
	eventually(t, time.Minute, "node4 healthy", func() error { return p.healthy("node4") })
	require.NoError(t, w.write(p.http, series, at(8)))
	require.NoError(t, w.check(p.http, from, to), "read with node4 serving half of rack1")

	// Remove it again: node1 takes its shards back, node4 leaves.
	start = time.Now()
	_, err = p.cli("remove", "node4")
	require.NoError(t, err)
	eventually(t, 3*time.Minute, "node4 out of the placement", func() error {
		pl, err := p.placement()
		if err != nil {
			return err
		}
		return settled(pl, "node1", "node2", "node3")
	})
	t.Logf("wall time of removing node4 (placement remove to node4 gone): %v", time.Since(start).Round(time.Millisecond))
	p.mustDC(2*time.Minute, "--profile", "node4", "stop", "node4")
	require.NoError(t, w.write(p.http, series, at(9)))
	require.NoError(t, w.check(p.http, from, to), "read after node4 left")
}
