package placement

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/tessera-tsdb/tessera/placement/etcdtest"
)

func newClient(t testing.TB, endpoints []string) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestStoreLifecycle(t *testing.T) {
	ctx := testCtx(t)
	st := NewStore(newClient(t, etcdtest.Start(t)), StoreOptions{Cluster: "c1"})
	require.Equal(t, "_tessera/placement/c1", st.Key())

	_, err := st.Get(ctx)
	require.ErrorIs(t, err, ErrNotFound)

	p, err := st.Init(ctx, cluster(6, 3), 256, 3)
	require.NoError(t, err)
	require.Positive(t, p.Version)
	got, err := st.Get(ctx)
	require.NoError(t, err)
	requireSame(t, p, got, "get returns what init wrote")
	for _, in := range got.Instances {
		for _, s := range in.Shards {
			require.Positive(t, s.CutoverNanos, "init stamps cutover")
		}
	}

	_, err = st.Init(ctx, cluster(3, 3), 256, 3)
	require.ErrorIs(t, err, ErrExists)

	_, err = st.Add(ctx, []Instance{inst("x", "g0", 1)}, ChangeOptions{})
	require.ErrorIs(t, err, ErrShardsMoving, "init leaves every shard INITIALIZING")

	for _, in := range got.Instances {
		p, err = st.MarkAvailable(ctx, in.ID)
		require.NoError(t, err)
	}
	require.Zero(t, MovingShards(p))
	again, err := st.MarkAvailable(ctx, "i000")
	require.NoError(t, err)
	require.Equal(t, p.Version, again.Version, "a no-op writes nothing")

	added, err := st.Add(ctx, []Instance{inst("x", "g0", 1)}, ChangeOptions{})
	require.NoError(t, err)
	require.Greater(t, added.Version, p.Version)
	_, err = st.Add(ctx, []Instance{inst("y", "g1", 1)}, ChangeOptions{})
	require.ErrorIs(t, err, ErrShardsMoving)
	_, err = st.Replace(ctx, []string{"i001"}, []Instance{inst("y", "g1", 1)}, ChangeOptions{})
	require.ErrorIs(t, err, ErrShardsMoving)

	undone, err := st.Remove(ctx, []string{"x"}, ChangeOptions{})
	require.NoError(t, err, "undoing an add needs no force")
	_, ok := undone.Instance("x")
	require.False(t, ok)
	require.Zero(t, MovingShards(undone))

	forced, err := st.Add(ctx, []Instance{inst("x2", "g0", 1)}, ChangeOptions{})
	require.NoError(t, err)
	forced, err = st.Add(ctx, []Instance{inst("y", "g1", 1)}, ChangeOptions{Force: true})
	require.NoError(t, err)
	_, ok = forced.Instance("y")
	require.True(t, ok)

	_, err = st.Remove(ctx, []string{"nope"}, ChangeOptions{Force: true})
	require.ErrorIs(t, err, ErrUnknownInstance)
}

// TestStoreConcurrentWriters races writers adding distinct instances: each
// write must win a distinct revision, losers retry from a fresh read, and
// the final placement holds every newcomer.
func TestStoreConcurrentWriters(t *testing.T) {
	ctx := testCtx(t)
	endpoints := etcdtest.Start(t)
	setup := NewStore(newClient(t, endpoints), StoreOptions{})
	p, err := setup.Init(ctx, cluster(6, 3), 512, 2)
	require.NoError(t, err)
	p = MarkAllAvailable(p)
	_, err = setup.Update(ctx, func(Placement) (Placement, error) { return p, nil })
	require.NoError(t, err)

	const writers = 8
	type result struct {
		read, wrote int64 // version the winning attempt read, and wrote
		err         error
	}
	var (
		mu       sync.Mutex
		attempts int
		wg       sync.WaitGroup
		results  = make([]result, writers)
	)
	for w := range writers {
		st := NewStore(newClient(t, endpoints), StoreOptions{MaxRetries: 3 * writers})
		wg.Add(1)
		go func() {
			defer wg.Done()
			var read int64
			next, err := st.Update(ctx, func(cur Placement) (Placement, error) {
				mu.Lock()
				attempts++
				mu.Unlock()
				read = cur.Version
				return Add(cur, inst(fmt.Sprintf("w%d", w), fmt.Sprintf("g%d", w%3), 1))
			})
			results[w] = result{read: read, wrote: next.Version, err: err}
		}()
	}
	wg.Wait()
	t.Logf("%d writers needed %d attempts", writers, attempts)
	wonOn, wrote := map[int64]int{}, map[int64]int{}
	for w, r := range results {
		require.NoError(t, r.err, "writer %d", w)
		require.NotContains(t, wonOn, r.read, "writers %d and %d both won on revision %d", wonOn[r.read], w, r.read)
		wonOn[r.read], wrote[r.wrote] = w, w
	}
	require.Len(t, wrote, writers)

	final, err := setup.Get(ctx)
	require.NoError(t, err)
	require.NoError(t, final.Validate())
	for w := range writers {
		_, ok := final.Instance(fmt.Sprintf("w%d", w))
		require.True(t, ok, "writer %d's instance is in the final placement", w)
	}
}

