package commitlog

import (
	"fmt"
	"math"
	"sort"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRoundTrip(t *testing.T) {
	for _, mode := range []Mode{ModeSync, ModeAsync} {
		t.Run(mode.String(), func(t *testing.T) {
			opts := testOptions(Options{Dir: t.TempDir(), Mode: mode})
			l, stats, err := Open(opts, nil)
			require.NoError(t, err)
			require.Equal(t, ReplayStats{}, stats)

			special := []Entry{
				{Namespace: "default", ID: []byte("a"), T: -5, V: math.NaN()},
				{Namespace: "default", ID: []byte("a"), T: math.MaxInt64, V: math.Inf(-1)},
				{Namespace: "other", ID: []byte("a"), T: math.MinInt64, V: math.Copysign(0, -1)},
				{Namespace: "", ID: []byte{}, T: 0, V: math.SmallestNonzeroFloat64},
				{Namespace: "default", ID: []byte{0, 0xff, 0}, T: 1, V: math.Float64frombits(0x7ff8000000000001)},
			}
			batches := [][]Entry{
				makeBatch("default", "s", 100, 10, 1000),
				special,
				makeBatch("other", "s", 50, 50, 2000),
				makeBatch("default", "s", 100, 20, 1000), // redefines nothing for s-0..9
			}
			for _, b := range batches {
				require.NoError(t, l.Write(b))
			}
			require.NoError(t, l.Write(nil))
			require.NoError(t, l.Close())

			got, stats := reopen(t, opts)
			require.Equal(t, toRecs(batches...), got)
			require.Equal(t, ReplayStats{Files: 1, Entries: len(got)}, stats)
		})
	}
}

func TestConcurrentSyncWriters(t *testing.T) {
	opts := testOptions(Options{Dir: t.TempDir(), Mode: ModeSync, MaxFileSize: 64 << 10})
	l, _, err := Open(opts, nil)
	require.NoError(t, err)

	const writers, batches, perBatch = 8, 40, 50
	var want []rec
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range batches {
				b := makeBatch(fmt.Sprintf("ns%d", w%2), fmt.Sprintf("w%d", w), perBatch, 30, int64(i*perBatch))
				if err := l.Write(b); err != nil {
					t.Errorf("writer %d batch %d: %v", w, i, err)
					return
				}
				mu.Lock()
				want = append(want, toRecs(b)...)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.NoError(t, l.Close())

	got, stats := reopen(t, opts)
	require.Equal(t, writers*batches*perBatch, stats.Entries)
	require.Zero(t, stats.CorruptTails)
	sortRecs(want)
	sortRecs(got)
	require.Equal(t, want, got)
}

func sortRecs(r []rec) {
	sort.Slice(r, func(i, j int) bool {
		a, b := r[i], r[j]
		if a.NS != b.NS {
			return a.NS < b.NS
		}
		if a.ID != b.ID {
			return a.ID < b.ID
		}
		return a.T < b.T
	})
}

func TestRotationBySize(t *testing.T) {
	const maxSize = 4 << 10
	opts := testOptions(Options{Dir: t.TempDir(), MaxFileSize: maxSize})
	l, _, err := Open(opts, nil)
	require.NoError(t, err)
	var batches [][]Entry
	for i := range 150 {
		b := makeBatch("default", "s", 20, 40, int64(i*20))
		batches = append(batches, b)
		require.NoError(t, l.Write(b))
	}
	files := l.Files()
	require.Greater(t, len(files), 3)
	for i, f := range files {
		if i > 0 {
			require.Greater(t, f.Seq, files[i-1].Seq)
		}
		offs, size := frames(t, f.Path)
		require.NotEmpty(t, offs)
		// Rotation happens once the file reaches maxSize, so only its last
		// record may cross the limit.
		require.Less(t, offs[len(offs)-1], int64(maxSize), f.Path)
		require.GreaterOrEqual(t, size, int64(maxSize), f.Path)
	}
	require.NoError(t, l.Close())

	got, stats := reopen(t, opts)
	require.Equal(t, toRecs(batches...), got)
	require.Equal(t, len(files)+1, stats.Files)
}

func TestCloseThenWrite(t *testing.T) {
	l, _, err := Open(testOptions(Options{Dir: t.TempDir()}), nil)
	require.NoError(t, err)
	require.NoError(t, l.Write(makeBatch("ns", "s", 1, 1, 0)))
	require.NoError(t, l.Close())
	require.ErrorIs(t, l.Write(makeBatch("ns", "s", 1, 1, 0)), ErrClosed)
	require.ErrorIs(t, l.Write(nil), ErrClosed)
	require.ErrorIs(t, l.Rotate(), ErrClosed)
	require.ErrorIs(t, l.Close(), ErrClosed)
	require.Len(t, l.Files(), 1, "the active file is closed by Close")
}

func TestCloseWhileWriting(t *testing.T) {
	opts := testOptions(Options{Dir: t.TempDir()})
	l, _, err := Open(opts, nil)
	require.NoError(t, err)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var acked []rec
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				b := makeBatch("ns", fmt.Sprintf("w%d", w), 10, 10, int64(i*10))
				err := l.Write(b)
				if err != nil {
					if err != ErrClosed {
						t.Errorf("write: %v", err)
					}
					return
				}
				mu.Lock()
				acked = append(acked, toRecs(b)...)
				mu.Unlock()
			}
		})
	}
	for {
		mu.Lock()
		n := len(acked)
		mu.Unlock()
		if n >= 400 {
			break
		}
		require.NoError(t, l.Rotate())
	}
	require.NoError(t, l.Close())
	wg.Wait()
	got, _ := reopen(t, opts)
	sortRecs(got)
	sortRecs(acked)
	require.Equal(t, acked, got)
}

