package index

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

func TestSortIDsMatchesStringSort(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		prefix := rapid.StringMatching(`[a\x00]{0,12}`).Draw(rt, "prefix")
		ids := rapid.SliceOfN(rapid.StringMatching(`[ab\x00\xff]{0,20}`), 0, 300).Draw(rt, "suffixes")
		for i := range ids {
			ids[i] = prefix + ids[i]
		}
		want := slices.Clone(ids)
		slices.Sort(want)
		sortIDs(ids)
		require.Equal(rt, want, ids)
	})
}

// TestSortIDsParallelMatchesStringSort: the halves sorted on their own
// goroutines and merged from both ends are the one sort's answer, with
// duplicates (a stable merge) and at odd lengths.
func TestSortIDsParallelMatchesStringSort(t *testing.T) {
	defer func(n int) { parallelSortMin = n }(parallelSortMin)
	parallelSortMin = 4
	rapid.Check(t, func(rt *rapid.T) {
		prefix := rapid.StringMatching(`[a\x00]{0,12}`).Draw(rt, "prefix")
		ids := rapid.SliceOfN(rapid.StringMatching(`[ab\x00\xff]{0,20}`), 0, 300).Draw(rt, "suffixes")
		procs := rapid.IntRange(1, 5).Draw(rt, "procs")
		for i := range ids {
			ids[i] = prefix + ids[i]
		}
		want := slices.Clone(ids)
		slices.Sort(want)
		sortParallel(ids, nil, nil, nil, procs)
		require.Equal(rt, want, ids)
	})
}

func BenchmarkSortIDs(b *testing.B) {
	ix := filledIndex(b, benchIDs(100_000), 0)
	got, err := ix.Query([]*labels.Matcher{mt(b, "__name__", "=", "node_cpu_seconds_total"), mt(b, "mode", "=~", "user|system")}, 0, 1000)
	require.NoError(b, err)
	ids := asStrings(got)
	rng := rand.New(rand.NewPCG(1, 2))
	buf := make([]string, len(ids))
	for _, impl := range []struct {
		name string
		sort func([]string)
	}{{"mkqsort", sortIDs}, {"slices.Sort", slices.Sort[[]string]}} {
		b.Run(impl.name, func(b *testing.B) {
			cpu := startCPU()
			for b.Loop() {
				copy(buf, ids)
				rng.Shuffle(len(buf), func(i, j int) { buf[i], buf[j] = buf[j], buf[i] })
				impl.sort(buf)
			}
			cpu.report(b, b.N)
		})
	}
}
