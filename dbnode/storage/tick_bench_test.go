package storage

import (
	"fmt"
	"strconv"
	"testing"
	"time"
)

// BenchmarkTick times the background tick over N idle series (each with
// one open-block sample: nothing to flush, expire or compact), the cost
// a node pays every storage.tickInterval for the series it holds.
// cpu-ms/op is the process' user+system CPU during the ticks. Setup
// (writing the series) is not timed; run with -benchtime=Nx, since each
// b.N round writes the series again.
func BenchmarkTick(b *testing.B) {
	for _, n := range []int{1_000_000} {
		b.Run(fmt.Sprintf("series=%d", n), func(b *testing.B) {
			b.StopTimer()
			clk := &clock{t: t0.Add(30 * time.Minute)}
			opts := testOpts(b.TempDir(), clk)
			opts.NumShards = 4096
			db, err := Open(opts)
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			const per = 10_000
			batch := make([]Sample, 0, per)
			for s := 0; s < n; s += per {
				batch = batch[:0]
				for k := s; k < s+per && k < n; k++ {
					id := sid("bench_tick", "s", strconv.Itoa(k))
					batch = append(batch, Sample{ID: id, Shard: db.Shard(id), T: ms(t0) + 1000, V: float64(k)})
				}
				if err := db.WriteBatch("default", batch); err != nil {
					b.Fatal(err)
				}
			}
			if err := db.Tick(); err != nil { // the first tick sizes what it keeps
				b.Fatal(err)
			}
			before := cpuTime()
			b.StartTimer()
			for i := 0; i < b.N; i++ {
				if err := db.Tick(); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64((cpuTime()-before).Microseconds())/1000/float64(b.N), "cpu-ms/op")
		})
	}
}