// TestStoreCASConflictGivesUp makes every attempt lose: fn itself bumps
// the key behind the store's back.
func TestStoreCASConflictGivesUp(t *testing.T) {
	ctx := testCtx(t)
	c := newClient(t, etcdtest.Start(t))
	st := NewStore(c, StoreOptions{MaxRetries: 3})
	p, err := st.Init(ctx, cluster(3, 3), 64, 1)
	require.NoError(t, err)
	calls := 0
	_, err = st.Update(ctx, func(cur Placement) (Placement, error) {
		calls++
		_, err := c.Put(ctx, st.Key(), mustEncode(t, p))
		require.NoError(t, err)
		return MarkAllAvailable(cur), nil
	})
	require.ErrorIs(t, err, ErrCASConflict)
	require.ErrorContains(t, err, "after 3 retries")
	require.Equal(t, 4, calls)
}

func TestStoreRefusesInvalidResult(t *testing.T) {
	ctx := testCtx(t)
	st := NewStore(newClient(t, etcdtest.Start(t)), StoreOptions{})
	_, err := st.Init(ctx, cluster(3, 3), 64, 1)
	require.NoError(t, err)
	_, err = st.Update(ctx, func(cur Placement) (Placement, error) {
		cur.Instances[0].Endpoint = ""
		return cur, nil
	})
	require.ErrorIs(t, err, ErrInvalid)
	_, err = st.Update(ctx, func(cur Placement) (Placement, error) {
		cur.Instances[0].Shards = nil // INITIALIZING -> absent is fine, but replicas go missing
		return cur, nil
	})
	require.ErrorIs(t, err, ErrInvalid)
}

func mustEncode(t testing.TB, p Placement) string {
	b, err := encodeStored(p)
	require.NoError(t, err)
	return string(b)
}

// TestStoreUpdateFromGuess: a write starting from a placement the caller
// already holds skips the read, yet loses nothing when that placement is
// stale: the CAS fails, its reply carries the current placement, and fn
// runs again on it, without counting as a retry.
func TestStoreUpdateFromGuess(t *testing.T) {
	ctx := testCtx(t)
	c := newClient(t, etcdtest.Start(t))
	st := NewStore(c, StoreOptions{MaxRetries: -1}) // no retries: only a stale guess may re-run fn
	p, err := st.Init(ctx, cluster(3, 3), 64, 3)
	require.NoError(t, err)
	p, err = st.Update(ctx, func(cur Placement) (Placement, error) { return MarkAllAvailable(cur), nil })
	require.NoError(t, err)
	joined, err := st.Add(ctx, []Instance{inst("x", "g0", 1)}, ChangeOptions{})
	require.NoError(t, err)
	in, _ := joined.Instance("x")
	half := []uint32{in.Shards[0].ID, in.Shards[1].ID}

	// Current guess: one write, and what it returns is what a reader
	// decodes from etcd (the node feeds it to its topology).
	calls := 0
	marked, err := st.UpdateFrom(ctx, joined, func(cur Placement) (Placement, error) {
		calls++
		return MarkAvailable(cur, "x", half...)
	})
	require.NoError(t, err)
	require.Equal(t, 1, calls)
	require.Greater(t, marked.Version, joined.Version)
	got, err := st.Get(ctx)
	require.NoError(t, err)
	requireSame(t, got, marked, "the CAS result is the stored placement")

	// Stale guess (before the first mark): the second mark lands on top
	// of the first, which is kept.
	rest := []uint32{in.Shards[2].ID}
	calls = 0
	again, err := st.MarkAvailableFrom(ctx, joined, "x", rest...)
	require.NoError(t, err)
	require.Greater(t, again.Version, marked.Version)
	got, err = st.Get(ctx)
	require.NoError(t, err)
	requireSame(t, got, again, "stale guess")
	gx, _ := got.Instance("x")
	for _, sh := range append(half, rest...) {
		c, _ := gx.Shard(sh)
		require.Equal(t, Available, c.State, "shard %d", sh)
	}

	// A guess fn refuses (it predates instance x) is not the answer: the
	// current placement is.
	_, err = st.MarkAvailableFrom(ctx, p, "x", in.Shards[3].ID)
	require.NoError(t, err)

	// A guess in which nothing needs doing is checked against the
	// current placement before nothing is written.
	cur, err := st.Get(ctx)
	require.NoError(t, err)
	lie := MarkAllAvailable(cur)
	lie.Version = cur.Version
	done, err := st.MarkAvailableFrom(ctx, lie, "x")
	require.NoError(t, err)
	require.Greater(t, done.Version, cur.Version, "the current placement still had INITIALIZING copies")
	require.Zero(t, MovingShards(done))

	// Real contention still counts: a writer racing every attempt gives
	// up after MaxRetries even when it started from a guess (whose own
	// lost swap looks like a stale guess: one free attempt, no more).
	calls = 0
	_, err = st.UpdateFrom(ctx, done, func(cur Placement) (Placement, error) {
		calls++
		_, err := c.Put(ctx, st.Key(), mustEncode(t, cur))
		require.NoError(t, err)
		return Add(cur, inst("y", "g1", 1))
	})
	require.ErrorIs(t, err, ErrCASConflict)
	require.Equal(t, 2, calls, "the guess's attempt, then MaxRetries (0) retries")
}
