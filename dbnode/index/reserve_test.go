package index

import (
	"fmt"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"
)

// slotsOf is the slots of all parts of name's value table in block start.
func slotsOf(ix *Index, start int64, name string) int {
	b := ix.blocks.Load().byStart[start]
	b.mu.RLock()
	defer b.mu.RUnlock()
	n := 0
	for i := range b.names[name].parts {
		n += b.names[name].parts[i].Slots()
	}
	return n
}

// ReserveValues sizes the value tables a block creates for the counts
// ValueCounts reported, in a block created later and in one that exists,
// each capped at max, taken once; ReserveValues(nil, 0) drops the hints
// no table took. The answers are the same either way.
func TestReserveValuesSizesNewTables(t *testing.T) {
	// Enough values that a part's share (n/16, give or take its square
	// root) stays inside the reservation's eighth of margin: ~5 sigma.
	const n = 20000
	fill := func(ix *Index, start int64) {
		for i := range n {
			ix.Insert(sid("__name__", "m", "pod", fmt.Sprint("pod-", i), "job", "j"), start)
		}
	}
	src := New(10)
	fill(src, 0)
	fill(src, 10)
	counts := src.ValueCounts()
	require.Equal(t, []BlockValues{
		{Start: 0, Names: []NameValues{{"__name__", 1}, {"job", 1}, {"pod", n}}},
		{Start: 10, Names: []NameValues{{"__name__", 1}, {"job", 1}, {"pod", n}}},
	}, counts)

	one := sid("__name__", "m", "pod", "p")
	grown := New(10)
	grown.Insert(one, 0)
	g0 := slotsOf(grown, 0, "pod")
	fill(grown, 0)
	require.Greater(t, slotsOf(grown, 0, "pod"), g0, "without a hint the table grows")

	ix := New(10)
	ix.Insert(sid("__name__", "m", "other", "x"), 10) // block 10 exists, without pod
	ix.ReserveValues(append(counts, BlockValues{Start: 20, Names: []NameValues{{"pod", n}}}), 3*n)
	ix.Insert(one, 0)
	ix.Insert(one, 10)
	r0, r10 := slotsOf(ix, 0, "pod"), slotsOf(ix, 10, "pod")
	require.GreaterOrEqual(t, r0, n)
	fill(ix, 0)
	fill(ix, 10)
	require.Equal(t, r0, slotsOf(ix, 0, "pod"), "sized once, never grown")
	require.Equal(t, r10, slotsOf(ix, 10, "pod"), "sized once, never grown (a block that existed)")
	require.Empty(t, ix.blocks.Load().byStart[0].hints["pod"], "taken once")
	ms := []*labels.Matcher{mt(t, "pod", "=~", "pod-1.*")}
	a, err := grown.Query(ms, 0, 5)
	require.NoError(t, err)
	require.Len(t, a, 11111)
	b, err := ix.Query(ms, 0, 5)
	require.NoError(t, err)
	require.Equal(t, a, b)

	// A hint is capped at max.
	capped := New(10)
	capped.ReserveValues(counts, 10)
	capped.Insert(one, 0)
	require.Less(t, 16*slotsOf(capped, 0, "pod"), r0)

	// Block 20 was never created: its hints are dropped with the rest.
	require.NotNil(t, ix.hints[20])
	ix.ReserveValues(nil, 0)
	require.Nil(t, ix.hints)
	require.Nil(t, ix.blocks.Load().byStart[10].hints)
}
