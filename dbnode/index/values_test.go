package index

import (
	"slices"
	"strconv"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// valuesOf returns the sorted refs of every value of label name in the
// block starting at 0, read through get, each and intersects, checking
// that the three agree.
func valuesOf(t require.TestingT, ix *Index, name string) map[string][]uint32 {
	b := ix.block(0)
	b.mu.RLock()
	defer b.mu.RUnlock()
	vs := b.names[name]
	out := map[string][]uint32{}
	if vs == nil {
		return out
	}
	vs.each(ix.series, func(v string, p postings) {
		_, dup := out[v]
		require.False(t, dup, "value %q listed twice", v)
		out[v] = refsOf(p)
		got, ok := vs.get(v, ix.series)
		require.True(t, ok, "get %q", v)
		require.Equal(t, out[v], refsOf(got), "get %q", v)
	})
	require.Equal(t, len(out), vs.len())
	all := roaring.New()
	for _, refs := range out {
		all.AddMany(refs)
	}
	require.True(t, all.IsEmpty() || vs.intersects(all))
	all.Flip(0, uint64(all.Maximum())+2) // every ref but the block's
	require.False(t, vs.intersects(all))
	return out
}

func refsOf(p postings) []uint32 {
	if p.bm == nil {
		return []uint32{p.one}
	}
	return p.bm.ToArray()
}

// TestValuesMatchModel checks a block's value tables against a plain map
// for random mixes of unique and shared values, past several growths of
// their parts.
func TestValuesMatchModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		ix := New(10)
		model := map[string][]uint32{}
		distinct := rapid.IntRange(1, 3000).Draw(rt, "distinct")
		n := rapid.IntRange(0, 3000).Draw(rt, "series")
		for i := range n {
			v := strconv.Itoa(rapid.IntRange(0, distinct-1).Draw(rt, "value"))
			id := sid("n", strconv.Itoa(i), "v", v)
			require.NoError(rt, ix.Insert(id, 0))
			ref, ok := ix.series.find(ix.series.stripeOf(ix.series.hash(id)), ix.series.hash(id), id)
			require.True(rt, ok)
			if !slices.Contains(model[v], ref) {
				model[v] = append(model[v], ref)
			}
			if rapid.Bool().Draw(rt, "again") { // idempotent re-insert
				require.NoError(rt, ix.Insert(id, 0))
			}
		}
		for v := range model {
			slices.Sort(model[v])
		}
		if n == 0 {
			return
		}
		require.Equal(rt, model, valuesOf(rt, ix, "v"))
		b := ix.block(0)
		b.mu.RLock()
		_, ok := b.names["v"].get("absent", ix.series)
		b.mu.RUnlock()
		require.False(rt, ok)
	})
}

// TestValuesTagCollision makes two different values share a part and a
// tag (found by brute force for this index's hash seed), so lookups must
// tell them apart by the value read back from the series' IDs, both while
// each belongs to one series and once they hold bitmaps.
func TestValuesTagCollision(t *testing.T) {
	ix := New(10)
	type key struct {
		part int
		tag  uint32
	}
	seen := map[key]string{}
	var a, b string
	for i := 0; a == ""; i++ {
		require.Less(t, i, 1<<23, "no collision found")
		v := strconv.Itoa(i)
		part, tag := valueHash(ix.series.seed, v)
		if w, ok := seen[key{part, tag}]; ok {
			a, b = w, v
		}
		seen[key{part, tag}] = v
	}
	require.NotEqual(t, a, b)

	ins := func(n int, v string) {
		require.NoError(t, ix.Insert(sid("n", strconv.Itoa(n), "v", v), 0))
	}
	ins(0, a)
	ins(1, b)
	got := valuesOf(t, ix, "v")
	require.Len(t, got, 2)
	require.Len(t, got[a], 1)
	require.Len(t, got[b], 1)
	require.NotEqual(t, got[a], got[b])

	ins(2, b) // b becomes a bitmap, a stays single
	got = valuesOf(t, ix, "v")
	require.Len(t, got[a], 1)
	require.Len(t, got[b], 2)

	ins(3, a)
	got = valuesOf(t, ix, "v")
	require.Len(t, got[a], 2)
	require.Len(t, got[b], 2)

	res, err := ix.Query(matchers(t, "v", "=", a), 0, 5)
	require.NoError(t, err)
	require.Equal(t, []string{string(sid("n", "0", "v", a)), string(sid("n", "3", "v", a))}, asStrings(res))
}

func matchers(t *testing.T, name, op, value string) []*labels.Matcher {
	return []*labels.Matcher{mt(t, name, op, value)}
}
