package rpc

import (
	"context"
	"errors"
	"math"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/dbnode/commitlog"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
	"google.golang.org/grpc/codes"
)

// A hit needs the exact namespace, ID bytes and shard; anything else, a
// colliding slot included, is a miss.
func TestRefCacheExactKeys(t *testing.T) {
	c := newRefCache(1) // one slot: every series collides
	a, b := seriesID("cpu", "host", "a"), seriesID("cpu", "host", "b")
	ref := storage.SeriesRef(1<<32 | 1)
	c.put("default", a, 5, ref)

	look := func(ns string, id []byte, shard uint32) storage.SeriesRef {
		batch := []storage.Sample{{ID: id, Shard: shard}}
		hits := make([]*refEntry, 1)
		c.lookup(ns, batch, []bool{true}, make([]uint64, 1), hits)
		if hits[0] == nil {
			require.Zero(t, batch[0].Ref)
			return 0
		}
		require.Equal(t, hits[0].ref, batch[0].Ref)
		return batch[0].Ref
	}
	require.Equal(t, ref, look("default", append([]byte(nil), a...), 5))
	require.Zero(t, look("other", a, 5), "another namespace")
	require.Zero(t, look("default", a, 6), "another shard")
	require.Zero(t, look("default", b, 5), "another series in the same slot")
	require.Zero(t, look("default", a[:len(a)-1], 5), "a prefix of the ID")
	c.put("default", b, 5, storage.SeriesRef(2<<32|2))
	require.Zero(t, look("default", a, 5), "evicted by b")
}

// Writes through the cache stay correct when the cached ref goes stale
// (the shard was dropped) and when ownership is revoked after the series
// was cached.
func TestRefCacheStaleAndRevoked(t *testing.T) {
	db := openStorage(t, commitlog.ModeAsync)
	var revoked atomic.Bool
	own := ownFunc(func(shard uint32, op Op) error {
		if revoked.Load() {
			return errors.New("not owned by node2")
		}
		return nil
	})
	c := serve(t, db, own, ServerOptions{NodeID: "node1"}, ClientOptions{})
	ctx := context.Background()
	id := seriesID("cpu", "host", "a")
	s := samplesNearNow(3, 1)
	write := func(i int) error {
		_, err := writeReq(ctx, c, &WriteRequest{Namespace: testNS, Series: []WriteSeries{writeSeries(id, s[i:i+1])}})
		return err
	}
	fetch := func() []Sample {
		fr, err := c.Fetch(ctx, &FetchRequest{Namespace: testNS, IDs: [][]byte{id}, Start: 0, End: math.MaxInt64})
		require.NoError(t, err)
		return decodeStream(t, fr.Series[0].Stream)
	}
	require.NoError(t, write(0))
	require.NoError(t, db.DropShard(shardOf(id)))
	require.NoError(t, write(1), "a stale cached ref is looked up again")
	require.NoError(t, write(2))
	require.Equal(t, s[1:], fetch())

	revoked.Store(true)
	err := write(0)
	requireCode(t, err, codes.FailedPrecondition, "not owned")
	revoked.Store(false)
	require.Equal(t, s[1:], fetch(), "a refused write wrote nothing")
}
