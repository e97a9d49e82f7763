package placement

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tessera-tsdb/tessera/placement/etcdtest"
)

// awaitVersion reads from the watch until it delivers a placement of at
// least the given version, failing after a deadline.
func awaitVersion(t *testing.T, ch <-chan Placement, atLeast int64) Placement {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case p, ok := <-ch:
			require.True(t, ok, "watch closed early")
			require.NoError(t, p.Validate())
			if p.Version >= atLeast {
				return p
			}
		case <-deadline:
			t.Fatalf("watch did not deliver version >= %d", atLeast)
		}
	}
}

func TestWatchDeliversChanges(t *testing.T) {
	ctx := testCtx(t)
	st := NewStore(newClient(t, etcdtest.Start(t)), StoreOptions{})
	wctx, cancel := context.WithCancel(ctx)
	ch := st.Watch(wctx) // before the placement exists

	p, err := st.Init(ctx, cluster(3, 3), 64, 3)
	require.NoError(t, err)
	got := awaitVersion(t, ch, p.Version)
	requireSame(t, p, got, "first delivery")

	var last int64
	for _, in := range p.Instances {
		p, err = st.MarkAvailable(ctx, in.ID)
		require.NoError(t, err)
		got = awaitVersion(t, ch, p.Version)
		require.Greater(t, got.Version, last, "versions only go up")
		last = got.Version
	}
	requireSame(t, p, got, "latest delivery")

	cancel()
	for range ch { // closes once the context is done
	}
}

func TestWatchStartsWithCurrentPlacement(t *testing.T) {
	ctx := testCtx(t)
	st := NewStore(newClient(t, etcdtest.Start(t)), StoreOptions{})
	p, err := st.Init(ctx, cluster(3, 3), 64, 1)
	require.NoError(t, err)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	requireSame(t, p, awaitVersion(t, st.Watch(wctx), p.Version), "current placement first")
}

// TestWatchRecoversFromCompaction starts the watch on a revision etcd has
// compacted away: the watch must re-read and deliver the latest placement.
func TestWatchRecoversFromCompaction(t *testing.T) {
	ctx := testCtx(t)
	c := newClient(t, etcdtest.Start(t))
	st := NewStore(c, StoreOptions{})
	p, err := st.Init(ctx, cluster(3, 3), 64, 1)
	require.NoError(t, err)
	stale := p.Version
	for _, in := range p.Instances {
		p, err = st.MarkAvailable(ctx, in.ID)
		require.NoError(t, err)
	}
	_, err = c.Compact(ctx, p.Version)
	require.NoError(t, err)

	wctx, cancel := context.WithCancel(ctx)
	ch := make(chan Placement)
	go st.watch(wctx, ch, stale)
	requireSame(t, p, awaitVersion(t, ch, p.Version), "latest after compaction")
	cancel()
	for range ch {
	}
}

// TestWatchSurvivesEtcdRestart keeps one watch open across an etcd restart.
func TestWatchSurvivesEtcdRestart(t *testing.T) {
	ctx := testCtx(t)
	srv := etcdtest.StartServer(t)
	c := newClient(t, srv.Endpoints())
	st := NewStore(c, StoreOptions{})
	p, err := st.Init(ctx, cluster(3, 3), 64, 1)
	require.NoError(t, err)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch := st.Watch(wctx)
	awaitVersion(t, ch, p.Version)

	srv.Restart() // takes a few seconds: etcd waits for the open watch stream before it stops
	for _, in := range p.Instances {
		p, err = st.MarkAvailable(ctx, in.ID)
		require.NoError(t, err)
	}
	requireSame(t, p, awaitVersion(t, ch, p.Version), "delivered after restart")
}
