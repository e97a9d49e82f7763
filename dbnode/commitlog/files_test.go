package commitlog

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestFilesRangesRemove(t *testing.T) {
	dir := t.TempDir()
	opts := testOptions(Options{Dir: dir})
	l, _, err := Open(opts, nil)
	require.NoError(t, err)
	require.Empty(t, l.Files(), "the active file is not listed")

	b := []Entry{
		{Namespace: "a", ID: []byte("x"), T: 15, V: 1},
		{Namespace: "b", ID: []byte("x"), T: 5, V: 1},
		{Namespace: "a", ID: []byte("y"), T: 10, V: 1},
		{Namespace: "b", ID: []byte("x"), T: -5, V: 1},
		{Namespace: "a", ID: []byte("x"), T: 19, V: 1},
	}
	require.NoError(t, l.Write(b))
	require.NoError(t, l.Write([]Entry{{Namespace: "a", ID: []byte("z"), T: 12}}))
	require.NoError(t, l.Rotate())
	require.NoError(t, l.Write([]Entry{{Namespace: "c", ID: []byte("x"), T: 100}}))
	require.NoError(t, l.Rotate())

	want := []FileMeta{
		{Path: filepath.Join(dir, fileName(1)), Seq: 1, Ranges: map[string]TimeRange{"a": {10, 19}, "b": {-5, 5}}},
		{Path: filepath.Join(dir, fileName(2)), Seq: 2, Ranges: map[string]TimeRange{"c": {100, 100}}},
	}
	require.Equal(t, want, l.Files())

	active := l.activePath()
	require.Equal(t, filepath.Join(dir, fileName(3)), active)
	require.ErrorContains(t, l.Remove(active), "still being written")
	require.ErrorContains(t, l.Remove(filepath.Join(dir, "nope")), "not a closed file")

	require.NoError(t, l.Remove(want[0].Path))
	require.NoFileExists(t, want[0].Path)
	require.Equal(t, want[1:], l.Files())
	require.NoError(t, l.Close())

	// Ranges of pre-existing files come from replay.
	l, _, err = Open(opts, nil)
	require.NoError(t, err)
	files := l.Files()
	require.Len(t, files, 2)
	require.Equal(t, want[1], files[0])
	require.Equal(t, FileMeta{Path: active, Seq: 3, Ranges: map[string]TimeRange{}}, files[1])
	require.Equal(t, filepath.Join(dir, fileName(4)), l.activePath())
	require.NoError(t, l.Close())
}

func TestMetrics(t *testing.T) {
	dir := t.TempDir()
	scope := newTestScope()
	l, _, err := Open(testOptions(Options{Dir: dir, Metrics: scope}), nil)
	require.NoError(t, err)
	require.NoError(t, l.Write(makeBatch("default", "s", 10, 10, 0)))
	require.NoError(t, l.Write(makeBatch("default", "s", 10, 10, 0)))
	require.NoError(t, l.Rotate())
	require.NoError(t, l.Close())

	var onDisk int64
	for _, p := range logFiles(t, dir) {
		info, err := os.Stat(p)
		require.NoError(t, err)
		onDisk += info.Size()
	}
	require.Equal(t, onDisk, counter(scope, "bytes_written"))
	require.Equal(t, int64(2), counter(scope, "records"))
	require.Equal(t, int64(20), counter(scope, "entries"))
	require.Equal(t, int64(1), counter(scope, "rotations"))
	require.Equal(t, int64(2+2), counter(scope, "fsyncs"), "two records, two file headers")

	path := logFiles(t, dir)[0]
	info, err := os.Stat(path)
	require.NoError(t, err)
	require.NoError(t, os.Truncate(path, info.Size()-3))
	scope = newTestScope()
	l, _, err = Open(testOptions(Options{Dir: dir, Metrics: scope}), nil)
	require.NoError(t, err)
	require.NoError(t, l.Close())
	require.Equal(t, int64(1), counter(scope, "corrupt_tails"))
	require.Greater(t, counter(scope, "truncated_bytes"), int64(0))
}
