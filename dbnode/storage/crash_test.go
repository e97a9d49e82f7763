package storage

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/dbnode/commitlog"
	"github.com/tessera-tsdb/tessera/dbnode/vfs"
)

// The crash child writes batches forever in sync mode and prints the
// number of every acknowledged batch; the parent kills it with SIGKILL and
// checks that every acknowledged sample is there after reopening.
const crashChildEnv = "TESSERA_STORAGE_CRASH_CHILD_DIR"

// crashSnapEnv makes the crash child write restart snapshots all along
// (and the commit log rotate every 64 KiB), so that the kill lands
// before, during or after one.
const crashSnapEnv = "TESSERA_STORAGE_CRASH_CHILD_SNAPSHOTS"

// crashOpts are the crash child's options, and the parent's to reopen.
func crashOpts(dir string, clk *clock, snapshots bool) Options {
	opts := testOpts(dir, clk)
	if snapshots {
		opts.RestartSnapshot = true
		opts.RestartSnapshotEvery = time.Minute
		opts.RestartSnapshotLogBytes = 1 << 20
		opts.CommitLogMaxFile = 64 << 10
	}
	return opts
}

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
	snapshots := os.Getenv(crashSnapEnv) != ""
	db, err := Open(crashOpts(dir, clk, snapshots))
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(2)
	}
	if snapshots {
		go func() {
			// A snapshot every 5 ms until the parent kills this process:
			// the ticker paces them, nothing waits on it.
			for range time.Tick(5 * time.Millisecond) {
				if _, err := db.WriteRestartSnapshot(); err != nil {
					fmt.Println("snapshot:", err)
					os.Exit(2)
				}
			}
		}()
	}
	w := bufio.NewWriter(os.Stdout)
	for b := 0; ; b++ {
		if snapshots && b == 100 {
			// At least one snapshot before the kill, whatever the
			// scheduling of the goroutine above.
			if _, err := db.WriteRestartSnapshot(); err != nil {
				fmt.Println("snapshot:", err)
				os.Exit(2)
			}
		}
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

func TestSIGKILLLosesNoAcknowledgedWrite(t *testing.T) { sigkillLosesNothing(t, false) }

// TestSIGKILLWithRestartSnapshotsLosesNoAcknowledgedWrite: the same with
// restart snapshots written all along in the child, loaded at reopen.
func TestSIGKILLWithRestartSnapshotsLosesNoAcknowledgedWrite(t *testing.T) {
	sigkillLosesNothing(t, true)
}

func sigkillLosesNothing(t *testing.T, snapshots bool) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+dir)
	if snapshots {
		cmd.Env = append(cmd.Env, crashSnapEnv+"=1")
	}
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
	db := openDB(t, crashOpts(dir, clk, snapshots))
	if snapshots {
		require.Greater(t, db.Recovery().CommitLog.CoveredFiles, 0, "a snapshot was loaded")
	}
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

// The interrupted-flush child writes a block and flushes it through a file
// system that kills the process (SIGKILL, no cleanup) when the flush
// creates the volume's checkpoint: the data and index files are durable,
// the checkpoint never written.
const flushCrashChildEnv = "TESSERA_STORAGE_FLUSH_CRASH_DIR"

func TestFlushCrashChild(t *testing.T) {
	dir := os.Getenv(flushCrashChildEnv)
	if dir == "" {
		t.Skip("helper process for TestInterruptedFlushIsRecoveredNotReported")
	}
	clk := &clock{t: t0.Add(30 * time.Minute)}
	opts := testOpts(dir, clk)
	faulty := vfs.NewFaulty(vfs.OS())
	opts.FS = faulty
	db, err := Open(opts)
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(2)
	}
	for i := range 10 {
		id := sid("flushcrash", "i", strconv.Itoa(i))
		if err := db.WriteBatch("default", samples(db, id, ms(t0)+1000, ms(t0)+2000, ms(t0)+3000)); err != nil {
			fmt.Println("write:", err)
			os.Exit(2)
		}
	}
	faulty.Set(func(op vfs.Op, path string, _ int) (bool, int) {
		if op == vfs.OpCreate && strings.HasSuffix(path, "-checkpoint.db") {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // SIGKILL is not deliverable late, but never go on
		}
		return false, 0
	})
	clk.Add(2 * time.Hour)
	err = db.Tick()
	fmt.Println("the flush was not interrupted:", err)
	os.Exit(2)
}

// TestInterruptedFlushIsRecoveredNotReported: a flush killed before its
// checkpoint leaves data and index files beside the volume's pending
// marker. The next start deletes them as an interrupted flush (not
// damage: nothing reported), the block's samples are all served from the
// commit log, and the next tick flushes them as a complete volume.
func TestInterruptedFlushIsRecoveredNotReported(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestFlushCrashChild$")
	cmd.Env = append(os.Environ(), flushCrashChildEnv+"="+dir)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	require.True(t, errors.As(err, &exit), "child: %v: %s", err, out)
	ws, ok := exit.Sys().(syscall.WaitStatus)
	require.True(t, ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL, "child not killed by the flush: %s", out)

	nsDir := filepath.Join(dir, "data", "default")
	for _, kind := range []string{"data", "index", "pending"} {
		m, err := filepath.Glob(filepath.Join(nsDir, "fileset-*-0-"+kind+".db"))
		require.NoError(t, err)
		require.Len(t, m, 1, "the interrupted flush left its %s file", kind)
	}
	m, err := filepath.Glob(filepath.Join(nsDir, "fileset-*-checkpoint.db"))
	require.NoError(t, err)
	require.Empty(t, m)

	clk := &clock{t: t0.Add(150 * time.Minute)}
	db := openDB(t, testOpts(dir, clk))
	require.Empty(t, db.Recovery().Warnings(), "an interrupted flush is not damage")
	left, err := filepath.Glob(filepath.Join(nsDir, "fileset-*"))
	require.NoError(t, err)
	require.Empty(t, left, "its files deleted, nothing moved aside")
	base := ms(t0)
	for i := range 10 {
		id := sid("flushcrash", "i", strconv.Itoa(i))
		require.Len(t, readAll(t, db, id, base, base+10_000), 3, "series %d from the commit log", i)
	}
	require.NoError(t, db.Tick())
	require.Equal(t, 0, countSeries(db), "flushed")
	for i := range 10 {
		require.Len(t, readAll(t, db, sid("flushcrash", "i", strconv.Itoa(i)), base, base+10_000), 3, "series %d from the new volume", i)
	}
}
