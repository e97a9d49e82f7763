package storage

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"
)

// Query finds a series by the registry slot the index keeps beside its ID
// (readIDs), and never by a slot that now holds another series: one of
// another ID, or of the same ID in another database (the registry is the
// process's). The IDs are then read as without a tag.
func TestQueryReadsByIndexTag(t *testing.T) {
	clk := &clock{t: t0.Add(30 * time.Minute)}
	db := openDB(t, testOpts(t.TempDir(), clk))
	base := ms(t0)
	const n = 50
	ids := make([][]byte, n)
	want := map[string][][2]float64{}
	var b []Sample
	for i := range ids {
		ids[i] = sid("rr", "i", strconv.Itoa(i))
		b = append(b, Sample{ID: ids[i], Shard: db.Shard(ids[i]), T: base + 1000, V: float64(i)})
		want[string(ids[i])] = [][2]float64{{float64(base + 1000), float64(i)}}
	}
	require.NoError(t, db.WriteBatch("default", b))
	ns, err := db.namespace("default")
	require.NoError(t, err)
	m := []*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, "__name__", "rr")}
	query := func(end int64) map[string][][2]float64 {
		t.Helper()
		its, err := db.Query(context.Background(), "default", m, base, end, QueryOptions{})
		require.NoError(t, err)
		got := map[string][][2]float64{}
		for _, it := range its {
			require.Equal(t, db.Shard(it.ID), it.Shard)
			got[string(it.ID)] = drainAll(t, it.Values)
		}
		return got
	}
	// tagged counts the IDs whose tag names a series of this namespace
	// with the ID (read by the tag), of another ID, and of the ID in
	// another namespace.
	tagged := func(end int64) (own, otherID, otherNS int) {
		t.Helper()
		qids, tags, err := ns.index.QueryTagged(m, base, end)
		require.NoError(t, err)
		require.Len(t, tags, len(qids))
		for i, id := range qids {
			s := registry.get(tags[i])
			switch {
			case s == nil:
			case s.id != string(id):
				otherID++
			case s.ns != ns.num:
				otherNS++
			default:
				own++
				require.Equal(t, db.Shard(id), uint32(s.shard-1))
			}
		}
		return own, otherID, otherNS
	}
	own, _, _ := tagged(base + 10_000)
	require.Equal(t, n, own)
	require.Equal(t, want, query(base+10_000))

	// Flushed out of memory, the series free their slots; new series take
	// them (the last freed slot is reused first): the same IDs in another
	// database, each written when its old slot is the next to be given,
	// and other IDs in this one. Every rr tag names one of them.
	qids, tags, err := ns.index.QueryTagged(m, base, base+10_000)
	require.NoError(t, err)
	idOf := map[uint32][]byte{}
	for i, id := range qids {
		idOf[tags[i]] = id
	}
	clk.Add(2 * time.Hour)
	require.NoError(t, db.Tick())
	require.Equal(t, 0, countSeries(db))
	db2 := openDB(t, testOpts(t.TempDir(), clk))
	now := ms(clk.Now())
	for i := range ids {
		registry.mu.Lock()
		next := registry.free[len(registry.free)-1]
		registry.mu.Unlock()
		if id := idOf[next]; i%2 == 0 {
			require.NotNil(t, id)
			require.NoError(t, db2.WriteBatch("default", []Sample{{ID: id, Shard: db2.Shard(id), T: now, V: -1}}))
		} else {
			o := sid("other", "i", strconv.Itoa(i))
			require.NoError(t, db.WriteBatch("default", []Sample{{ID: o, Shard: db.Shard(o), T: now, V: -2}}))
		}
	}
	own, otherID, otherNS := tagged(now)
	require.Equal(t, [3]int{0, n / 2, n / 2}, [3]int{own, otherID, otherNS})
	require.Equal(t, want, query(now), "read the series in a stale tag's slot")

	// Written again, the IDs' new series are indexed with their slots.
	b = b[:0]
	for i, id := range ids {
		b = append(b, Sample{ID: id, Shard: db.Shard(id), T: now + 1000, V: float64(100 + i)})
		want[string(id)] = append(want[string(id)], [2]float64{float64(now + 1000), float64(100 + i)})
	}
	require.NoError(t, db.WriteBatch("default", b))
	own, _, _ = tagged(now + 1000)
	require.Equal(t, n, own)
	require.Equal(t, want, query(now+1000))
}

