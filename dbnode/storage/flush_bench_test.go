package storage

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tessera-tsdb/tessera/dbnode/vfs"
)

// BenchmarkFlush times the Tick that flushes one sealed 2 h block of N
// series spread over 4096 shards, 120 samples each (an hour at 30 s). It
// reports the fsyncs and files the flush makes (fsyncs/op, files/op) and
// the bytes on disk (disk-B/op, in 4 KiB blocks as du counts them).
// cpu-ms/op is the process' user+system CPU time during the Tick.
// Setup (writing the samples) is not timed.
func BenchmarkFlush(b *testing.B) {
	for _, n := range []int{1000, 10_000} {
		b.Run(fmt.Sprintf("series=%d", n), func(b *testing.B) {
			var syncs atomic.Int64
			var files, disk int64
			var cpu time.Duration
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				clk := &clock{t: t0.Add(65 * time.Minute)} // after the last sample
				opts := testOpts(b.TempDir(), clk)
				opts.NumShards = 4096
				faulty := vfs.NewFaulty(vfs.OS())
				opts.FS = faulty
				db, err := Open(opts)
				if err != nil {
					b.Fatal(err)
				}
				base := ms(t0)
				batch := make([]Sample, 0, n)
				for k := 0; k < 120; k++ {
					batch = batch[:0]
					for s := 0; s < n; s++ {
						id := sid("bench_flush", "s", fmt.Sprint(s))
						batch = append(batch, Sample{ID: id, Shard: db.Shard(id), T: base + int64(k)*30_000, V: float64(s*k%1000) / 10})
					}
					if err := db.WriteBatch("default", batch); err != nil {
						b.Fatal(err)
					}
				}
				clk.Add(2 * time.Hour)
				faulty.Set(func(op vfs.Op, path string, _ int) (bool, int) {
					if op == vfs.OpSync && !strings.Contains(path, "commitlog") {
						syncs.Add(1)
					}
					return false, 0
				})
				before := cpuTime()
				b.StartTimer()
				if err := db.Tick(); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				cpu += cpuTime() - before
				faulty.Set(nil)
				root := filepath.Join(opts.Dir, "data")
				_ = filepath.WalkDir(root, func(_ string, d fs.DirEntry, err error) error {
					if err == nil && !d.IsDir() {
						files++
						if info, err := d.Info(); err == nil {
							disk += (info.Size() + 4095) / 4096 * 4096
						}
					}
					return nil
				})
				if err := db.Close(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(syncs.Load())/float64(b.N), "fsyncs/op")
			b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/op")
			b.ReportMetric(float64(files)/float64(b.N), "files/op")
			b.ReportMetric(float64(disk)/float64(b.N), "disk-B/op")
		})
	}
}

// cpuTime is the process' user plus system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
