package httpapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/prometheus/prompb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/dbnode/remote"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
	"github.com/tessera-tsdb/tessera/dbnode/storage/storagetest"
	"github.com/tessera-tsdb/tessera/ident"
	"github.com/tessera-tsdb/tessera/internal/slots"
)

// recording is a Local backend that keeps a copy of every batch it was
// given, refs included.
type recording struct {
	Local
	mu      sync.Mutex
	batches [][]storage.Sample
}

func (r *recording) WriteBatch(ctx context.Context, ns string, s []storage.Sample) error {
	r.mu.Lock()
	r.batches = append(r.batches, append([]storage.Sample(nil), s...))
	r.mu.Unlock()
	return r.Local.WriteBatch(ctx, ns, s)
}

func (r *recording) last() []storage.Sample {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.batches[len(r.batches)-1]
}

// refID is the ID of a live storage ref.
func refID(t *testing.T, ref storage.SeriesRef) []byte {
	t.Helper()
	id := storage.SeriesID(ref)
	require.NotNil(t, id, "ref %x is live", ref)
	return id
}

func readIDs(t *testing.T, f *fixture, id []byte, from, to int64) []int64 {
	t.Helper()
	it, err := f.db.Read("default", id, from, to)
	require.NoError(t, err)
	var out []int64
	for it.Next() {
		ts, _ := it.At()
		out = append(out, ts)
	}
	require.NoError(t, it.Err())
	return out
}

// A series sent again comes from the cache: the storage ref of its first
// write is handed back, and its samples land in the same series.
func TestSeriesCacheHandsBackRefs(t *testing.T) {
	f := newFixture(t, 32<<20)
	rec := &recording{Local: Local{DB: f.db}}
	f.state.serve(rec)
	now := time.Now().UnixMilli()
	job := func(v string) prompb.Label { return prompb.Label{Name: "job", Value: v} }
	url := f.srv.URL + "/api/v1/prom/remote/write"

	code, msg := post(t, url, writeBody(t, ts("up", now-2000, 1, job("a")), ts("up", now-2000, 2, job("b"))))
	require.Equal(t, http.StatusNoContent, code, msg)
	for _, s := range rec.last() {
		require.Zero(t, s.Ref, "first sight: no ref yet")
	}
	require.Equal(t, 2, f.api.series.len())

	// Known and new series mixed in one request.
	code, msg = post(t, url, writeBody(t, ts("up", now-1000, 3, job("a")), ts("up", now-1000, 9, job("c")), ts("up", now-1000, 4, job("b"))))
	require.Equal(t, http.StatusNoContent, code, msg)
	second := rec.last()
	require.NotZero(t, second[0].Ref, "known series carry the ref of their first write")
	require.Zero(t, second[1].Ref)
	require.NotZero(t, second[2].Ref)
	require.NotEqual(t, second[0].Ref, second[2].Ref)
	require.Equal(t, 3, f.api.series.len())
	c := ident.AppendPairs(nil, []ident.Pair{{Name: []byte("__name__"), Value: []byte("up")}, {Name: []byte("job"), Value: []byte("c")}})
	require.Equal(t, []int64{now - 1000}, readIDs(t, f, c, now-5000, now))

	a := ident.AppendPairs(nil, []ident.Pair{{Name: []byte("__name__"), Value: []byte("up")}, {Name: []byte("job"), Value: []byte("a")}})
	require.Equal(t, []int64{now - 2000, now - 1000}, readIDs(t, f, a, now-5000, now))
}

