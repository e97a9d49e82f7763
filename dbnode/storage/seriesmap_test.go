package storage

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// IDs that share a hash are chained: each is found, and removing one
// leaves the others.
func TestSeriesMapCollisions(t *testing.T) {
	m := newSeriesMap()
	const h = 42 // forced shared hash
	a := &Series{id: "a", hash: h}
	b := &Series{id: "b", hash: h}
	c := &Series{id: "c", hash: h}
	other := &Series{id: "x", hash: 7}
	for _, s := range []*Series{a, b, c, other} {
		m.insert(s)
	}
	require.Equal(t, 4, m.len())
	for _, s := range []*Series{a, b, c} {
		require.Same(t, s, m.get(h, s.ID()))
	}
	require.Nil(t, m.get(h, []byte("x")), "same ID under another hash is not found")
	require.Nil(t, m.get(h, []byte("d")))

	for _, gone := range []*Series{b, c, a} { // middle, head, last
		require.True(t, m.remove(gone))
		require.False(t, m.remove(gone), "removed twice")
		require.Nil(t, m.get(h, gone.ID()))
	}
	require.Equal(t, 1, m.len())
	require.Same(t, other, m.get(7, []byte("x")))
	n := 0
	m.each(func(*Series) { n++ })
	require.Equal(t, 1, n)
	m.clear(func(*Series) { n-- })
	require.Zero(t, n)
	require.Zero(t, m.len())
}
