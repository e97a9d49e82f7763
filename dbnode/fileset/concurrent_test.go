package fileset

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tessera-tsdb/tessera/dbnode/vfs"
)

// TestConcurrentReads hammers one reader from many goroutines with a cache
// small enough to evict constantly, mixing point reads and full scans.
func TestConcurrentReads(t *testing.T) {
	root := t.TempDir()
	id := testID(0, 0)
	series := genSeries(1500, 1, 1500)
	writeTest(t, vfs.OS(), root, id, series)
	cache := NewPageCache(4 * targetPageSize)
	r, err := OpenWith(vfs.OS(), root, id, OpenOptions{Cache: cache})
	require.NoError(t, err)
	defer r.Close()

	const workers = 12
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- readWorker(r, series, uint64(w))
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.LessOrEqual(t, cache.Size(), int64(4*targetPageSize))
	require.NoError(t, r.Close())
	require.Zero(t, cache.Size(), "close purges the reader's pages")
}

func readWorker(r *Reader, series []Series, seed uint64) error {
	rng := rand.New(rand.NewPCG(seed, 1))
	for i := range 800 {
		if i == 400 && seed%4 == 0 {
			n := 0
			if err := r.RangeData(func(id, data []byte) error {
				if !bytes.Equal(series[n].Data, data) {
					return fmt.Errorf("scan: series %q differs", id)
				}
				n++
				return nil
			}); err != nil {
				return err
			}
		}
		s := series[rng.IntN(len(series))]
		data, ok, err := r.Read(s.ID)
		if err != nil {
			return err
		}
		if !ok || !bytes.Equal(s.Data, data) {
			return fmt.Errorf("series %q: ok=%v, %d bytes, want %d", s.ID, ok, len(data), len(s.Data))
		}
	}
	return nil
}

func TestPageCacheEvictsLeastRecentlyUsed(t *testing.T) {
	c := NewPageCache(400)
	page := func(n int) []byte { return make([]byte, n) }
	c.add(pageKey{1, 0}, page(100))
	c.add(pageKey{1, 1}, page(100))
	c.add(pageKey{2, 0}, page(100))
	_, ok := c.get(pageKey{1, 0}) // now most recent
	require.True(t, ok)
	c.add(pageKey{2, 1}, page(100))
	c.add(pageKey{2, 2}, page(100)) // over budget: evicts {1,1}
	require.Equal(t, int64(400), c.Size())
	_, ok = c.get(pageKey{1, 1})
	require.False(t, ok)
	_, ok = c.get(pageKey{1, 0})
	require.True(t, ok)
	c.add(pageKey{3, 0}, page(101)) // > budget/4: not cached
	_, ok = c.get(pageKey{3, 0})
	require.False(t, ok)
	c.purge(2)
	require.Equal(t, int64(100), c.Size())

	off := NewPageCache(0)
	off.add(pageKey{1, 0}, page(1))
	_, ok = off.get(pageKey{1, 0})
	require.False(t, ok)
}
