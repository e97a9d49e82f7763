package commitlog

import (
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const benchBatch = 5000

// benchEntries is one writer's batch: benchBatch distinct series with
// realistic canonical IDs (~70 bytes).
func benchEntries(writer int) []Entry {
	b := make([]Entry, benchBatch)
	for i := range b {
		b[i] = Entry{
			Namespace: "default",
			ID:        fmt.Appendf(nil, "\x08__name__\x13http_requests_total\x08instance\x0ahost-%04d\x03job\x03w%02d", i, writer),
			V:         float64(i),
		}
	}
	return b
}

func mallocs() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.Mallocs
}

// benchWrite runs b.N batches of benchBatch entries spread over writers
// goroutines and reports entries/s and allocations per entry.
func benchWrite(b *testing.B, mode Mode, writers int) {
	l, _, err := Open(testOptions(Options{Dir: b.TempDir(), Mode: mode}), nil)
	require.NoError(b, err)
	batches := make([][]Entry, writers)
	for w := range batches {
		batches[w] = benchEntries(w)
	}
	var next atomic.Int64
	var queueFull atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	m0 := mallocs()
	for w := range writers {
		wg.Go(func() {
			batch := batches[w]
			for it := next.Add(1); it <= int64(b.N); it = next.Add(1) {
				for i := range batch {
					batch[i].T = it*1000 + int64(i)
				}
				for {
					err := l.Write(batch)
					if err == ErrQueueFull {
						// Back off like a remote-write client answered 503
						// (spinning would steal the flusher's CPU).
						queueFull.Add(1)
						<-time.After(100 * time.Microsecond)
						continue
					}
					if err != nil {
						b.Error(err)
						return
					}
					break
				}
			}
		})
	}
	wg.Wait()
	require.NoError(b, l.Close())
	b.StopTimer()
	allocs := mallocs() - m0
	entries := float64(b.N) * benchBatch
	b.ReportMetric(entries/b.Elapsed().Seconds(), "entries/s")
	b.ReportMetric(float64(allocs)/entries, "allocs/entry")
	b.ReportMetric(float64(queueFull.Load()), "queue-full")
}

func BenchmarkWriteSync(b *testing.B) {
	for _, writers := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) { benchWrite(b, ModeSync, writers) })
	}
}

func BenchmarkWriteAsync(b *testing.B) {
	for _, writers := range []int{1, 4} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) { benchWrite(b, ModeAsync, writers) })
	}
}

func BenchmarkReplay(b *testing.B) {
	dir := b.TempDir()
	l, _, err := Open(testOptions(Options{Dir: dir, Mode: ModeAsync}), nil)
	require.NoError(b, err)
	batch := benchEntries(0)
	const batches = 100
	for it := range batches {
		for i := range batch {
			batch[i].T = int64(it)*1000 + int64(i)
		}
		require.NoError(b, l.Write(batch))
	}
	require.NoError(b, l.Close())
	files := logFiles(b, dir)
	require.Len(b, files, 1)
	info, err := os.Stat(files[0])
	require.NoError(b, err)
	b.SetBytes(info.Size())

	b.ResetTimer()
	m0 := mallocs()
	for range b.N {
		n := 0
		l, _, err := Open(testOptions(Options{Dir: dir}), func(Entry) error { n++; return nil })
		require.NoError(b, err)
		require.NoError(b, l.Close())
		require.Equal(b, batches*benchBatch, n)
		b.StopTimer()
		for _, p := range logFiles(b, dir)[1:] { // the empty files Open started
			require.NoError(b, os.Remove(p))
		}
		b.StartTimer()
	}
	allocs := mallocs() - m0
	entries := float64(b.N) * batches * benchBatch
	b.ReportMetric(entries/b.Elapsed().Seconds(), "entries/s")
	b.ReportMetric(float64(allocs)/entries, "allocs/entry")
}
