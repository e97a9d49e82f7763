package fileset

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tessera-tsdb/tessera/dbnode/vfs"
)

func TestRoundTrip(t *testing.T) {
	root := t.TempDir()
	series := genSeries(5000, 1, 2048)
	// Edge cases: empty payloads, a payload bigger than a page, a long ID.
	series = append(series,
		Series{ID: []byte("zz-empty-1"), Samples: 0},
		Series{ID: []byte("zz-empty-2"), Data: []byte{}, Samples: 0},
		Series{ID: []byte("zz-huge"), Data: bytes.Repeat([]byte("abcdefgh"), 40_000), Samples: 9000},
		Series{ID: append([]byte("zz-long-"), bytes.Repeat([]byte{0xff}, 5000)...), Data: []byte{1}, Samples: 1},
	)
	id := testID(1_700_000_000_000, 0)
	writeTest(t, vfs.OS(), root, id, series)

	ids, err := List(vfs.OS(), root, id.Namespace, id.Shard)
	require.NoError(t, err)
	require.Equal(t, []ID{id}, ids)

	r := openTest(t, vfs.OS(), root, id)
	require.Equal(t, id, r.ID())
	require.Equal(t, testBlockSize, r.BlockSize())
	require.Equal(t, len(series), r.Len())
	wantSamples, payload := 0, 0
	for _, s := range series {
		wantSamples += s.Samples
		payload += len(s.Data)
	}
	require.Equal(t, wantSamples, r.Samples())
	require.Greater(t, r.DiskSize(), int64(0))
	require.Less(t, r.DiskSize(), int64(payload), "compressible payload should shrink")

	for _, s := range series {
		got, ok, err := r.Read(s.ID)
		require.NoError(t, err)
		require.True(t, ok, "series %q", s.ID)
		require.Equal(t, len(s.Data), len(got))
		require.True(t, bytes.Equal(s.Data, got), "series %q", s.ID)
	}

	i := 0
	require.NoError(t, r.RangeIndex(func(sid []byte, checksum uint64, size, samples int) error {
		require.Equal(t, series[i].ID, sid)
		require.Equal(t, len(series[i].Data), size)
		require.Equal(t, series[i].Samples, samples)
		require.NotZero(t, checksum)
		i++
		return nil
	}))
	require.Equal(t, len(series), i)

	i = 0
	require.NoError(t, r.RangeData(func(sid, data []byte) error {
		require.Equal(t, series[i].ID, sid)
		require.True(t, bytes.Equal(series[i].Data, data))
		i++
		return nil
	}))
	require.Equal(t, len(series), i)
	require.NoError(t, r.Verify())

	stop := errors.New("stop")
	require.ErrorIs(t, r.RangeData(func(_, _ []byte) error { return stop }), stop)
	require.ErrorIs(t, r.RangeIndex(func([]byte, uint64, int, int) error { return stop }), stop)
}

func TestReadReturnsOwnedCopy(t *testing.T) {
	root := t.TempDir()
	series := genSeries(10, 2, 100)
	id := testID(0, 0)
	writeTest(t, vfs.OS(), root, id, series)
	r := openTest(t, vfs.OS(), root, id)
	got, ok, err := r.Read(series[3].ID)
	require.NoError(t, err)
	require.True(t, ok)
	for i := range got {
		got[i] = 0
	}
	again, _, err := r.Read(series[3].ID)
	require.NoError(t, err)
	require.Equal(t, series[3].Data, again)
}

func TestReadMissing(t *testing.T) {
	root := t.TempDir()
	series := genSeries(100, 3, 100)
	id := testID(0, 0)
	writeTest(t, vfs.OS(), root, id, series)
	r := openTest(t, vfs.OS(), root, id)
	for _, missing := range [][]byte{nil, []byte(""), []byte("\x00"), []byte("zzzz"), append(series[5].ID, 0)} {
		data, ok, err := r.Read(missing)
		require.NoError(t, err)
		require.False(t, ok)
		require.Nil(t, data)
	}
}

func TestWriteEmptyFileset(t *testing.T) {
	root := t.TempDir()
	id := testID(0, 0)
	writeTest(t, vfs.OS(), root, id, nil)
	r := openTest(t, vfs.OS(), root, id)
	require.Equal(t, 0, r.Len())
	require.Equal(t, 0, r.Samples())
	_, ok, err := r.Read([]byte("x"))
	require.NoError(t, err)
	require.False(t, ok)
	require.NoError(t, r.Verify())
}

