package commitlog

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// crashChildEnv, when set, turns the test binary into the writer process
// of TestCrashAcknowledgedWritesSurvive; its value is the log directory.
const crashChildEnv = "TESSERA_COMMITLOG_CRASH_DIR"

const (
	crashWriters    = 4
	crashBatchLen   = 20
	crashMaxBatches = 200000 // the child stops by itself if never killed
)

func crashBatch(k int) []Entry {
	b := make([]Entry, crashBatchLen)
	for i := range b {
		b[i] = Entry{
			Namespace: "ns" + strconv.Itoa(k%2),
			ID:        fmt.Appendf(nil, "series-%d-%d", k%7, i),
			T:         int64(k)*100 + int64(i),
			V:         float64(k),
		}
	}
	return b
}

// crashChild writes batches in sync mode from several goroutines and
// prints the number of every acknowledged batch.
func crashChild(dir string) int {
	l, _, err := Open(testOptions(Options{Dir: dir, Mode: ModeSync, MaxFileSize: 64 << 10}), nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var next atomic.Int64
	var outMu sync.Mutex
	var wg sync.WaitGroup
	for range crashWriters {
		wg.Go(func() {
			for {
				k := int(next.Add(1))
				if k > crashMaxBatches {
					return
				}
				if err := l.Write(crashBatch(k)); err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(1)
				}
				outMu.Lock()
				fmt.Fprintln(os.Stdout, k) // unbuffered: the parent sees it once Write returned
				outMu.Unlock()
			}
		})
	}
	wg.Wait()
	return 0
}

func TestCrashAcknowledgedWritesSurvive(t *testing.T) {
	if testing.Short() {
		t.Skip("re-executes the test binary")
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashAcknowledgedWritesSurvive$")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+dir)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())

	acked := map[int]bool{}
	sc := bufio.NewScanner(stdout)
	killed := false
	for sc.Scan() {
		k, err := strconv.Atoi(sc.Text())
		require.NoError(t, err, "child output %q", sc.Text())
		acked[k] = true
		if len(acked) == 500 && !killed {
			require.NoError(t, cmd.Process.Kill()) // SIGKILL, mid-stream
			killed = true
		}
	}
	require.NoError(t, sc.Err())
	require.Error(t, cmd.Wait(), "the child must have been killed")
	require.True(t, killed)

	got := map[int]int{}
	l, stats, err := Open(testOptions(Options{Dir: dir}), func(e Entry) error {
		k := int(e.T / 100)
		want := crashBatch(k)[e.T%100]
		if e.Namespace != want.Namespace || string(e.ID) != string(want.ID) || e.V != want.V {
			return fmt.Errorf("batch %d: replayed %+v, want %+v", k, e, want)
		}
		got[k]++
		return nil
	})
	require.NoError(t, err)
	require.NoError(t, l.Close())
	t.Logf("acknowledged %d batches, replayed %d batches from %d files, %d corrupt tails (%d bytes)",
		len(acked), len(got), stats.Files, stats.CorruptTails, stats.TruncatedBytes)

	for k := range acked {
		require.Equal(t, crashBatchLen, got[k], "acknowledged batch %d not fully replayed", k)
	}
	for k, n := range got {
		require.Equal(t, crashBatchLen, n, "batch %d replayed partially", k)
	}
}
