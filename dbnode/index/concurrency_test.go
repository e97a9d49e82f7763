package index

import (
	"bytes"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"

	"github.com/tessera-tsdb/tessera/ident"
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
				for j := range got {
					if j > 0 && bytes.Compare(got[j-1], got[j]) >= 0 {
						errs <- fmt.Errorf("result not sorted/unique at %d", j)
						return
					}
					// A ref freed and reused mid-query would show up as a
					// series that does not match.
					if ls, err := ident.Labels(got[j]); err != nil || !matches(ls, ms) {
						errs <- fmt.Errorf("query returned non-matching series %q (%v)", got[j], err)
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

// TestQueryDuringChurn has retention free a block's series while the next
// round reuses their refs for other series, under constant queries: a query
// that matched a ref before it was freed must not return the series that
// took the ref over (odd and even rounds carry different parity labels).
func TestQueryDuringChurn(t *testing.T) {
	const rounds, perRound = 60, 200
	ix := New(10)
	var done atomic.Bool
	var readers sync.WaitGroup
	errs := make(chan error, 4)
	for p := range 2 {
		readers.Go(func() {
			ms := []*labels.Matcher{mt(t, "parity", "=", fmt.Sprint(p))}
			for !done.Load() {
				got, err := ix.Query(ms, 0, rounds*10)
				if err != nil {
					errs <- err
					return
				}
				for _, id := range got {
					if ls, err := ident.Labels(id); err != nil || !matches(ls, ms) {
						errs <- fmt.Errorf("query for parity %d returned %q", p, id)
						return
					}
				}
			}
		})
	}
	for r := range rounds {
		for i := range perRound {
			require.NoError(t, ix.Insert(sid("__name__", "m", "parity", fmt.Sprint(r%2), "round", fmt.Sprint(r), "i", fmt.Sprint(i)), int64(r)*10))
		}
		ix.DropBlocksBefore(int64(r) * 10) // frees the previous round
	}
	done.Store(true)
	readers.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Equal(t, perRound, ix.NumSeries())
	require.LessOrEqual(t, ix.series.next, uint32(2*perRound), "refs are reused")
}
