package ident

import (
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"
)

func TestIDIsOrderIndependentAndRoundTrips(t *testing.T) {
	a := FromLabels(labels.FromStrings("__name__", "up", "job", "node", "instance", "a:1"))
	unsorted := []Pair{{[]byte("job"), []byte("node")}, {[]byte("__name__"), []byte("up")}, {[]byte("instance"), []byte("a:1")}}
	b := AppendPairs(nil, unsorted)
	require.Equal(t, a, b)

	ls, err := Labels(a)
	require.NoError(t, err)
	require.Equal(t, "up", ls.Get("__name__"))
	require.Equal(t, 3, ls.Len())
	require.Equal(t, a, FromLabels(ls))
}

func TestDistinctLabelSetsDistinctIDs(t *testing.T) {
	// "a"="bc" must not collide with "ab"="c": the lengths are encoded.
	x := FromLabels(labels.FromStrings("a", "bc"))
	y := FromLabels(labels.FromStrings("ab", "c"))
	require.NotEqual(t, x, y)
}

func TestShardInRange(t *testing.T) {
	id := FromLabels(labels.FromStrings("__name__", "x"))
	require.Less(t, Shard(id, DefaultNumShards), uint32(DefaultNumShards))
	require.Equal(t, Shard(id, 4096), Shard(append([]byte(nil), id...), 4096))
}

func TestMalformedID(t *testing.T) {
	for _, bad := range [][]byte{{0x05, 'a'}, {0x01, 'a', 0x09}, {0xff}} {
		_, err := Labels(bad)
		require.ErrorIs(t, err, ErrMalformedID)
	}
}

// TestLabelsKeeping: only the accepted labels, and the whole ID checked
// as LabelsWith checks it (a bad field after the kept ones still fails).
func TestLabelsKeeping(t *testing.T) {
	id := FromLabels(labels.FromStrings("__name__", "up", "instance", "a:1", "job", "x"))
	b := labels.NewScratchBuilder(0)
	ls, err := LabelsKeeping(&b, id, func(name []byte) bool { return string(name) == "job" })
	require.NoError(t, err)
	require.Equal(t, labels.FromStrings("job", "x"), ls)
	_, err = LabelsKeeping(&b, append(id, 0x05, 'a'), func(name []byte) bool { return string(name) == "__name__" })
	require.ErrorIs(t, err, ErrMalformedID)
	all, err := LabelsKeeping(&b, id, nil)
	require.NoError(t, err)
	want, _ := Labels(id)
	require.Equal(t, want, all)
}

func FuzzLabels(f *testing.F) {
	f.Add(FromLabels(labels.FromStrings("__name__", "up", "job", "x")))
	f.Add([]byte{0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		ls, err := Labels(b)
		if err != nil {
			return
		}
		// The labels are the pairs Range sees, copied, also when the ID
		// is a slice of a larger buffer (Labels cuts by offsets in it).
		want := labels.NewScratchBuilder(0)
		require.NoError(t, Range(b, func(name, value []byte) { want.Add(string(name), string(value)) }))
		if !labels.Equal(ls, want.Labels()) {
			t.Fatalf("%q: got %v, want %v", b, ls, want.Labels())
		}
		buf := append(append([]byte("prefix"), b...), "suffix"...)
		ls2, err := Labels(buf[6 : 6+len(b)])
		if err != nil || !labels.Equal(ls, ls2) {
			t.Fatalf("in a larger buffer: %v, %v; want %v", ls2, err, ls)
		}
	})
}

// BenchmarkLabels decodes a node_exporter-like ID, as a query does for
// every series it selects.
//
//	go test -run '^$' -bench Labels -benchmem ./ident
func BenchmarkLabels(b *testing.B) {
	id := FromLabels(labels.FromStrings("__name__", "node_cpu_seconds_total", "cpu", "3",
		"instance", "10.0.1.17:9100", "job", "node", "mode", "iowait"))
	for b.Loop() {
		if _, err := Labels(id); err != nil {
			b.Fatal(err)
		}
	}
}

func TestSame(t *testing.T) {
	a := []byte("abc")
	require.True(t, Same(a, a))
	require.True(t, Same(a, []byte("abc")))
	require.True(t, Same(nil, []byte{}))
	require.False(t, Same(a, []byte("abd")))
	require.False(t, Same(a, a[:2]))
}