// Labels sent out of order are cached under their own bytes and hit the
// same series as the sorted form; a cache entry whose label bytes differ
// from the request's (a hash collision) is never used.
func TestSeriesCacheOnlyExactLabelBytes(t *testing.T) {
	f := newFixture(t, 32<<20)
	rec := &recording{Local: Local{DB: f.db}}
	f.state.serve(rec)
	now := time.Now().UnixMilli()
	url := f.srv.URL + "/api/v1/prom/remote/write"
	unsorted := func(ts int64) prompb.TimeSeries {
		return prompb.TimeSeries{Labels: []prompb.Label{{Name: "job", Value: "x"}, {Name: "__name__", Value: "up"}},
			Samples: []prompb.Sample{{Timestamp: ts, Value: 1}}}
	}
	code, msg := post(t, url, writeBody(t, unsorted(now-3000)))
	require.Equal(t, http.StatusNoContent, code, msg)
	require.Equal(t, 1, f.api.series.len())
	code, msg = post(t, url, writeBody(t, unsorted(now-2000)))
	require.Equal(t, http.StatusNoContent, code, msg)
	require.NotZero(t, rec.last()[0].Ref, "unsorted labels sent again hit the cache")
	code, msg = post(t, url, writeBody(t, ts("up", now-1000, 1, prompb.Label{Name: "job", Value: "x"})))
	require.Equal(t, http.StatusNoContent, code, msg)
	require.Equal(t, 2, f.api.series.len(), "the sorted form is other bytes: its own entry")
	x := ident.AppendPairs(nil, []ident.Pair{{Name: []byte("__name__"), Value: []byte("up")}, {Name: []byte("job"), Value: []byte("x")}})
	require.Equal(t, []int64{now - 3000, now - 2000, now - 1000}, readIDs(t, f, x, now-5000, now))

	// Poison: the hash of "up{job=y}"'s label bytes maps to up{job=z}.
	yBody, err := (&prompb.WriteRequest{Timeseries: []prompb.TimeSeries{ts("up", now, 1, prompb.Label{Name: "job", Value: "y"})}}).Marshal()
	require.NoError(t, err)
	zBody, err := (&prompb.WriteRequest{Timeseries: []prompb.TimeSeries{ts("up", now, 1, prompb.Label{Name: "job", Value: "z"})}}).Marshal()
	require.NoError(t, err)
	var d remote.WriteDecoder
	require.NoError(t, d.Decode(yBody))
	yRaw, yID := append([]byte(nil), d.Keys[0].Raw...), append([]byte(nil), d.Series[0].ID...)
	require.NoError(t, d.Decode(zBody))
	zRaw, zID := d.Keys[0].Raw, d.Series[0].ID
	f.api.series.update([]newSeries{{h: remote.KeyHash(yRaw), v: newSlot(remote.KeyHash(yRaw), zRaw, zID, ident.Shard(zID, 64), 0)}})

	code, msg = post(t, url, writeBody(t, ts("up", now-500, 7, prompb.Label{Name: "job", Value: "y"})))
	require.Equal(t, http.StatusNoContent, code, msg)
	require.Equal(t, []int64{now - 500}, readIDs(t, f, yID, now-5000, now))
	require.Empty(t, readIDs(t, f, zID, now-5000, now))

	// The same poison with an entry that keeps no bytes of its own (z
	// written to storage, its sorted labels the form of its ID): y's bytes
	// are compared with the form of z's ID, and are not it.
	code, msg = post(t, url, writeBody(t, ts("up", now-400, 1, prompb.Label{Name: "job", Value: "z"})))
	require.Equal(t, http.StatusNoContent, code, msg)
	code, msg = post(t, url, writeBody(t, ts("up", now-350, 1, prompb.Label{Name: "job", Value: "z"})))
	require.Equal(t, http.StatusNoContent, code, msg)
	require.NotZero(t, rec.last()[0].Ref, "z's sorted labels hit its entry")
	var ze slot
	f.api.series.view(func() { ze, _ = f.api.series.lookupOne(zRaw, remote.KeyHash(zRaw)) })
	require.True(t, ze.found())
	require.Equal(t, kindForm, ze.kind, "z's entry keeps no copy of its label bytes")
	zref, zid := ze.load()
	require.Same(t, &refID(t, zref)[0], &zid[0], "z's entry is its storage series' ID")
	f.api.series.update([]newSeries{{h: remote.KeyHash(yRaw), v: ze}})
	f.api.series.view(func() {
		e, _ := f.api.series.lookupOne(yRaw, remote.KeyHash(yRaw))
		require.True(t, e.found(), "y's own entry, past z's under y's hash")
		_, id := e.load()
		require.Equal(t, yID, id, "y's bytes miss z's entry under y's hash")
	})
	code, msg = post(t, url, writeBody(t, ts("up", now-300, 8, prompb.Label{Name: "job", Value: "y"})))
	require.Equal(t, http.StatusNoContent, code, msg)
	require.NotZero(t, rec.last()[0].Ref, "a hit of y's own entry")
	require.Equal(t, yID, refID(t, rec.last()[0].Ref), "y's own entry")
	require.Equal(t, []int64{now - 500, now - 300}, readIDs(t, f, yID, now-5000, now))
	require.Equal(t, []int64{now - 400, now - 350}, readIDs(t, f, zID, now-5000, now))
}

