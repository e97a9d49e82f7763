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
		require.Zero(t, ix.series.stripes[i].t.Len())
	}
	names, err := ix.LabelNames(nil, -100, 100)
	require.NoError(t, err)
	require.Empty(t, names)
}

// TestAddToCutBlockIsNoop: an insert that found its block just before
// retention cut it must not add to it, since the block's value tables read
// the IDs of its other series, which are being freed.
func TestAddToCutBlockIsNoop(t *testing.T) {
	ix := New(10)
	a := sid("v", "x", "n", "1")
	require.NoError(t, ix.Insert(a, 0))
	stale := ix.block(0) // what a racing insert loaded before the cut
	ix.DropBlocksBefore(10)
	require.Equal(t, 0, ix.NumSeries())

	var ref uint32
	var id string
	for _, n := range []string{"2", "3"} { // the second does not reuse a's ref
		b := sid("v", "y", "n", n)
		h := ix.series.hash(b)
		st := ix.series.stripeOf(h)
		st.mu.Lock()
		var err error
		ref, id, err = ix.series.create(st, h, b, "")
		st.mu.Unlock()
		require.NoError(t, err)
	}
	stale.add(ref, id, ix.series)

	stale.mu.RLock()
	defer stale.mu.RUnlock()
	require.False(t, stale.all.Contains(ref))
	require.Equal(t, 1, stale.names["v"].len())
}
