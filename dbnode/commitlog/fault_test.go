package commitlog

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/dbnode/vfs"
)

// logFault fails op on commit log files (not the directory) with the given
// short-write length, once or until cleared.
func logFault(op vfs.Op, short int, once bool) vfs.Fault {
	var fired atomic.Bool
	return func(o vfs.Op, path string, _ int) (bool, int) {
		if o != op || !strings.HasPrefix(filepath.Base(path), filePrefix) {
			return false, 0
		}
		if once && fired.Swap(true) {
			return false, 0
		}
		return true, short
	}
}

func TestInjectedFaults(t *testing.T) {
	for _, tc := range []struct {
		name    string
		op      vfs.Op
		short   int
		wantMsg string
	}{
		{"write", vfs.OpWrite, 0, "commitlog: write"},
		{"short write", vfs.OpWrite, 11, "commitlog: write"},
		{"fsync", vfs.OpSync, 0, "commitlog: fsync"},
	} {
		for _, once := range []bool{true, false} {
			name := tc.name + "/persistent"
			if once {
				name = tc.name + "/once"
			}
			t.Run(name, func(t *testing.T) {
				dir := t.TempDir()
				fs := vfs.NewFaulty(vfs.OS())
				opts := testOptions(Options{Dir: dir, FS: fs})
				l, _, err := Open(opts, nil)
				require.NoError(t, err)
				b1 := makeBatch("default", "s", 20, 5, 0)
				require.NoError(t, l.Write(b1))

				fs.Set(logFault(tc.op, tc.short, once))
				// Several writers, so that the failing group usually
				// holds more than one batch; every one of them fails.
				var wg sync.WaitGroup
				errs := make([]error, 6)
				for i := range errs {
					wg.Go(func() { errs[i] = l.Write(makeBatch("default", "failed", 10, 10, 100)) })
				}
				wg.Wait()
				failed := 0
				for _, err := range errs {
					if err != nil {
						require.ErrorIs(t, err, vfs.ErrInjected)
						failed++
					}
				}
				require.NotZero(t, failed)
				// The first failing group names the failed operation; later
				// groups of a persistent fault fail to start a new file.
				require.True(t, slices.ContainsFunc(errs, func(err error) bool {
					return err != nil && strings.Contains(err.Error(), tc.wantMsg)
				}), "no error says %q: %v", tc.wantMsg, errs)
				if !once {
					require.Equal(t, len(errs), failed, "a persistent fault fails every write")
					require.ErrorIs(t, l.Write(b1), vfs.ErrInjected)
				}

				fs.Set(nil)
				b3 := makeBatch("default", "s", 20, 7, 1000)
				require.NoError(t, l.Write(b3))
				require.NoError(t, l.Close())

				var got []rec
				l, stats, err := Open(testOptions(Options{Dir: dir}), func(e Entry) error {
					if !strings.HasPrefix(string(e.ID), "failed") {
						got = append(got, toRec(e))
					}
					return nil
				})
				require.NoError(t, err)
				require.NoError(t, l.Close())
				require.Equal(t, toRecs(b1, b3), got, "durable data before and after the fault is replayed")
				require.Zero(t, stats.CorruptTails, "the failed record was truncated away")
				if !once {
					require.Equal(t, stats.Entries, len(got), "no entry of a failed write reached the log")
				}
			})
		}
	}
}

// noTruncateFS makes Truncate fail, to show that a half record left
// behind by a failed write does not hide the records written after it.
type noTruncateFS struct{ vfs.FS }

func (fs noTruncateFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	f, err := fs.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return noTruncateFile{f}, nil
}

type noTruncateFile struct{ vfs.File }

func (noTruncateFile) Truncate(int64) error { return errors.New("truncate refused") }

func TestShortWriteWithoutTruncateDoesNotHideLaterRecords(t *testing.T) {
	dir := t.TempDir()
	faulty := vfs.NewFaulty(vfs.OS())
	l, _, err := Open(testOptions(Options{Dir: dir, FS: noTruncateFS{faulty}}), nil)
	require.NoError(t, err)
	b1 := makeBatch("default", "s", 20, 5, 0)
	require.NoError(t, l.Write(b1))
	faulty.Set(logFault(vfs.OpWrite, 30, true))
	require.ErrorIs(t, l.Write(makeBatch("default", "s", 20, 5, 100)), vfs.ErrInjected)
	b3 := makeBatch("default", "s", 20, 5, 200)
	require.NoError(t, l.Write(b3))
	require.NoError(t, l.Close())

	got, stats := reopen(t, testOptions(Options{Dir: dir}))
	require.Equal(t, toRecs(b1, b3), got)
	require.Equal(t, 1, stats.CorruptTails)
	require.Equal(t, int64(30), stats.TruncatedBytes)
}

func TestCreateFailureOnRotate(t *testing.T) {
	dir := t.TempDir()
	fs := vfs.NewFaulty(vfs.OS())
	l, _, err := Open(testOptions(Options{Dir: dir, FS: fs}), nil)
	require.NoError(t, err)
	b1 := makeBatch("default", "s", 5, 5, 0)
	require.NoError(t, l.Write(b1))

	fs.Set(func(op vfs.Op, _ string, _ int) (bool, int) { return op == vfs.OpCreate, 0 })
	require.ErrorIs(t, l.Rotate(), vfs.ErrInjected)
	require.Len(t, l.Files(), 1, "the old file was closed before the new one failed")
	require.ErrorIs(t, l.Write(b1), vfs.ErrInjected, "no file to write to")

	fs.Set(nil)
	b2 := makeBatch("default", "s", 5, 5, 10)
	require.NoError(t, l.Write(b2))
	require.NoError(t, l.Close())
	got, stats := reopen(t, testOptions(Options{Dir: dir}))
	require.Equal(t, toRecs(b1, b2), got)
	require.Zero(t, stats.CorruptTails)
}

func TestAsyncWriteFailureIsCounted(t *testing.T) {
	dir := t.TempDir()
	fs := vfs.NewFaulty(vfs.OS())
	scope := newTestScope()
	l, _, err := Open(testOptions(Options{Dir: dir, FS: fs, Mode: ModeAsync, Metrics: scope}), nil)
	require.NoError(t, err)
	fs.Set(logFault(vfs.OpWrite, 0, true))
	require.NoError(t, l.Write(makeBatch("default", "lost", 5, 5, 0)), "async writes only queue")
	require.ErrorIs(t, l.Rotate(), vfs.ErrInjected, "the flush Rotate forces hits the fault")
	b2 := makeBatch("default", "s", 5, 5, 10)
	require.NoError(t, l.Write(b2))
	require.NoError(t, l.Close())
	require.Equal(t, int64(1), counter(scope, "write_errors"))

	got, _ := reopen(t, testOptions(Options{Dir: dir}))
	require.Equal(t, toRecs(b2), got)
}
