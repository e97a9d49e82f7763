package commitlog

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// A caller's SeriesRef replaces the log's per-file table: each series is
// defined once per file, again in the next file after a rotation, and
// replay gives back exactly what was written.
func TestSeriesRefDefinesOncePerFile(t *testing.T) {
	for _, mode := range []Mode{ModeSync, ModeAsync} {
		t.Run(mode.String(), func(t *testing.T) {
			opts := testOptions(Options{Dir: t.TempDir(), Mode: mode})
			l, _, err := Open(opts, nil)
			require.NoError(t, err)

			const nSeries = 20
			refs := make([]SeriesRef, nSeries)
			ids := make([][]byte, nSeries)
			for i := range ids {
				ids[i] = fmt.Appendf(nil, "series-id-%03d", i)
			}
			batch := func(t0 int64) []Entry {
				b := make([]Entry, 0, 2*nSeries)
				for k := range 2 { // every series twice in one record
					for i := range ids {
						b = append(b, Entry{Namespace: "default", ID: ids[i], Ref: &refs[i], T: t0 + int64(k), V: float64(i)})
					}
				}
				return b
			}
			var written [][]Entry
			for r := range 3 {
				b := batch(int64(r * 10))
				written = append(written, b)
				require.NoError(t, l.Write(b))
			}
			require.NoError(t, l.Rotate())
			b := batch(100)
			written = append(written, b)
			require.NoError(t, l.Write(b))
			require.NoError(t, l.Close())

			requireDefinedOnceAndReplayed(t, l, opts, ids, written)
		})
	}
}

// Two logs never mistake each other's refs: a SeriesRef set by one is
// stale for the other, which defines the series itself.
func TestSeriesRefFromAnotherLogIsStale(t *testing.T) {
	ref := SeriesRef{}
	for range 2 {
		opts := testOptions(Options{Dir: t.TempDir(), Mode: ModeSync})
		l, _, err := Open(opts, nil)
		require.NoError(t, err)
		e := []Entry{{Namespace: "ns", ID: []byte("a"), Ref: &ref, T: 1, V: 2}}
		require.NoError(t, l.Write(e))
		require.NoError(t, l.Close())
		got, stats := reopen(t, opts)
		require.Zero(t, stats.CorruptTails)
		require.Equal(t, toRecs(e), got)
	}
}

// Generations are 32 bits in a SeriesRef: once they run out, an encoder
// gets generation 0 and keeps refs in its own table, so a file still
// defines each series once, a caller's refs are left alone (never a
// number that an earlier file used), and replay gives back what was
// written.
func TestSeriesRefGenerationsExhausted(t *testing.T) {
	old := generations.Load()
	t.Cleanup(func() { generations.Store(old) })

	generations.Store(math.MaxUint32 - 1)
	require.Equal(t, uint32(math.MaxUint32), nextGeneration())
	require.Zero(t, nextGeneration())
	require.Zero(t, nextGeneration(), "generation 0 stays: numbers are never reused")

	// An earlier file's ref whose number a wrapped counter would give again.
	stale := SeriesRef{gen: 1, ref: 0}
	opts := testOptions(Options{Dir: t.TempDir(), Mode: ModeSync})
	l, _, err := Open(opts, nil)
	require.NoError(t, err)
	refs := []SeriesRef{stale, {}}
	ids := [][]byte{[]byte("series-a"), []byte("series-b")}
	var written [][]Entry
	for r := range 3 {
		if r == 2 {
			require.NoError(t, l.Rotate())
		}
		b := []Entry{
			{Namespace: "ns", ID: ids[0], Ref: &refs[0], T: int64(r), V: 1},
			{Namespace: "ns", ID: ids[1], Ref: &refs[1], T: int64(r), V: 2},
		}
		written = append(written, b)
		require.NoError(t, l.Write(b))
	}
	require.NoError(t, l.Close())
	require.Equal(t, []SeriesRef{stale, {}}, refs, "refs are not written without a generation")

	requireDefinedOnceAndReplayed(t, l, opts, ids, written)
}

// requireDefinedOnceAndReplayed checks that each of the log's two files
// defines every ID exactly once and that replay gives back what was
// written, unharmed.
func requireDefinedOnceAndReplayed(t *testing.T, l *Log, opts Options, ids [][]byte, written [][]Entry) {
	t.Helper()
	files := l.Files()
	require.Len(t, files, 2)
	for _, f := range files {
		raw, err := os.ReadFile(f.Path)
		require.NoError(t, err)
		for _, id := range ids {
			require.Equal(t, 1, bytes.Count(raw, id), "%s defined once in %s", id, f.Path)
		}
	}
	got, stats := reopen(t, opts)
	require.Zero(t, stats.CorruptTails)
	require.Equal(t, toRecs(written...), got)
}