// The cache holds at most two generations of its size: older series age
// out.
func TestSeriesCacheIsBounded(t *testing.T) {
	c := newSeriesCache(2)
	put := func(i int) newSeries {
		return newSeries{h: uint64(i), v: newSlot(uint64(i), []byte{byte(i)}, []byte{byte(i)}, 0, 0)}
	}
	get := func(i int) (e slot, promote bool) {
		c.view(func() { e, promote = c.lookupOne([]byte{byte(i)}, uint64(i)) })
		return e, promote
	}
	for i := range 10 {
		c.update([]newSeries{put(i)})
		require.LessOrEqual(t, c.len(), 4)
	}
	// Two generations of two: 6 and 7 are old, 8 and 9 current, the rest
	// gone. A hit in the old generation is kept by promoting it.
	for i := range 6 {
		e, _ := get(i)
		require.False(t, e.found(), "%d", i)
	}
	e, promote := get(6)
	require.True(t, e.found())
	require.True(t, promote, "6 is old")
	_, promote = get(8)
	require.False(t, promote, "8 is current")
	c.update([]newSeries{{h: 6, v: e}})
	e6, promote := get(6)
	require.Same(t, e.e, e6.e)
	require.False(t, promote, "6 is current")
	c.update([]newSeries{put(100), put(101)})
	e6, promote = get(6)
	require.Same(t, e.e, e6.e)
	require.True(t, promote, "6 is old again")
	require.Equal(t, 3, c.len(), "6 and 100 old, 101 current")
}

// A request refused as bad input adds nothing to the cache.
func TestSeriesCacheIgnoresRefusedRequests(t *testing.T) {
	f := newFixture(t, 32<<20)
	now := time.Now().UnixMilli()
	bad := prompb.TimeSeries{Labels: []prompb.Label{{Name: "job", Value: "x"}}, Samples: []prompb.Sample{{Timestamp: now, Value: 1}}}
	code, _ := post(t, f.srv.URL+"/api/v1/prom/remote/write", writeBody(t, ts("up", now, 1), bad))
	require.Equal(t, http.StatusBadRequest, code)
	require.Zero(t, f.api.series.len())
}

