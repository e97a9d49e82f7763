package index

import (
	"bytes"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"
)

// TestConcurrentInsertQueryDrop runs writers, readers and retention at once
// (meant for -race) and then checks the blocks retention never touched hold
// exactly what was written to them.
func TestConcurrentInsertQueryDrop(t *testing.T) {
	const (
		writers   = 4
		perWriter = 3000
		stable    = int64(10_000) // block never dropped
	)
	ix := New(10)
	var wg, readers sync.WaitGroup
	var done atomic.Bool
	errs := make(chan error, 16)

	for w := range writers {
		wg.Go(func() {
			for i := range perWriter {
				id := sid("__name__", "m", "w", fmt.Sprint(w), "i", fmt.Sprint(i%500))
				if err := ix.Insert(id, int64(i/100)*10); err != nil {
					errs <- err
					return
				}
				if err := ix.Insert(id, stable); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	readers.Go(func() {
		for k := int64(0); !done.Load(); k = (k + 1) % 30 {
			ix.DropBlocksBefore(k * 10)
		}
	})
	for range 2 {
		readers.Go(func() {
			ms := []*labels.Matcher{mt(t, "w", "=~", "1|2"), mt(t, "i", "!~", "1.*")}
			for !done.Load() {
				got, err := ix.Query(ms, 0, 400)
				if err != nil {
					errs <- err
					return
				}
				for j := 1; j < len(got); j++ {
					if bytes.Compare(got[j-1], got[j]) >= 0 {
						errs <- fmt.Errorf("result not sorted/unique at %d", j)
						return
					}
				}
				if _, err := ix.LabelValues("i", ms, 0, 400); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	done.Store(true)
	readers.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	got, err := ix.Query([]*labels.Matcher{mt(t, "__name__", "=", "m")}, stable, stable)
	require.NoError(t, err)
	require.Len(t, got, writers*500)
	require.Equal(t, writers*500, ix.NumSeries())

	ix.DropBlocksBefore(stable + 10)
	require.Zero(t, ix.NumSeries())
}