func TestReplayErrorFailsOpen(t *testing.T) {
	opts := testOptions(Options{Dir: t.TempDir()})
	l, _, err := Open(opts, nil)
	require.NoError(t, err)
	require.NoError(t, l.Write(makeBatch("ns", "s", 3, 3, 0)))
	require.NoError(t, l.Close())
	boom := fmt.Errorf("boom")
	_, _, err = Open(opts, func(Entry) error { return boom })
	require.ErrorIs(t, err, boom)
}

func TestOpenRequiresDir(t *testing.T) {
	_, _, err := Open(testOptions(Options{}), nil)
	require.ErrorContains(t, err, "Dir")
}

// Batches enqueued before anyone waits form one group: one record each,
// one write and one fsync for them all, and every waiter sees it durable.
func TestEnqueueThenWaitSharesOneFsync(t *testing.T) {
	scope := newTestScope()
	opts := testOptions(Options{Dir: t.TempDir(), Mode: ModeSync, Metrics: scope})
	l, _, err := Open(opts, nil)
	require.NoError(t, err)
	fsyncsAtOpen := counter(scope, "fsyncs") // the new file's header

	batches := [][]Entry{makeBatch("default", "a", 10, 3, 0), makeBatch("default", "b", 20, 5, 0), makeBatch("other", "a", 5, 5, 100)}
	var tickets []Ticket
	for _, b := range batches {
		tk, err := l.Enqueue(b)
		require.NoError(t, err)
		tickets = append(tickets, tk)
	}
	var wg sync.WaitGroup
	for i, tk := range tickets {
		wg.Go(func() {
			if err := tk.Wait(); err != nil {
				t.Errorf("ticket %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	require.Equal(t, int64(1), counter(scope, "fsyncs")-fsyncsAtOpen)
	require.Equal(t, int64(3), counter(scope, "records"))

	// Async mode and empty batches give tickets with nothing to wait for.
	tk, err := l.Enqueue(nil)
	require.NoError(t, err)
	require.NoError(t, tk.Wait())
	require.NoError(t, l.Close())
	_, err = l.Enqueue(batches[0])
	require.ErrorIs(t, err, ErrClosed)

	got, _ := reopen(t, opts)
	require.Equal(t, toRecs(batches...), got)
}

// A batch enqueued but not yet waited for is still written by Close.
func TestCloseWritesEnqueuedBatch(t *testing.T) {
	opts := testOptions(Options{Dir: t.TempDir(), Mode: ModeSync})
	l, _, err := Open(opts, nil)
	require.NoError(t, err)
	b := makeBatch("default", "a", 10, 2, 0)
	tk, err := l.Enqueue(b)
	require.NoError(t, err)
	require.NoError(t, l.Close())
	require.NoError(t, tk.Wait())
	got, _ := reopen(t, opts)
	require.Equal(t, toRecs(b), got)
}