// A cached series written to this node's storage keeps the storage
// series' ID instead of a copy of its own (one ID copy less per series),
// and, its labels sent sorted as Prometheus does, no copy of its label
// bytes either; it still hits with the same ID, and other label bytes
// (the same labels unsorted) miss it.
func TestSeriesCacheSharesStorageID(t *testing.T) {
	f := newFixture(t, 32<<20)
	rec := &recording{Local: Local{DB: f.db}}
	f.state.serve(rec)
	now := time.Now().UnixMilli()
	url := f.srv.URL + "/api/v1/prom/remote/write"
	body := writeBody(t, ts("up", now-2000, 1, prompb.Label{Name: "job", Value: "a"}))
	code, msg := post(t, url, body)
	require.Equal(t, http.StatusNoContent, code, msg)

	f.api.series.mu.RLock()
	var entries []slot
	for _, v := range f.api.series.t.All() {
		e, ok := f.api.series.slotOf(v)
		require.True(t, ok)
		entries = append(entries, e)
	}
	f.api.series.mu.RUnlock()
	require.Len(t, entries, 1)
	e := entries[0]
	ref, id := e.load()
	require.NotZero(t, ref, "written locally: the entry holds the storage ref")
	require.Equal(t, refID(t, ref), id)
	require.Same(t, &refID(t, ref)[0], &id[0], "the entry shares the series' ID bytes")
	require.Equal(t, kindForm, e.kind, "sorted labels: the entry keeps no copy of them, nor an entry of its own")
	require.Nil(t, e.e, "the entry is the storage ref")

	code, msg = post(t, url, writeBody(t, ts("up", now-1000, 2, prompb.Label{Name: "job", Value: "a"})))
	require.Equal(t, http.StatusNoContent, code, msg)
	require.Equal(t, ref, rec.last()[0].Ref, "the sorted labels hit the entry")
	a := ident.AppendPairs(nil, []ident.Pair{{Name: []byte("__name__"), Value: []byte("up")}, {Name: []byte("job"), Value: []byte("a")}})
	require.Equal(t, []int64{now - 2000, now - 1000}, readIDs(t, f, a, now-5000, now))

	// The same labels in another order are other bytes: a miss, then an
	// entry of their own that keeps them.
	unsorted := prompb.TimeSeries{Labels: []prompb.Label{{Name: "job", Value: "a"}, {Name: "__name__", Value: "up"}},
		Samples: []prompb.Sample{{Timestamp: now - 500, Value: 3}}}
	code, msg = post(t, url, writeBody(t, unsorted))
	require.Equal(t, http.StatusNoContent, code, msg)
	require.Zero(t, rec.last()[0].Ref, "other label bytes miss")
	require.Equal(t, 2, f.api.series.len())
	require.Equal(t, []int64{now - 2000, now - 1000, now - 500}, readIDs(t, f, a, now-5000, now))
}

// Every way an entry is built gives back its ID and recognises its label
// bytes and only them: with the ID shared with storage or copied, with the
// key the ID's form (sorted 1.0 labels: formed), the ID itself (2.0) or
// other bytes.
func TestSeriesCacheEntryForms(t *testing.T) {
	db := storagetest.Open(t, 4, nil)
	id := ident.AppendPairs(nil, []ident.Pair{{Name: []byte("__name__"), Value: []byte("up")}, {Name: []byte("job"), Value: []byte("x")}})
	now := time.Now().UnixMilli()
	batch := []storage.Sample{{ID: id, Shard: 1, T: now, V: 1}}
	require.NoError(t, db.WriteBatch("default", batch))
	ref := batch[0].Ref
	require.NotZero(t, ref)
	sorted := wireLabels(t, prompb.Label{Name: "__name__", Value: "up"}, prompb.Label{Name: "job", Value: "x"})
	unsorted := wireLabels(t, prompb.Label{Name: "job", Value: "x"}, prompb.Label{Name: "__name__", Value: "up"})
	key := []byte("label bytes on the wire")
	otherID := append([]byte(nil), id...)
	for name, tc := range map[string]struct {
		key, id []byte
		ref     storage.SeriesRef
		kind    uint8 // of the slot
		formed  bool  // of the entry (kindEntry)
	}{
		"key, shared ID":      {key, otherID, ref, kindEntry, false},
		"key, copied ID":      {key, otherID, 0, kindEntry, false},
		"unsorted, shared ID": {unsorted, otherID, ref, kindEntry, false},
		"sorted, shared ID":   {sorted, otherID, ref, kindForm, false},
		"sorted, copied ID":   {sorted, otherID, 0, kindEntry, true},
		"key is ID, shared":   {otherID, otherID, ref, kindID, false},
		"key is ID, copied":   {otherID, otherID, 0, kindEntry, false},
	} {
		s := newSlot(99, tc.key, tc.id, 7, tc.ref)
		require.Equal(t, tc.kind, s.kind, name)
		require.True(t, s.matches(tc.key), name)
		for _, other := range [][]byte{sorted, unsorted, key, otherID, nil, []byte("x")} {
			if string(other) != string(tc.key) {
				require.False(t, s.matches(other), "%s: %q", name, other)
			}
		}
		if tc.kind != kindEntry {
			require.Equal(t, tc.ref, s.ref, "%s: the slot is the storage ref", name)
			require.Nil(t, s.e, name)
		} else {
			e := s.e
			require.Equal(t, tc.formed, e.formed, name)
			switch {
			case tc.formed:
				require.Equal(t, id, e.key(), "%s: a formed entry holds the ID alone", name)
				require.NotSame(t, &tc.key[0], &e.buf[0], name)
				require.NotSame(t, &tc.id[0], &e.buf[0], "%s: a copy of the ID", name)
			default:
				require.Equal(t, tc.key, e.key(), name)
				require.NotSame(t, &tc.key[0], &e.key()[0], "%s: the key is a copy", name)
			}
		}
		r, gotID := s.load()
		require.Equal(t, id, gotID, name)
		require.Equal(t, tc.ref, r, name)
		if tc.ref != 0 && tc.kind != kindEntry {
			require.Same(t, &refID(t, tc.ref)[0], &gotID[0], "%s: the storage series' ID, not a copy", name)
		}
		require.Equal(t, uint16(7), s.shard, name)
	}
	require.Equal(t, uintptr(16), reflect.TypeFor[slots.Entry[cell]]().Size(), "a table slot is 16 bytes")
	require.Equal(t, uintptr(40), reflect.TypeFor[cachedSeries]().Size(), "an entry is 40 bytes (in the 48-byte size class)")
}