// Queries reading by tag while series are flushed out of memory (their
// slots freed and given to the series created next) and written again
// read only each ID's own samples, in order (run with -race: the tag's
// series is read outside the shard lock as the map's is).
func TestQueryByTagWhileSeriesLeaveMemory(t *testing.T) {
	clk := &clock{t: t0.Add(30 * time.Minute)}
	db := openDB(t, testOpts(t.TempDir(), clk))
	base := ms(t0)
	const n = 40
	m := []*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, "__name__", "lm")}
	index := map[string]int{}
	for i := range n {
		index[string(sid("lm", "i", strconv.Itoa(i)))] = i
	}
	var done atomic.Bool
	var wg sync.WaitGroup
	wg.Go(func() {
		defer done.Store(true)
		for r := range 30 {
			now := ms(clk.Now())
			var b []Sample
			for i := range n {
				id := sid("lm", "i", strconv.Itoa(i))
				b = append(b, Sample{ID: id, Shard: db.Shard(id), T: now, V: float64(i*1000 + r)})
				if r%2 == 0 { // IDs of another metric take freed slots too
					o := sid("other", "r", strconv.Itoa(r), "i", strconv.Itoa(i))
					b = append(b, Sample{ID: o, Shard: db.Shard(o), T: now, V: -1})
				}
			}
			if err := db.WriteBatch("default", b); err != nil {
				t.Error(err)
				return
			}
			if r%3 == 2 {
				clk.Add(2 * time.Hour)
				if err := db.Tick(); err != nil {
					t.Error(err)
					return
				}
			}
		}
	})
	queries := 0
	for !done.Load() || queries == 0 {
		its, err := db.Query(context.Background(), "default", m, base, ms(clk.Now())+time.Hour.Milliseconds(), QueryOptions{})
		require.NoError(t, err)
		for _, it := range its {
			i, ok := index[string(it.ID)]
			require.True(t, ok, "%q", it.ID)
			last := int64(-1)
			for _, tv := range drainAll(t, it.Values) {
				require.Greater(t, int64(tv[0]), last, "%q", it.ID)
				last = int64(tv[0])
				require.Equal(t, i, int(tv[1])/1000, "%q read another series' sample %v", it.ID, tv)
			}
		}
		queries++
	}
	wg.Wait()
}

// After a restart, the series rebuilt from the commit log (or the
// restart snapshot) are indexed with their slots: queries read by tag.
func TestRestartIndexesSeriesWithTags(t *testing.T) {
	clk := &clock{t: t0.Add(30 * time.Minute)}
	opts := testOpts(t.TempDir(), clk)
	db := openDB(t, opts)
	base := ms(t0)
	var b []Sample
	for i := range 20 {
		id := sid("rt", "i", strconv.Itoa(i))
		b = append(b, Sample{ID: id, Shard: db.Shard(id), T: base + 1000, V: float64(i)})
	}
	require.NoError(t, db.WriteBatch("default", b))
	require.NoError(t, db.Close())
	db = openDB(t, opts)
	ns, err := db.namespace("default")
	require.NoError(t, err)
	m := []*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, "__name__", "rt")}
	ids, tags, err := ns.index.QueryTagged(m, base, base+10_000)
	require.NoError(t, err)
	require.Len(t, ids, 20)
	for i, id := range ids {
		s := registry.get(tags[i])
		require.NotNil(t, s, "%q", id)
		require.Equal(t, string(id), s.id)
		require.Equal(t, ns.num, s.ns)
	}
}
