package storage

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/limits"
)

// TestActiveSeriesLimit: past limits.maxActiveSeries a new series is
// refused (ReasonSeriesLimit) and held series still written; a series
// leaving memory (flushed, or its shard dropped) frees its slot; replay
// and peer bootstrap are never refused.
func TestActiveSeriesLimit(t *testing.T) {
	clk := &clock{t: t0.Add(30 * time.Minute)}
	opts := testOpts(t.TempDir(), clk)
	opts.Limits = limits.New(limits.Config{MaxActiveSeries: 2}, nil)
	db := openDB(t, opts)
	base := ms(t0)
	a, b, c := sid("a"), sid("b"), sid("c")
	require.NoError(t, db.WriteBatch("default", append(samples(db, a, base+1000), samples(db, b, base+1000)...)))

	batch := append(samples(db, a, base+2000), append(samples(db, c, base+2000), samples(db, b, base+2000)...)...)
	err := db.WriteBatch("default", batch)
	var rej *RejectedError
	require.True(t, errors.As(err, &rej), "%v", err)
	require.Equal(t, 1, rej.Total)
	require.Equal(t, 1, rej.ByReason[ReasonSeriesLimit])
	require.Equal(t, 1, rej.Examples[0].Index)
	require.Contains(t, rej.Error(), `new series {__name__="c"} refused: this node holds 2 series, limits.maxActiveSeries=2`)
	require.Len(t, readAll(t, db, a, base, base+10_000), 2)
	require.Len(t, readAll(t, db, b, base, base+10_000), 2)
	require.Empty(t, readAll(t, db, c, base, base+10_000))

	// Peer bootstrap loads history past the limit.
	require.NoError(t, db.LoadBatch("default", samples(db, c, base+3000)))
	require.EqualValues(t, 3, db.ActiveSeries())

	// Flushed series leave memory and free their slots.
	clk.Add(2 * time.Hour)
	require.NoError(t, db.Tick())
	require.EqualValues(t, 0, db.ActiveSeries())
	d, e := sid("d"), sid("e")
	now := ms(clk.Now())
	require.NoError(t, db.WriteBatch("default", append(samples(db, d, now), samples(db, e, now)...)))
	require.EqualValues(t, 2, db.ActiveSeries())

	// A dropped shard frees its series' slots too.
	require.NoError(t, db.DropShard(db.Shard(d)))
	require.EqualValues(t, 1, db.ActiveSeries())

	// Replay after a restart is never refused, even over the limit.
	require.NoError(t, db.Close())
	opts.Limits = limits.New(limits.Config{MaxActiveSeries: 1}, nil)
	db2 := openDB(t, opts)
	require.GreaterOrEqual(t, db2.ActiveSeries(), int64(2), "replayed series count, even past the limit")
}

// TestActiveSeriesLimitConcurrent: writers creating series in many shards
// at once never take the node past the limit (run with -race).
func TestActiveSeriesLimitConcurrent(t *testing.T) {
	const limit, writers, perWriter = 100, 8, 50
	clk := &clock{t: t0.Add(30 * time.Minute)}
	opts := testOpts(t.TempDir(), clk)
	opts.Limits = limits.New(limits.Config{MaxActiveSeries: limit}, nil)
	db := openDB(t, opts)
	base := ms(t0)
	var mu sync.Mutex
	var written, refused int
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < perWriter; i++ {
				err := db.WriteBatch("default", samples(db, sid("m", "w", fmt.Sprint(w), "i", fmt.Sprint(i)), base+1000))
				var rej *RejectedError
				mu.Lock()
				switch {
				case err == nil:
					written++
				case errors.As(err, &rej) && rej.ByReason[ReasonSeriesLimit] == 1:
					refused++
				default:
					t.Errorf("write: %v", err)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	require.Equal(t, limit, written)
	require.Equal(t, writers*perWriter-limit, refused)
	require.EqualValues(t, limit, db.ActiveSeries())
}