// The generation number wraps (one byte), and still tells the entries of
// the current generation from the old one's: through hundreds of
// generations, an entry of the old one is promoted when hit, and one of
// the current one is not.
func TestSeriesCacheGenerationsWrap(t *testing.T) {
	c := newSeriesCache(1) // generations of one
	key := func(i int) []byte { return []byte{byte(i), byte(i >> 8), 'k'} }
	for i := range 700 {
		c.update([]newSeries{{h: uint64(i), v: newSlot(uint64(i), key(i), key(i), 0, 0)}})
		c.view(func() {
			e, promote := c.lookupOne(key(i), uint64(i))
			require.True(t, e.found(), "generation %d", i)
			require.False(t, promote, "generation %d: current", i)
			if i > 0 {
				e, promote = c.lookupOne(key(i-1), uint64(i-1))
				require.True(t, e.found(), "generation %d", i)
				require.True(t, promote, "generation %d: old", i)
			}
			if i > 1 {
				e, _ = c.lookupOne(key(i-2), uint64(i-2))
				require.False(t, e.found(), "generation %d: dropped", i)
			}
		})
	}
}

// As many active series as the cache's size, sent round-robin as scrapes
// send them, all hit from the second round on. With generations of half
// the size, each series came back after both had turned over and missed
// (89% at 1 M series).
func TestSeriesCacheHoldsItsSizeRoundRobin(t *testing.T) {
	const n = 1000
	c := newSeriesCache(n)
	key := func(i int) []byte { return []byte{byte(i), byte(i >> 8), 'k'} }
	for round := range 4 {
		misses := 0
		for i := range n {
			var e slot
			var promote bool
			c.view(func() { e, promote = c.lookupOne(key(i), uint64(i)) })
			switch {
			case !e.found():
				misses++
				c.update([]newSeries{{h: uint64(i), v: newSlot(uint64(i), key(i), key(i), 0, 0)}})
			case promote:
				c.update([]newSeries{{h: uint64(i), v: e}})
			}
		}
		if round == 0 {
			require.Equal(t, n, misses, "round 0: every series is new")
		} else {
			require.Zero(t, misses, "round %d", round)
		}
		require.LessOrEqual(t, c.len(), 2*n)
	}
}

