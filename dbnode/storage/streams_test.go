package storage

import (
	"context"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/dbnode/encoding"
)

// QueryOptions.Streams answers a series that is one in-memory stream
// inside the range with a copy of its bytes, and every other series (two
// streams to merge, samples outside the range) with an iterator as
// before; either way Floats reads the same samples as a query without
// the option, and a copy does not change when the series is written
// after the read.
func TestQueryStreams(t *testing.T) {
	clk := &clock{t: t0.Add(30 * time.Minute)}
	db := openDB(t, testOpts(t.TempDir(), clk))
	base := ms(t0)
	one, two := sid("st", "s", "one"), sid("st", "s", "two")
	write := func(id []byte, ts ...int64) {
		t.Helper()
		var b []Sample
		for _, ts := range ts {
			b = append(b, Sample{ID: id, Shard: db.Shard(id), T: base + ts, V: float64(ts)})
		}
		require.NoError(t, db.WriteBatch("default", b))
	}
	write(one, 1000, 2000, 3000)
	write(two, 5000, 6000)
	write(two, 4000) // out of order: a second stream in the bucket
	m := []*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, "__name__", "st")}
	read := func(start, end int64, streams bool) map[string]SeriesIterator {
		t.Helper()
		its, err := db.Query(context.Background(), "default", m, base+start, base+end, QueryOptions{Streams: streams})
		require.NoError(t, err)
		out := map[string]SeriesIterator{}
		for _, it := range its {
			out[string(it.ID)] = it
		}
		return out
	}

	got := read(0, 10_000, true)
	require.Len(t, got, 2)
	require.Nil(t, got[string(one)].Values, "one stream inside the range: its bytes")
	require.NotEmpty(t, got[string(one)].Stream)
	require.NotNil(t, got[string(two)].Values, "two streams: merged by an iterator")
	want := read(0, 10_000, false)
	for id, it := range want {
		require.NotNil(t, it.Values, "without the option every series has an iterator")
		require.Equal(t, drainAll(t, it.Values), drainAll(t, got[id].Floats()), id)
	}
	var sr encoding.StreamReader
	sr.Reset(got[string(one)].Stream)
	require.Equal(t, [][2]float64{{float64(base + 1000), 1000}, {float64(base + 2000), 2000}, {float64(base + 3000), 3000}}, drainAll(t, &sr))

	// A range that cuts the stream: filtered by an iterator.
	cut := read(1500, 10_000, true)
	require.NotNil(t, cut[string(one)].Values)
	require.Equal(t, [][2]float64{{float64(base + 2000), 2000}, {float64(base + 3000), 3000}}, drainAll(t, cut[string(one)].Floats()))

	// The copy is the read's: later samples do not show in it.
	write(one, 7000)
	require.Len(t, drainAll(t, got[string(one)].Floats()), 3)
	require.Len(t, drainAll(t, read(0, 10_000, true)[string(one)].Floats()), 4)
}

// A query read on several goroutines (readParallel) answers the series in
// the index's order, each part's answer closed up in place, whatever the
// parts left out (other shards).
func TestQueryPartsJoinInOrder(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	clk := &clock{t: t0.Add(30 * time.Minute)}
	db := openDB(t, testOpts(t.TempDir(), clk))
	base := ms(t0)
	const n = 5 * parallelReadMin
	var b []Sample
	for i := range n {
		id := sid("pj", "i", strconv.Itoa(i))
		b = append(b, Sample{ID: id, Shard: db.Shard(id), T: base + 1000, V: float64(i)})
	}
	require.NoError(t, db.WriteBatch("default", b))
	m := []*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, "__name__", "pj")}
	ns, err := db.namespace("default")
	require.NoError(t, err)
	ids, _, err := ns.index.QueryTagged(m, base, base+2000)
	require.NoError(t, err)
	require.Len(t, ids, n)
	for _, streams := range []bool{false, true} {
		even := func(sh uint32) bool { return sh%2 == 0 }
		its, err := db.Query(context.Background(), "default", m, base, base+2000, QueryOptions{Shards: even, Streams: streams})
		require.NoError(t, err)
		var want []string
		for _, id := range ids {
			if even(db.Shard(id)) {
				want = append(want, string(id))
			}
		}
		got := make([]string, len(its))
		for i, it := range its {
			got[i] = string(it.ID)
			require.Len(t, drainAll(t, it.Floats()), 1)
		}
		require.Equal(t, want, got)
		require.Equal(t, len(its), cap(its), "nothing past the answer is kept")
	}
}
