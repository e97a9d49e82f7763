package commitlog

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Replay numbers what it hands over: File counts the files replayed from
// 0, and within one file Series is the same for every entry of one
// series (float and histogram alike) and different for different series,
// so a caller may key per-series state on it (storage's replayer does).
func TestReplayNumbersFilesAndSeries(t *testing.T) {
	dir := t.TempDir()
	opts := testOptions(Options{Dir: dir})
	l, _, err := Open(opts, nil)
	require.NoError(t, err)
	require.NoError(t, l.Write(makeBatch("a", "s", 40, 7, 1000)))
	require.NoError(t, l.Write(makeBatch("b", "s", 10, 3, 2000))) // same IDs, other namespace: other series
	writeWith(t, l, nil, makeHists("a", "s", 1, 1, 5000))         // s-0 of a: a float series too
	require.NoError(t, l.Rotate())
	require.NoError(t, l.Write(makeBatch("a", "s", 20, 5, 3000)))
	require.NoError(t, l.Close())

	type key struct {
		file uint32
		ns   string
		id   string
	}
	refOf := map[key]uint32{}
	seriesOf := map[[2]uint32]key{}
	files := map[uint32]int{}
	check := func(file, series uint32, ns string, id []byte) {
		k := key{file, ns, string(id)}
		if r, ok := refOf[k]; ok {
			require.Equal(t, r, series, "series %v", k)
		}
		refOf[k] = series
		if other, ok := seriesOf[[2]uint32{file, series}]; ok {
			require.Equal(t, other, k, "ref %d of file %d names two series", series, file)
		}
		seriesOf[[2]uint32{file, series}] = k
		files[file]++
	}
	opts.ReplayHistogram = func(e HistEntry) error { check(e.File, e.Series, e.Namespace, e.ID); return nil }
	l, _, err = Open(opts, func(e Entry) error { check(e.File, e.Series, e.Namespace, e.ID); return nil })
	require.NoError(t, err)
	require.NoError(t, l.Close())
	require.Equal(t, map[uint32]int{0: 51, 1: 20}, files)
	require.Len(t, refOf, 7+3+5)
}