// A slot that holds the storage series itself takes the new series a
// write hands back (the storage series dropped and made anew, same ID)
// in place: one entry, now pointing at the new one.
func TestSeriesCacheRefreshesHeldSeries(t *testing.T) {
	id := ident.AppendPairs(nil, []ident.Pair{{Name: []byte("__name__"), Value: []byte("up")}, {Name: []byte("job"), Value: []byte("x")}})
	now := time.Now().UnixMilli()
	write := func() storage.SeriesRef {
		batch := []storage.Sample{{ID: id, Shard: 1, T: now, V: 1}}
		require.NoError(t, storagetest.Open(t, 4, nil).WriteBatch("default", batch))
		require.NotZero(t, batch[0].Ref)
		return batch[0].Ref
	}
	ref1, ref2 := write(), write()
	require.NotEqual(t, ref1, ref2)
	raw := wireLabels(t, prompb.Label{Name: "__name__", Value: "up"}, prompb.Label{Name: "job", Value: "x"})
	h := remote.KeyHash(raw)
	c := newSeriesCache(10)
	c.update([]newSeries{{h: h, v: newSlot(h, raw, id, 1, ref1)}})
	var one slot
	c.view(func() { one, _ = c.lookupOne(raw, h) })
	require.Equal(t, kindForm, one.kind)
	_, ok := one.refreshed(h, ref1)
	require.False(t, ok, "the same series: nothing to do")
	_, ok = one.refreshed(h, 0)
	require.False(t, ok, "no ref (a failed write): nothing to do")
	u, ok := one.refreshed(h, ref2)
	require.True(t, ok)
	c.update([]newSeries{u})
	c.view(func() { one, _ = c.lookupOne(raw, h) })
	got, _ := one.load()
	require.Equal(t, ref2, got)
	require.Equal(t, 1, c.len())

	// The same through a request's hit (lookup): a refresh builds the
	// entry anew from the request's bytes, and checks the new ref's ID.
	ref3 := write()
	keys := []remote.LabelKey{{Raw: append([]byte(nil), raw...), Hash: h}}
	known, hs := make([]bool, 1), &hits{}
	hs.reset(1)
	c.view(func() { c.lookup(keys, known, hs, nil) })
	require.True(t, known[0])
	require.Equal(t, ref2, hs.ref(0))
	_, ok = hs.refreshed(0, h, keys[0].Raw, ref2)
	require.False(t, ok, "the same series: nothing to do")
	u, ok = hs.refreshed(0, h, keys[0].Raw, ref3)
	require.True(t, ok)
	require.Equal(t, kindForm, u.v.kind, "the new ref's series holds the ID: a cell of its own")
	c.update([]newSeries{u})
	c.view(func() { c.lookup(keys, known, hs, nil) })
	require.Equal(t, ref3, hs.ref(0))
	require.Equal(t, id, hs.id[0])
	require.Equal(t, 1, c.len())
	require.Equal(t, uintptr(12), reflect.TypeFor[cell]().Size(), "a request's hit cell is 12 bytes")
}

