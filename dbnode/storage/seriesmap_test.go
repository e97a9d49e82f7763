package storage

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// IDs that share a hash take neighbouring slots: each is found, and
// removing one leaves the others. A series is in the registry (its ref
// resolves) exactly while it is in the map. (The table itself is
// slots.Table, tested against a Go map there.)
func TestSeriesMapCollisions(t *testing.T) {
	m := newSeriesMap()
	const h = 42 // forced shared hash
	a := &Series{id: "a", seq: nextSeq()}
	b := &Series{id: "b", seq: nextSeq()}
	c := &Series{id: "c", seq: nextSeq()}
	other := &Series{id: "x", seq: nextSeq()}
	for _, s := range []*Series{a, b, c} {
		m.insert(h, s)
	}
	m.insert(hashID(other.ID()), other)
	require.Equal(t, 4, m.len())
	for _, s := range []*Series{a, b, c} {
		require.Same(t, s, m.get(h, s.ID()))
		require.Same(t, s, resolveRef(s.Ref()))
	}
	require.Nil(t, m.get(h, []byte("x")), "same ID under another hash is not found")
	require.Nil(t, m.get(h, []byte("d")))

	for _, gone := range []*Series{b, c, a} { // middle, head, last
		ref := gone.Ref()
		require.True(t, m.remove(h, gone))
		require.Nil(t, resolveRef(ref), "a removed series' ref resolves to nothing")
		require.Nil(t, SeriesID(ref))
		require.Nil(t, m.get(h, gone.ID()))
	}
	require.Equal(t, 1, m.len())
	require.Same(t, other, m.get(hashID(other.ID()), []byte("x")))
	require.Equal(t, "x", string(SeriesID(other.Ref())))
	n := 0
	m.each(func(*Series) { n++ })
	require.Equal(t, 1, n)
	ref := other.Ref()
	m.clear(func(*Series) { n-- })
	require.Zero(t, n)
	require.Zero(t, m.len())
	require.Nil(t, m.get(hashID(other.ID()), []byte("x")))
	require.Nil(t, resolveRef(ref), "cleared: the ref is stale")
}

// A ref whose slot was reused by a later series does not resolve to it.
func TestSeriesRefStaleSlotReused(t *testing.T) {
	m := newSeriesMap()
	a := &Series{id: "a", seq: nextSeq()}
	m.insert(hashID(a.ID()), a)
	old := a.Ref()
	require.True(t, m.remove(hashID(a.ID()), a))
	b := &Series{id: "b", seq: nextSeq()}
	m.insert(hashID(b.ID()), b)
	require.Equal(t, a.slot, b.slot, "the freed slot is reused")
	require.Nil(t, resolveRef(old))
	require.Same(t, b, resolveRef(b.Ref()))
	require.Nil(t, resolveRef(0))
	require.Nil(t, resolveRef(SeriesRef(uint64(b.slot)<<32)), "no ref has Seq 0")
	m.clear(func(*Series) {})
}

// BenchmarkSeriesMapGet is a lookup of a present series in a shard of a
// million-series node (244 series).
func BenchmarkSeriesMapGet(b *testing.B) {
	m := newSeriesMap()
	var ids [][]byte
	for i := range 244 {
		id := []byte("series-" + strconv.Itoa(i))
		ids = append(ids, id)
		m.insert(hashID(id), &Series{id: string(id), seq: nextSeq()})
	}
	hs := make([]uint32, len(ids))
	for i, id := range ids {
		hs[i] = hashID(id)
	}
	i := 0
	for b.Loop() {
		if m.get(hs[i], ids[i]) == nil {
			b.Fatal("missing")
		}
		i = (i + 1) % len(ids)
	}
	m.clear(func(*Series) {})
}

// TestSeriesMapLoad: the table grows in 1.5 and 4/3 steps (slots.Grow),
// so past its first size it is always between half and 3/4 full; with
// doubling a million-series node's shards (about 244 series each) held
// 512 slots, 384 now.
func TestSeriesMapLoad(t *testing.T) {
	m := newSeriesMap()
	for i := range 5000 {
		id := []byte("series-" + strconv.Itoa(i))
		m.insert(hashID(id), &Series{id: string(id), seq: nextSeq()})
		if n := m.t.Slots(); n > 8 {
			require.GreaterOrEqual(t, 2*m.len(), n, "%d series in %d slots", m.len(), n)
		}
		require.LessOrEqual(t, 4*m.len(), 3*m.t.Slots())
		if m.len() == 244 {
			require.Equal(t, 384, m.t.Slots())
		}
	}
	m.clear(func(*Series) {})
}
