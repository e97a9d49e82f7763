package fileset

import (
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tessera-tsdb/tessera/dbnode/vfs"
)

// TestWriteFaults injects one fault per case into a Write of volume 1 of a
// block whose volume 0 is already on disk, and checks that Write fails with
// a wrapped error, that volume 1 is not listed, that volume 0 is intact,
// and that a retry after the fault clears succeeds.
func TestWriteFaults(t *testing.T) {
	type fault struct {
		name string
		op   vfs.Op
		file string // base-name suffix the fault applies to; "/" for directories
		nth  int    // fail the nth matching operation (1-based)
		// short > 0 makes a write fault a short write of that many bytes.
		short int
		// wantInErr is a string the error message must contain.
		wantInErr string
	}
	var cases []fault
	for _, k := range kinds {
		f := "-" + string(k) + ".db"
		cases = append(cases,
			fault{name: "create " + string(k), op: vfs.OpCreate, file: f, nth: 1, wantInErr: "create " + string(k)},
			fault{name: "write " + string(k), op: vfs.OpWrite, file: f, nth: 1, wantInErr: "write " + string(k)},
			fault{name: "short write " + string(k), op: vfs.OpWrite, file: f, nth: 1, short: 3, wantInErr: "write " + string(k)},
			fault{name: "sync " + string(k), op: vfs.OpSync, file: f, nth: 1, wantInErr: "sync"},
		)
	}
	cases = append(cases,
		fault{name: "short write mid data", op: vfs.OpWrite, file: "-data.db", nth: 3, short: 1000, wantInErr: "write data"},
		fault{name: "dir sync before checkpoint", op: vfs.OpSync, file: "/", nth: 1, wantInErr: "sync directory"},
		fault{name: "dir sync after checkpoint", op: vfs.OpSync, file: "/", nth: 2, wantInErr: "after checkpoint"},
	)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			prev, next := testID(0, 0), testID(0, 1)
			prevSeries := genSeries(200, 1, 1000)
			writeTest(t, vfs.OS(), root, prev, prevSeries)

			faulty := vfs.NewFaulty(vfs.OS())
			var seen atomic.Int32
			faulty.Set(func(op vfs.Op, path string, _ int) (bool, int) {
				match := op == tc.op && strings.HasSuffix(filepath.Base(path), tc.file)
				if tc.file == "/" {
					match = op == tc.op && !strings.HasSuffix(path, ".db")
				}
				if !match || int(seen.Add(1)) != tc.nth {
					return false, 0
				}
				return true, tc.short
			})
			series := genSeries(1200, 2, 1000) // ~600 KB: three buffered writes
			err := Write(faulty, root, next, testBlockSize, series)
			require.Error(t, err)
			require.ErrorIs(t, err, vfs.ErrInjected)
			require.Contains(t, err.Error(), next.String())
			require.Contains(t, err.Error(), tc.wantInErr)

			ids, err := List(vfs.OS(), root, "default", 7)
			require.NoError(t, err)
			require.Equal(t, []ID{prev}, ids)
			_, err = os.Stat(filePath(root, next, kindCheckpoint))
			require.ErrorIs(t, err, os.ErrNotExist)
			r := openTest(t, vfs.OS(), root, prev)
			require.Equal(t, len(prevSeries), r.Len())
			require.NoError(t, r.Verify())

			faulty.Set(nil)
			require.NoError(t, Write(faulty, root, next, testBlockSize, series))
			r2 := openTest(t, vfs.OS(), root, next)
			require.NoError(t, r2.Verify())
			require.Equal(t, len(series), r2.Len())
		})
	}
}

// TestWriteFaultsInNewDirectory fails the fsync of the parent directories a
// first Write of a shard creates.
func TestWriteFaultsInNewDirectory(t *testing.T) {
	root := t.TempDir()
	faulty := vfs.NewFaulty(vfs.OS())
	faulty.Set(func(op vfs.Op, path string, _ int) (bool, int) {
		return op == vfs.OpSync && path == root, 0
	})
	id := testID(0, 0)
	err := Write(faulty, root, id, testBlockSize, genSeries(10, 1, 10))
	require.ErrorIs(t, err, vfs.ErrInjected)
	require.Contains(t, err.Error(), "sync directory")
	ids, err := List(vfs.OS(), root, "default", 7)
	require.NoError(t, err)
	require.Empty(t, ids)
}

// TestWriteNeverRenames documents that Write relies on the checkpoint, not
// renames, for atomicity: a rename fault cannot affect it.
func TestWriteNeverRenames(t *testing.T) {
	root := t.TempDir()
	faulty := vfs.NewFaulty(vfs.OS())
	faulty.Set(func(op vfs.Op, _ string, _ int) (bool, int) { return op == vfs.OpRename, 0 })
	require.NoError(t, Write(faulty, root, testID(0, 0), testBlockSize, genSeries(10, 1, 10)))
}