func TestWriteRejectsBadInput(t *testing.T) {
	good := genSeries(3, 4, 10)
	cases := []struct {
		name      string
		id        ID
		blockSize int64
		series    []Series
	}{
		{"unsorted", testID(0, 0), testBlockSize, []Series{good[1], good[0]}},
		{"duplicate", testID(0, 0), testBlockSize, []Series{good[0], good[1], good[1]}},
		{"empty namespace", ID{Shard: 1}, testBlockSize, good},
		{"namespace with slash", ID{Namespace: "a/b"}, testBlockSize, good},
		{"namespace dotdot", ID{Namespace: ".."}, testBlockSize, good},
		{"negative volume", testID(0, -1), testBlockSize, good},
		{"zero block size", testID(0, 0), 0, good},
		{"negative samples", testID(0, 0), testBlockSize, []Series{{ID: []byte("a"), Samples: -1}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			err := Write(vfs.OS(), root, tc.id, tc.blockSize, tc.series)
			require.ErrorIs(t, err, ErrInvalidInput)
			var files []string
			require.NoError(t, filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
				if !d.IsDir() {
					files = append(files, p)
				}
				return err
			}))
			require.Empty(t, files)
		})
	}
}

func TestWriteRefusesToOverwriteCompleteFileset(t *testing.T) {
	root := t.TempDir()
	id := testID(0, 0)
	first := genSeries(50, 5, 100)
	writeTest(t, vfs.OS(), root, id, first)
	err := Write(vfs.OS(), root, id, testBlockSize, genSeries(10, 6, 100))
	require.ErrorIs(t, err, ErrExists)
	r := openTest(t, vfs.OS(), root, id)
	require.Equal(t, 50, r.Len())
	require.NoError(t, r.Verify())
}

func TestWriteReplacesIncompleteLeftovers(t *testing.T) {
	root := t.TempDir()
	id := testID(0, 0)
	writeTest(t, vfs.OS(), root, id, genSeries(50, 7, 100))
	// Simulate a crashed write: a torn checkpoint over old files.
	cp := filePath(root, id, kindCheckpoint)
	require.NoError(t, os.Truncate(cp, 5))
	series := genSeries(20, 8, 100)
	writeTest(t, vfs.OS(), root, id, series)
	r := openTest(t, vfs.OS(), root, id)
	require.Equal(t, 20, r.Len())
	require.NoError(t, r.Verify())
}

func TestClosedReader(t *testing.T) {
	root := t.TempDir()
	id := testID(0, 0)
	series := genSeries(5, 9, 10)
	writeTest(t, vfs.OS(), root, id, series)
	r, err := Open(vfs.OS(), root, id)
	require.NoError(t, err)
	require.NoError(t, r.Close())
	require.NoError(t, r.Close())
	_, _, err = r.Read(series[0].ID)
	require.ErrorIs(t, err, ErrClosed)
	require.ErrorIs(t, r.RangeData(func(_, _ []byte) error { return nil }), ErrClosed)
	require.ErrorIs(t, r.RangeIndex(func([]byte, uint64, int, int) error { return nil }), ErrClosed)
}

func TestFileNames(t *testing.T) {
	cases := []struct {
		name string
		bs   int64
		vol  int
		kind fileKind
		ok   bool
	}{
		{"fileset-1700000000000-0-data.db", 1700000000000, 0, kindData, true},
		{"fileset--7200000-12-checkpoint.db", -7200000, 12, kindCheckpoint, true},
		{"fileset-0-3-info.db", 0, 3, kindInfo, true},
		{"fileset-00-3-info.db", 0, 0, "", false},
		{"fileset-+5-3-info.db", 0, 0, "", false},
		{"fileset-5--3-info.db", 0, 0, "", false},
		{"fileset-5-3-other.db", 0, 0, "", false},
		{"fileset-5-3-info.db.tmp", 0, 0, "", false},
		{"fileset-5-info.db", 0, 0, "", false},
		{"commitlog-5-3.db", 0, 0, "", false},
	}
	for _, tc := range cases {
		bs, vol, kind, ok := parseFileName(tc.name)
		require.Equal(t, tc.ok, ok, tc.name)
		if ok {
			require.Equal(t, []any{tc.bs, tc.vol, tc.kind}, []any{bs, vol, kind}, tc.name)
			require.Equal(t, tc.name, fileName(ID{BlockStart: bs, Volume: vol}, kind))
		}
	}
}

func TestOpenMissingFileset(t *testing.T) {
	root := t.TempDir()
	_, err := Open(vfs.OS(), root, testID(0, 0))
	require.ErrorIs(t, err, fs.ErrNotExist)
	require.Contains(t, err.Error(), "default/7/0/v0")
	_, err = Open(vfs.OS(), root, ID{Namespace: "../x"})
	require.Error(t, err)
}
