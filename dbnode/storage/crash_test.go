package storage

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/dbnode/commitlog"
)

// The crash child writes batches forever in sync mode and prints the
// number of every acknowledged batch; the parent kills it with SIGKILL and
// checks that every acknowledged sample is there after reopening.
const crashChildEnv = "TESSERA_STORAGE_CRASH_CHILD_DIR"

func crashBatch(db *Database, b int) []Sample {
	out := make([]Sample, 0, 100)
	for s := 0; s < 100; s++ {
		id := sid("crash", "s", strconv.Itoa(s))
		out = append(out, Sample{ID: id, Shard: db.Shard(id), T: ms(t0) + int64(b), V: float64(b*1000 + s)})
	}
	return out
}

// crashHists is batch b's histogram samples: one per series for the first
// 20 of crashBatch's series (which have floats too) and 5 series of their
// own, integer and float in turn. They are crashHistAt after the floats:
// a series holds one sample per timestamp.
func crashHists(db *Database, b int) []HistogramSample {
	out := make([]HistogramSample, 0, 25)
	for s := 0; s < 25; s++ {
		id := sid("crash", "s", strconv.Itoa(s))
		if s >= 20 {
			id = sid("crash_hist", "s", strconv.Itoa(s))
		}
		hs := HistogramSample{ID: id, Shard: db.Shard(id), T: ms(t0) + crashHistAt + int64(b)}
		h := testHist(b + s)
		if (b+s)%2 == 0 {
			hs.FH = h.ToFloat(nil)
		} else {
			hs.H = h
		}
		out = append(out, hs)
	}
	return out
}

// crashHistAt is where crashHists' timestamps start, after the floats'.
const crashHistAt = 10 * 60 * 1000

func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashChildEnv)
	if dir == "" {
		t.Skip("helper process for TestSIGKILLLosesNoAcknowledgedWrite")
	}
	clk := &clock{t: t0.Add(30 * time.Minute)}
	db, err := Open(testOpts(dir, clk))
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(2)
	}
	w := bufio.NewWriter(os.Stdout)
	for b := 0; ; b++ {
		if err := db.WriteBatch("default", crashBatch(db, b)); err != nil {
			fmt.Println("write:", err)
			os.Exit(2)
		}
		if err := db.WriteHistograms("default", crashHists(db, b)); err != nil {
			fmt.Println("write histograms:", err)
			os.Exit(2)
		}
		fmt.Fprintf(w, "ack %d\n", b)
		w.Flush()
	}
}

func TestSIGKILLLosesNoAcknowledgedWrite(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+dir)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	lastAck := -1
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "ack ") {
			lastAck, _ = strconv.Atoi(strings.TrimPrefix(line, "ack "))
			if lastAck >= 200 {
				break
			}
		} else if !strings.HasPrefix(line, "=== RUN") {
			t.Fatalf("child: %s", line)
		}
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	// Acks printed after our last read are acknowledged too: drain them.
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, "ack ") {
			lastAck, _ = strconv.Atoi(strings.TrimPrefix(line, "ack "))
		}
	}
	_ = cmd.Wait()
	require.GreaterOrEqual(t, lastAck, 200)

	clk := &clock{t: t0.Add(30 * time.Minute)}
	db := openDB(t, testOpts(dir, clk))
	for _, s := range crashBatch(db, 0) {
		got := readAll(t, db, s.ID, ms(t0), ms(t0)+int64(lastAck)+1000)
		require.GreaterOrEqual(t, len(got), lastAck+1, "series %s", s.ID)
		for b := 0; b <= lastAck; b++ {
			require.Equal(t, ms(t0)+int64(b), got[b].T)
			require.Equal(t, float64(b*1000)+s.V, got[b].V)
		}
	}
	var want [25][]hv
	for b := 0; b <= lastAck; b++ {
		for s, h := range crashHists(db, b) {
			want[s] = append(want[s], histOf(h))
		}
	}
	for s, h := range crashHists(db, 0) {
		got := readHists(t, db, h.ID, ms(t0), ms(t0)+crashHistAt+int64(lastAck)+1000)
		require.GreaterOrEqual(t, len(got), lastAck+1, "series %s", h.ID)
		require.Equal(t, want[s], got[:lastAck+1], "series %s", h.ID)
	}
}

func BenchmarkWriteBatch(b *testing.B) {
	for _, mode := range []struct {
		name string
		m    commitlog.Mode
	}{{"sync", commitlog.ModeSync}, {"async", commitlog.ModeAsync}} {
		b.Run(mode.name, func(b *testing.B) {
			clk := &clock{t: t0.Add(30 * time.Minute)}
			opts := testOpts(b.TempDir(), clk)
			opts.NumShards = 4096
			opts.CommitLogMode = mode.m
			opts.Namespaces[0].BufferFuture = 40 * time.Hour // b.N may run far ahead of the fixed clock
			db, err := Open(opts)
			require.NoError(b, err)
			defer db.Close()
			const numSeries, batchSize = 100_000, 5000
			ids := make([][]byte, numSeries)
			shards := make([]uint32, numSeries)
			for i := range ids {
				ids[i] = sid("bench_metric", "instance", "host-"+strconv.Itoa(i%100), "series", strconv.Itoa(i))
				shards[i] = db.Shard(ids[i])
			}
			b.ReportAllocs()
			b.ResetTimer()
			// b.N counts batches; concurrency like an HTTP server with 4
			// requests in flight.
			b.SetParallelism(2)
			var next int64
			var mu = make(chan struct{}, 1)
			mu <- struct{}{}
			b.RunParallel(func(pb *testing.PB) {
				local := make([]Sample, batchSize)
				for pb.Next() {
					<-mu
					n := next
					next++
					mu <- struct{}{}
					for k := range local {
						idx := (n*batchSize + int64(k))
						i := idx % numSeries
						local[k] = Sample{ID: ids[i], Shard: shards[i], T: ms(t0) + (idx/numSeries)*10_000, V: float64(idx)}
					}
					if err := db.WriteBatch("default", local); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N*batchSize)/b.Elapsed().Seconds(), "samples/s")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batchSize), "ns/sample")
		})
	}
}
