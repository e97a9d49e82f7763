package slots

import (
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// hashOf is a deliberately poor hash of a test key: keys share hashes and
// homes in long runs, so that deletion's backward shift and wrapped runs
// are exercised on every step.
func hashOf(k uint32) uint32 { return (k % 97) * 0x9E3779B1 }

// TestTableMatchesGoMap runs random inserts, deletes, replacements and
// sweeps on a Table and a Go map side by side, and compares the two after
// every operation: the same entries, every key found, every absent key
// not.
func TestTableMatchesGoMap(t *testing.T) {
	for seed := uint64(1); seed <= 8; seed++ {
		rng := rand.New(rand.NewPCG(seed, seed))
		var tb Table[uint32] // value: key+1 (0 is empty)
		if seed%2 == 0 {
			tb.SetMaxLoad(15) // long runs
		}
		ref := map[uint32]bool{}
		keySpace := uint32(50 + rng.IntN(400))
		find := func(k uint32) (int, bool) {
			return tb.Find(hashOf(k), func(v uint32) bool { return v == k+1 })
		}
		for step := 0; step < 3000; step++ {
			k := rng.Uint32N(keySpace)
			switch op := rng.IntN(20); {
			case op < 10: // insert if absent
				if !ref[k] {
					tb.Insert(hashOf(k), k+1)
					ref[k] = true
				}
			case op < 17: // delete if present
				i, ok := find(k)
				require.Equal(t, ref[k], ok, "seed %d step %d: find %d", seed, step, k)
				if ok {
					tb.Delete(i)
					delete(ref, k)
				}
			case op < 19: // replace in place with itself (Set keeps the position)
				if i, ok := find(k); ok {
					tb.Set(i, tb.At(i))
				}
			default: // sweep a residue class
				m := uint32(2 + rng.IntN(5))
				want := 0
				for rk := range ref {
					if rk%m == 0 {
						delete(ref, rk)
						want++
					}
				}
				got := tb.DeleteFunc(func(h, v uint32) bool {
					require.Equal(t, hashOf(v-1), h, "an entry keeps its hash")
					return (v-1)%m == 0
				})
				require.Equal(t, want, got, "seed %d step %d: swept", seed, step)
			}
			require.Equal(t, len(ref), tb.Len(), "seed %d step %d: len", seed, step)
			seen := map[uint32]bool{}
			for h, v := range tb.All() {
				require.Equal(t, hashOf(v-1), h)
				require.False(t, seen[v-1], "seed %d step %d: %d twice", seed, step, v-1)
				seen[v-1] = true
			}
			require.Equal(t, ref, seen, "seed %d step %d: entries", seed, step)
			for probe := uint32(0); probe < keySpace; probe += 1 + uint32(rng.IntN(7)) {
				_, ok := find(probe)
				require.Equal(t, ref[probe], ok, "seed %d step %d: find %d", seed, step, probe)
			}
			if n := tb.Slots(); n > 0 {
				require.LessOrEqual(t, tb.Len()*16, n*tb.maxLoad(), "load bound")
			}
		}
	}
}

func TestTableProbeFirstHashMatch(t *testing.T) {
	var tb Table[uint32]
	_, ok := tb.Probe(7)
	require.False(t, ok, "empty table")
	tb.Insert(7, 100)
	tb.Insert(7, 200)
	v, ok := tb.Probe(7)
	require.True(t, ok)
	require.Equal(t, uint32(100), v, "the first of the run")
	_, ok = tb.Probe(8)
	require.False(t, ok)
	tb.Reset()
	require.Equal(t, 0, tb.Len())
	require.Equal(t, 0, tb.Slots())
}

func TestTableSizes(t *testing.T) {
	require.Equal(t, uintptr(32), unsafe.Sizeof(Table[uint32]{}), "a table and a 24-byte lock fit 64 bytes")
	require.Equal(t, uintptr(8), unsafe.Sizeof(Entry[uint32]{}), "8-byte slots for ref tables")
}

// TestTableReserve: after Reserve(n), n entries go in without the table
// growing, and every entry inserted before and after is still found.
func TestTableReserve(t *testing.T) {
	var tb Table[uint32]
	for k := uint32(1); k <= 10; k++ {
		tb.Insert(hashOf(k), k)
	}
	tb.Reserve(1000)
	slots := tb.Slots()
	require.GreaterOrEqual(t, slots*12, 1000*16)
	for k := uint32(11); k <= 1000; k++ {
		tb.Insert(hashOf(k), k)
	}
	require.Equal(t, slots, tb.Slots(), "no growth past the reservation")
	for k := uint32(1); k <= 1000; k++ {
		_, ok := tb.Find(hashOf(k), func(v uint32) bool { return v == k })
		require.True(t, ok, "key %d", k)
	}
	tb.Reserve(10) // smaller than held: no change
	require.Equal(t, slots, tb.Slots())
}
