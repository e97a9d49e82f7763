package index

import (
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"
)

func TestDropBlocksBeforeFreesAndReusesRefs(t *testing.T) {
	ix := New(10)
	a, b, c, d := sid("s", "a"), sid("s", "b"), sid("s", "c"), sid("s", "d")
	for _, in := range []struct {
		id    []byte
		block int64
	}{{a, 0}, {a, 10}, {b, 0}, {c, 10}} {
		require.NoError(t, ix.Insert(in.id, in.block))
	}
	require.Equal(t, 3, ix.NumSeries())

	ix.DropBlocksBefore(10)
	require.Equal(t, 2, ix.NumSeries(), "b was only in the dropped block")

	// Late inserts into a dropped block are ignored, even of a new series.
	require.NoError(t, ix.Insert(b, 0))
	require.NoError(t, ix.Insert(sid("s", "late"), 9))
	require.Equal(t, 2, ix.NumSeries())
	got, err := ix.Query(nil, 0, 9)
	require.NoError(t, err)
	require.Empty(t, got)

	// A new series takes b's freed ref; queries must see d, never b.
	require.NoError(t, ix.Insert(d, 10))
	require.Equal(t, uint32(3), ix.series.next, "freed ref reused")
	got, err = ix.Query(nil, 0, 100)
	require.NoError(t, err)
	require.Equal(t, [][]byte{a, c, d}, got)
	got, err = ix.Query([]*labels.Matcher{mt(t, "s", "=", "b")}, 0, 100)
	require.NoError(t, err)
	require.Empty(t, got)

	ix.DropBlocksBefore(5) // behind the watermark: no-op
	require.Equal(t, 3, ix.NumSeries())

	ix.DropBlocksBefore(20)
	require.Zero(t, ix.NumSeries())
	for i := range ix.series.stripes {
		require.Zero(t, ix.series.stripes[i].n)
		for _, s := range ix.series.stripes[i].slots {
			require.Zero(t, s)
		}
	}
	names, err := ix.LabelNames(nil, -100, 100)
	require.NoError(t, err)
	require.Empty(t, names)
}
