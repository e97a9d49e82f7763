package commitlog

import (
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tessera-tsdb/tessera/internal/waitfor"

	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/dbnode/vfs"
)

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, within time.Duration, cond func() bool, msg string) time.Duration {
	t.Helper()
	return waitfor.Condition(t, within, time.Millisecond, msg, func() error {
		if !cond() {
			return errors.New("condition false")
		}
		return nil
	})
}

// activeEntries reads what is in the file being written.
func activeEntries(t *testing.T, l *Log) int {
	t.Helper()
	s, err := scanFile(vfs.OS(), l.activePath(), 0, nil)
	require.NoError(t, err)
	return s.entries
}

func TestAsyncFlushesWithinFlushEvery(t *testing.T) {
	const every = 50 * time.Millisecond
	scope := newTestScope()
	l, _, err := Open(testOptions(Options{Dir: t.TempDir(), Mode: ModeAsync, FlushEvery: every, Metrics: scope}), nil)
	require.NoError(t, err)
	defer func() { require.NoError(t, l.Close()) }()
	fsyncs := counter(scope, "fsyncs") // the new file's header

	require.NoError(t, l.Write(makeBatch("default", "s", 10, 10, 0)))
	took := eventually(t, every+2*time.Second, func() bool {
		return activeEntries(t, l) == 10 && counter(scope, "fsyncs") > fsyncs
	}, "async batch written and fsynced")
	t.Logf("async batch durable after %v (FlushEvery %v)", took, every)
}

func TestAsyncWritesLargeQueueBeforeTick(t *testing.T) {
	// asyncHi = MaxPending/4 = 16 KiB; one batch above it is written at
	// once even though the next tick is an hour away.
	l, _, err := Open(testOptions(Options{Dir: t.TempDir(), Mode: ModeAsync, FlushEvery: time.Hour, MaxPending: 64 << 10}), nil)
	require.NoError(t, err)
	defer func() { require.NoError(t, l.Close()) }()
	require.NoError(t, l.Write(makeBatch("default", "s", 500, 50, 0)))
	eventually(t, 5*time.Second, func() bool { return activeEntries(t, l) == 500 }, "large async queue written")
}

// blockingWrites makes writes to log files wait until release is closed,
// and closes entered when the first one starts waiting.
func blockingWrites(fs *vfs.Faulty) (entered, release chan struct{}) {
	entered, release = make(chan struct{}), make(chan struct{})
	var once sync.Once
	fs.Set(func(op vfs.Op, path string, _ int) (bool, int) {
		if op == vfs.OpWrite && strings.HasPrefix(filepath.Base(path), filePrefix) {
			once.Do(func() { close(entered) })
			<-release
		}
		return false, 0
	})
	return entered, release
}

func TestQueueFull(t *testing.T) {
	for _, mode := range []Mode{ModeSync, ModeAsync} {
		t.Run(mode.String(), func(t *testing.T) {
			fs := vfs.NewFaulty(vfs.OS())
			scope := newTestScope()
			const maxPending = 10_000
			opts := testOptions(Options{Dir: t.TempDir(), FS: fs, Mode: mode, MaxPending: maxPending, FlushEvery: time.Hour, Metrics: scope})
			l, _, err := Open(opts, nil)
			require.NoError(t, err)

			a := makeBatch("default", "a", 150, 150, 0) // ~6.6 KB pending, above MaxPending/4
			b := makeBatch("default", "b", 150, 150, 0)
			est, _ := batchBytes(a)
			require.Greater(t, 2*est, int64(maxPending))

			entered, release := blockingWrites(fs)
			aDone := make(chan error, 1)
			go func() { aDone <- l.Write(a) }()
			<-entered // the flusher is stuck writing a
			require.ErrorIs(t, l.Write(b), ErrQueueFull)
			require.Equal(t, int64(1), counter(scope, "queue_full"))

			close(release)
			require.NoError(t, <-aDone)
			eventually(t, 5*time.Second, func() bool { return l.Write(b) == nil }, "queue drains")

			// Alone, a batch larger than MaxPending is accepted.
			require.NoError(t, l.Rotate())
			require.NoError(t, l.Write(makeBatch("default", "huge", 1000, 10, 0)))
			require.NoError(t, l.Close())

			_, stats := reopen(t, testOptions(Options{Dir: opts.Dir}))
			require.Equal(t, 150+150+1000, stats.Entries)
		})
	}
}