// Concurrent remote writes through a cache far smaller than their series
// (generations turning over, the table rebuilt, entries promoted, the same
// series sent sorted and unsorted by several requests at once) store
// every sample in its own series, and the cache stays bounded. Run with
// -race.
func TestSeriesCacheConcurrentWrites(t *testing.T) {
	db := storagetest.Open(t, 64, nil)
	api := newAPI(t, Options{Namespace: "default", MaxBodyBytes: 32 << 20, NumShards: 64, SeriesCacheSize: 40, Backend: Local{DB: db}})
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	const writers, requests, perRequest, series = 4, 30, 25, 200
	base := time.Now().UnixMilli() - 1_000_000
	labels := func(i int, unsorted bool) []prompb.Label {
		ls := []prompb.Label{{Name: "__name__", Value: "up"}, {Name: "i", Value: strconv.Itoa(i)}, {Name: "job", Value: "w"}}
		if unsorted {
			ls[0], ls[2] = ls[2], ls[0]
		}
		return ls
	}
	want := make([][]int64, series)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range requests {
				tsAt := base + int64(g*requests+r)
				var body []prompb.TimeSeries
				for k := range perRequest {
					i := (g*7 + r*perRequest + k) % series
					body = append(body, prompb.TimeSeries{Labels: labels(i, (g+r+k)%3 == 0),
						Samples: []prompb.Sample{{Timestamp: tsAt, Value: float64(i)}}})
				}
				code, msg := post(t, srv.URL+"/api/v1/prom/remote/write", writeBody(t, body...))
				if !assert.Equal(t, http.StatusNoContent, code, msg) {
					return
				}
				mu.Lock()
				for k := range perRequest {
					i := (g*7 + r*perRequest + k) % series
					want[i] = append(want[i], tsAt)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	require.LessOrEqual(t, api.series.len(), 80)
	for i := range series {
		id := ident.AppendPairs(nil, []ident.Pair{{Name: []byte("__name__"), Value: []byte("up")},
			{Name: []byte("i"), Value: []byte(strconv.Itoa(i))}, {Name: []byte("job"), Value: []byte("w")}})
		it, err := db.Read("default", id, base-1, base+writers*requests+1)
		require.NoError(t, err)
		var got []int64
		for it.Next() {
			ts, v := it.At()
			require.Equal(t, float64(i), v, "series %d holds only its own samples", i)
			got = append(got, ts)
		}
		require.NoError(t, it.Err())
		slices.Sort(want[i])
		require.Equal(t, want[i], got, "series %d", i)
	}
}

// Two requests that both missed a series (sent at once) each put an entry
// for it: the second replaces the first, one entry a key; an entry of
// other bytes under the same hash is another entry.
func TestSeriesCacheOneEntryAKey(t *testing.T) {
	c := newSeriesCache(10)
	key := []byte("label bytes")
	c.update([]newSeries{{h: 5, v: newSlot(5, key, key, 0, 0)}})
	second := newSlot(5, append([]byte(nil), key...), key, 0, 0)
	c.update([]newSeries{{h: 5, v: second}})
	require.Equal(t, 1, c.len())
	var hit slot
	c.view(func() { hit, _ = c.lookupOne(key, 5) })
	require.Same(t, second.e, hit.e, "the later entry")
	c.update([]newSeries{{h: 5, v: newSlot(5, []byte("other"), []byte("other"), 0, 0)}})
	require.Equal(t, 2, c.len())
}

// The table grows in steps of any size, staying between 54% and 81% full
// (it was half empty on average with powers of two), and every entry is
// found through its rebuilds.
func TestSeriesCacheTableLoad(t *testing.T) {
	const n = 50_000
	c := newSeriesCache(n)
	key := func(i int) []byte { return []byte("series-" + strconv.Itoa(i)) }
	minLoad := 1.0
	for i := range n {
		k := key(i)
		c.update([]newSeries{{h: remote.KeyHash(k), v: newSlot(remote.KeyHash(k), k, k, 0, 0)}})
		load := float64(c.t.Len()) / float64(c.t.Slots())
		require.LessOrEqual(t, load, 13.0/16, "%d entries", i+1)
		if i > 1000 {
			minLoad = min(minLoad, load)
		}
	}
	require.Greater(t, minLoad, 0.53)
	keys := make([]remote.LabelKey, n)
	for i := range n {
		k := key(i)
		keys[i] = remote.LabelKey{Raw: k, Hash: remote.KeyHash(k)}
		var e slot
		c.view(func() { e, _ = c.lookupOne(k, remote.KeyHash(k)) })
		require.True(t, e.found(), "%d", i)
	}
	known, hs := make([]bool, n), &hits{}
	hs.reset(n)
	c.view(func() { c.lookup(keys, known, hs, nil) })
	for i := range n {
		require.True(t, known[i], "%d", i)
		require.Equal(t, keys[i].Raw, hs.id[i], "%d", i)
	}
}
