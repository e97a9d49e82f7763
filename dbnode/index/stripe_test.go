package index

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/tessera-tsdb/tessera/internal/slots"
)

// contains probes for ref the way seriesTable.find does, minus the ID check.
func (st *stripe) contains(tag, ref uint32) bool {
	if len(st.slots) == 0 {
		return false
	}
	n := len(st.slots)
	for i := slots.Home(tag, n); st.slots[i] != 0; i = slots.Next(i, n) {
		if st.slots[i] == slot(tag, ref) {
			return true
		}
	}
	return false
}

func TestStripeMatchesMap(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		var st stripe
		model := map[uint32]uint32{} // ref -> tag
		for range rapid.IntRange(0, 300).Draw(rt, "ops") {
			if len(model) > 0 && rapid.IntRange(0, 2).Draw(rt, "remove") == 0 {
				var refs []uint32
				for r := range model {
					refs = append(refs, r)
				}
				ref := rapid.SampledFrom(refs).Draw(rt, "ref")
				st.remove(model[ref], ref)
				delete(model, ref)
			} else {
				ref := uint32(len(model)) + rapid.Uint32Range(0, 1000).Draw(rt, "newRef")*1000
				if _, ok := model[ref]; ok {
					continue
				}
				// Few distinct tags: long collision runs, at the start
				// of the table and at its end (wrapping around).
				tag := rapid.Uint32Range(0, 40).Draw(rt, "tag") * 0x0600_0001
				if rapid.Bool().Draw(rt, "atEnd") {
					tag = ^tag
				}
				st.insert(tag, ref)
				model[ref] = tag
			}
			require.Equal(rt, len(model), st.n)
			for ref, tag := range model {
				require.True(rt, st.contains(tag, ref), "ref %d tag %x lost", ref, tag)
			}
		}
	})
}

func TestStripeIsOneCacheLine(t *testing.T) {
	require.Equal(t, uintptr(64), unsafe.Sizeof(stripe{}))
}
