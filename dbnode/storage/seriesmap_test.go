package storage

import (
	"math"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// IDs that share a hash take neighbouring slots: each is found, and
// removing one leaves the others.
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
	require.False(t, m.remove(&Series{id: "x", hash: 7}), "another series of the same ID is not the map's")
	require.Equal(t, 1, m.len())
	require.Same(t, other, m.get(7, []byte("x")))
	n := 0
	m.each(func(*Series) { n++ })
	require.Equal(t, 1, n)
	m.clear(func(*Series) { n-- })
	require.Zero(t, n)
	require.Zero(t, m.len())
	require.Nil(t, m.get(7, []byte("x")))
	require.False(t, m.remove(other))
}

// Against a Go map as the reference: random inserts and removes, with
// hashes drawn from a small range so that probe runs collide, wrap around
// the table's end and are shifted back by removals; after every step each
// series is found, absent ones are not, and each visits exactly the set.
func TestSeriesMapMatchesReference(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 1))
		m := newSeriesMap()
		ref := map[string]*Series{}
		var all []*Series
		for i := range 400 {
			// 32 homes spread over any table (the high bits decide a
			// home) and a quarter at its very end: runs collide, wrap
			// around and hold series at their home and past it.
			h := rng.Uint32N(32)<<27 | rng.Uint32N(4)
			if rng.IntN(4) == 0 {
				h = math.MaxUint32 - rng.Uint32N(32)
			}
			all = append(all, &Series{id: "s" + strconv.Itoa(i), hash: h})
		}
		for step := range 3000 {
			s := all[rng.IntN(len(all))]
			if _, ok := ref[s.id]; ok && rng.IntN(2) == 0 {
				require.True(t, m.remove(s))
				delete(ref, s.id)
			} else if !ok {
				m.insert(s)
				ref[s.id] = s
			}
			require.Equal(t, len(ref), m.len())
			if step%50 != 0 {
				continue
			}
			for _, s := range all {
				got := m.get(s.hash, s.ID())
				if want, ok := ref[s.id]; ok {
					require.Same(t, want, got, "seed %d step %d: %s", seed, step, s.id)
				} else {
					require.Nil(t, got, "seed %d step %d: %s removed", seed, step, s.id)
				}
			}
			seen := map[string]bool{}
			m.each(func(s *Series) {
				require.False(t, seen[s.id], "visited twice")
				seen[s.id] = true
			})
			require.Len(t, seen, len(ref))
		}
	}
}

// BenchmarkSeriesMapGet is a lookup of a present series in a shard of a
// million-series node (244 series).
func BenchmarkSeriesMapGet(b *testing.B) {
	m := newSeriesMap()
	var ids [][]byte
	for i := range 244 {
		id := []byte("series-" + strconv.Itoa(i))
		ids = append(ids, id)
		m.insert(&Series{id: string(id), hash: hashID(id)})
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
}

// TestSeriesMapLoad: the table grows in 1.5 and 4/3 steps (slots.Grow),
// so past its first size it is always between half and 3/4 full; with
// doubling a million-series node's shards (about 244 series each) held
// 512 slots, 384 now.
func TestSeriesMapLoad(t *testing.T) {
	m := newSeriesMap()
	for i := range 5000 {
		id := []byte("series-" + strconv.Itoa(i))
		m.insert(&Series{id: string(id), hash: hashID(id)})
		if n := len(m.slots); n > minMapSlots {
			require.GreaterOrEqual(t, 2*m.len(), n, "%d series in %d slots", m.len(), n)
		}
		require.LessOrEqual(t, 4*m.len(), 3*len(m.slots))
		if m.len() == 244 {
			require.Len(t, m.slots, 384)
		}
	}
}
