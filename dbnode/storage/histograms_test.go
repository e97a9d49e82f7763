package storage

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/dbnode/encoding"
	"github.com/tessera-tsdb/tessera/dbnode/fileset"
	"github.com/tessera-tsdb/tessera/dbnode/vfs"
	"github.com/tessera-tsdb/tessera/ident"
)

// hv is one read sample of either type, printed completely so samples
// compare with == (bit patterns included: %v of a NaN sum prints NaN for
// every payload, so the stale marker is checked apart).
type hv struct {
	T     int64
	Float bool // a float histogram
	S     string
	Stale bool
}

func testHist(i int) *histogram.Histogram {
	h := &histogram.Histogram{
		Schema: 0, ZeroThreshold: 0.001, ZeroCount: uint64(i), Count: uint64(4*i + 3), Sum: float64(i) * 1.25,
		PositiveSpans: []histogram.Span{{Offset: 0, Length: 2}}, PositiveBuckets: []int64{int64(i + 1), int64(i + 1)},
		CounterResetHint: histogram.NotCounterReset,
	}
	if i%5 == 4 { // a custom-bucket (NHCB) sample now and then
		h.Schema, h.ZeroThreshold, h.ZeroCount = histogram.CustomBucketsSchema, 0, 0
		h.Count = uint64(3 * (i + 1))
		h.CustomValues = []float64{0.5, 1}
	}
	return h
}

func histOf(s HistogramSample) hv {
	if s.FH != nil {
		return hv{T: s.T, Float: true, S: fmt.Sprintf("%+v", *s.FH), Stale: value.IsStaleNaN(s.FH.Sum)}
	}
	return hv{T: s.T, S: fmt.Sprintf("%+v", *s.H), Stale: value.IsStaleNaN(s.H.Sum)}
}

func readHists(t *testing.T, db *Database, id []byte, start, end int64) []hv {
	t.Helper()
	it, err := db.ReadHistograms("default", id, start, end)
	require.NoError(t, err)
	var out []hv
	for it.Next() {
		var s HistogramSample
		if it.IsFloat() {
			s.T, s.FH = it.AtFloatHistogram(nil)
		} else {
			s.T, s.H = it.AtHistogram(nil)
		}
		out = append(out, histOf(s))
	}
	require.NoError(t, it.Err())
	return out
}

// mixedSamples: integer histograms at base+1s.., float ones, and a stale
// marker last; returns them and what a read gives back.
func mixedSamples(db *Database, id []byte, base int64, n int) []HistogramSample {
	out := make([]HistogramSample, n)
	for i := range out {
		s := HistogramSample{ID: id, Shard: db.Shard(id), T: base + int64(i+1)*1000}
		h := testHist(i)
		if i == n-1 {
			h.Sum = math.Float64frombits(value.StaleNaN)
		}
		if i%3 == 2 {
			s.FH = h.ToFloat(nil)
		} else {
			s.H = h
		}
		out[i] = s
	}
	return out
}

func wantHists(ss ...HistogramSample) []hv {
	out := make([]hv, len(ss))
	for i, s := range ss {
		out[i] = histOf(s)
	}
	return out
}

// A series takes histograms of both kinds and floats, out of order too;
// both types read back whole through memory, commit log replay, flush,
// a cold write merged into the flushed block, reopening from filesets,
// and retention.
func TestHistogramsEndToEnd(t *testing.T) {
	clk := &clock{t: t0.Add(30 * time.Minute)}
	dir := t.TempDir()
	db := openDB(t, testOpts(dir, clk))
	id, only := sid("hist", "k", "v"), sid("hist_only")
	base := ms(t0)
	hs := mixedSamples(db, id, base, 10)
	// Written in two requests, the second out of order (before the first).
	require.NoError(t, db.WriteHistograms("default", hs[5:]))
	require.NoError(t, db.WriteHistograms("default", hs[:5]))
	require.NoError(t, db.WriteBatch("default", samples(db, id, base+500, base+1500)))
	ho := mixedSamples(db, only, base, 4)
	require.NoError(t, db.WriteHistograms("default", ho))
	want := wantHists(hs...)
	check := func(what string) {
		t.Helper()
		require.Equal(t, want, readHists(t, db, id, base, base+100_000), what)
		require.Equal(t, wantHists(ho...), readHists(t, db, only, base, base+100_000), what)
		require.Len(t, readAll(t, db, id, base, base+100_000), 2, what)
		require.Empty(t, readAll(t, db, only, base, base+100_000), what)
		require.True(t, want[len(want)-1].Stale, what)
	}
	check("memory")
	// A range read keeps only what is inside.
	require.Equal(t, want[2:4], readHists(t, db, id, base+3000, base+4000))

	// Last write wins on an equal timestamp, whatever its kind.
	over := HistogramSample{ID: id, Shard: db.Shard(id), T: hs[1].T, FH: testHist(7).ToFloat(nil)}
	require.NoError(t, db.WriteHistograms("default", []HistogramSample{over}))
	want[1] = histOf(over)
	check("overwrite")

	require.NoError(t, db.Close())
	db = openDB(t, testOpts(dir, clk))
	check("replayed")

	clk.Add(2 * time.Hour)
	require.NoError(t, db.Tick())
	require.Equal(t, 0, countSeries(db))
	check("flushed")

	// A cold histogram write merges into the next volume.
	cold := HistogramSample{ID: id, Shard: db.Shard(id), T: base + 1200, H: testHist(3)}
	require.NoError(t, db.WriteHistograms("default", []HistogramSample{cold}))
	want = append(want[:1], append([]hv{histOf(cold)}, want[1:]...)...)
	check("cold in memory")
	require.NoError(t, db.Tick())
	require.NoError(t, db.Tick())
	require.Equal(t, 0, countSeries(db))
	check("cold flushed")

	require.NoError(t, db.Close())
	db = openDB(t, testOpts(dir, clk))
	check("reopened")

	clk.Add(48 * time.Hour)
	require.NoError(t, db.Tick())
	require.Empty(t, readHists(t, db, id, base, base+100_000))
}

// Histograms Prometheus would refuse are refused with a reason naming
// them, and the valid ones of the batch are written.
func TestInvalidHistogramsRejected(t *testing.T) {
	clk := &clock{t: t0.Add(30 * time.Minute)}
	db := openDB(t, testOpts(t.TempDir(), clk))
	id := sid("bad_hist")
	base := ms(t0)
	bad := testHist(1)
	bad.PositiveBuckets = bad.PositiveBuckets[:1] // spans say 2
	neg := testHist(1).ToFloat(nil)
	neg.PositiveBuckets[0] = -1
	good := HistogramSample{ID: id, Shard: db.Shard(id), T: base + 3000, H: testHist(2)}
	err := db.WriteHistograms("default", []HistogramSample{
		{ID: id, Shard: db.Shard(id), T: base + 1000, H: bad},
		{ID: id, Shard: db.Shard(id), T: base + 2000, FH: neg},
		good,
		{ID: id, Shard: db.Shard(id), T: base + 4000},
	})
	var rej *RejectedError
	require.ErrorAs(t, err, &rej)
	require.Equal(t, 3, rej.ByReason[ReasonBadHistogram])
	require.Equal(t, wantHists(good), readHists(t, db, id, base, base+10_000))
}

// A fileset written before histograms existed (payloads in the sealed
// float form, first byte 0x02) reads as before, and a cold histogram
// write to its block merges into a new volume beside its floats.
func TestOldFilesetsStillRead(t *testing.T) {
	clk := &clock{t: t0.Add(30 * time.Minute)}
	dir := t.TempDir()
	id := sid("old_floats")
	var e encoding.Encoder
	for i := 0; i < 3; i++ {
		require.NoError(t, e.Append(ms(t0)+int64(i)*1000, float64(i)+0.5))
	}
	sealed, err := encoding.Seal(e.Bytes())
	require.NoError(t, err)
	require.Equal(t, byte(0x02), sealed[0])
	opts := testOpts(dir, clk)
	shard := ident.Shard(id, opts.NumShards)
	require.NoError(t, fileset.Write(vfs.OS(), filepath.Join(dir, "data"),
		fileset.ID{Namespace: "default", Shard: shard, BlockStart: ms(t0)}, (2*time.Hour).Milliseconds(),
		[]fileset.Series{{ID: id, Data: sealed, Samples: 3}}))
	clk.Add(3 * time.Hour)
	db := openDB(t, opts)
	want := []tv{{ms(t0), 0.5}, {ms(t0) + 1000, 1.5}, {ms(t0) + 2000, 2.5}}
	require.Equal(t, want, readAll(t, db, id, ms(t0), ms(t0)+10_000))
	require.Empty(t, readHists(t, db, id, ms(t0), ms(t0)+10_000))

	hs := HistogramSample{ID: id, Shard: shard, T: ms(t0) + 1500, H: testHist(2)}
	require.NoError(t, db.WriteHistograms("default", []HistogramSample{hs}))
	require.NoError(t, db.Tick())
	require.Equal(t, 0, countSeries(db))
	require.Equal(t, want, readAll(t, db, id, ms(t0), ms(t0)+10_000))
	require.Equal(t, wantHists(hs), readHists(t, db, id, ms(t0), ms(t0)+10_000))
}

// A float and a native histogram at one timestamp of one series: the
// second is refused (as Prometheus' head refuses a duplicate sample for
// a timestamp), naming the series and the time, and the first reads back.
// Before, both were taken with a 2xx and a read returned the histogram
// alone.
func TestFloatAndHistogramAtOneTimestampRefused(t *testing.T) {
	clk := &clock{t: t0.Add(30 * time.Minute)}
	db := openDB(t, testOpts(t.TempDir(), clk))
	id := sid("mixed", "k", "v")
	base := ms(t0)

	// A float first, then a histogram at its timestamp (one remote write
	// request carrying both: floats are written first).
	require.NoError(t, db.WriteBatch("default", []Sample{{ID: id, Shard: db.Shard(id), T: base + 1000, V: 1.5}}))
	err := db.WriteHistograms("default", []HistogramSample{
		{ID: id, Shard: db.Shard(id), T: base + 1000, H: testHist(1)},
		{ID: id, Shard: db.Shard(id), T: base + 2000, H: testHist(2)},
	})
	var rej *RejectedError
	require.ErrorAs(t, err, &rej)
	require.Equal(t, 1, rej.ByReason[ReasonTypeConflict])
	require.Contains(t, err.Error(), `series {__name__="mixed", k="v"} already holds a float sample at 2026-`)
	require.Len(t, readAll(t, db, id, base, base+10_000), 1, "the float reads back")
	require.Len(t, readHists(t, db, id, base, base+10_000), 1, "the other histogram is written")

	// A histogram first, then a float at its timestamp.
	err = db.WriteBatch("default", []Sample{
		{ID: id, Shard: db.Shard(id), T: base + 2000, V: 2},
		{ID: id, Shard: db.Shard(id), T: base + 3000, V: 3},
	})
	require.ErrorAs(t, err, &rej)
	require.Equal(t, 1, rej.ByReason[ReasonTypeConflict])
	require.Contains(t, err.Error(), "already holds a native histogram at")
	require.Len(t, readAll(t, db, id, base, base+10_000), 2)
	require.Len(t, readHists(t, db, id, base, base+10_000), 1)
}

// One Write takes a batch of every kind: each sample goes to its series'
// encoder, the refusals of both kinds come back as one error that says
// how many were histograms, a float and a histogram of one series at one
// timestamp keep the float (as when written one after the other), and the
// batch replays from the commit log whole.
func TestWriteBatchOfEveryKind(t *testing.T) {
	clk := &clock{t: t0.Add(30 * time.Minute)}
	dir := t.TempDir()
	db := openDB(t, testOpts(dir, clk))
	id, hid := sid("mixed", "k", "v"), sid("mixed_hist")
	base := ms(t0)
	bad := testHist(1)
	bad.Count++ // buckets and count disagree
	b := Batch{
		Floats: []Sample{
			{ID: id, Shard: db.Shard(id), T: base + 1000, V: 1.5},
			{ID: id, Shard: db.Shard(id), T: base + 2000, V: 2.5},
			{ID: id, Shard: db.Shard(id), T: ms(t0.Add(-48 * time.Hour)), V: 9}, // too old
		},
		Histograms: []HistogramSample{
			{ID: id, Shard: db.Shard(id), T: base + 1000, H: testHist(1)}, // the float's timestamp
			{ID: id, Shard: db.Shard(id), T: base + 3000, H: testHist(2)},
			{ID: hid, Shard: db.Shard(hid), T: base + 1000, FH: testHist(3).ToFloat(nil)},
			{ID: hid, Shard: db.Shard(hid), T: base + 2000, H: bad},
		},
	}
	err := db.Write("default", b)
	var rej *RejectedError
	require.ErrorAs(t, err, &rej)
	require.Equal(t, 3, rej.Total, "%v", err)
	require.Equal(t, 2, rej.Histograms)
	require.Equal(t, 1, rej.ByReason[ReasonTypeConflict])
	require.Equal(t, 1, rej.ByReason[ReasonBadHistogram])
	require.NotNil(t, b.Floats[0].Ref, "written samples carry their series' ref")
	require.NotNil(t, b.Histograms[2].Ref)
	check := func(what string) {
		t.Helper()
		require.Len(t, readAll(t, db, id, base, base+10_000), 2, what)
		require.Equal(t, wantHists(b.Histograms[1]), readHists(t, db, id, base, base+10_000), what)
		require.Equal(t, wantHists(b.Histograms[2]), readHists(t, db, hid, base, base+10_000), what)
	}
	check("memory")
	require.NoError(t, db.Close())
	db = openDB(t, testOpts(dir, clk))
	check("replayed")
}

// A query asked to decline histograms does so before reading anything
// when a selected series holds histograms in the range, in the shards
// asked for: unflushed ones, and flushed ones (known from the fileset
// index since its version 4); it reads as before otherwise.
func TestQueryDeclinesHistogramsBeforeReading(t *testing.T) {
	clk := &clock{t: t0.Add(30 * time.Minute)}
	db := openDB(t, testOpts(t.TempDir(), clk))
	base := ms(t0)
	h, f := sid("mix", "k", "h"), sid("mix", "k", "f")
	require.NoError(t, db.WriteHistograms("default", mixedSamples(db, h, base, 4)))
	require.NoError(t, db.WriteBatch("default", samples(db, f, base+1000, base+2000)))
	sel := func(v string) []*labels.Matcher {
		return []*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, "__name__", "mix"), labels.MustNewMatcher(labels.MatchRegexp, "k", v)}
	}
	query := func(v string, qo QueryOptions) ([]SeriesIterator, error) {
		return db.Query(context.Background(), "default", sel(v), base, base+100_000, qo)
	}
	decline := QueryOptions{DeclineHistograms: true}

	_, err := query("h|f", decline)
	require.ErrorIs(t, err, ErrHistogramsSelected)
	its, err := query("h|f", QueryOptions{})
	require.NoError(t, err)
	require.Len(t, its, 2, "without the option the series are read")
	its, err = query("f", decline)
	require.NoError(t, err)
	require.Len(t, its, 1, "floats alone are read")
	require.Nil(t, its[0].Histograms)
	if db.Shard(h) != db.Shard(f) {
		its, err = query("h|f", QueryOptions{DeclineHistograms: true, Shards: func(s uint32) bool { return s != db.Shard(h) }})
		require.NoError(t, err)
		require.Len(t, its, 1, "the histograms' shard is not asked for")
	}
	// Outside the blocks holding them, the histograms are not selected.
	its, err = db.Query(context.Background(), "default", sel("h|f"), base+3*time.Hour.Milliseconds(), base+4*time.Hour.Milliseconds(), decline)
	require.NoError(t, err)
	require.Empty(t, its)

	clk.Add(2 * time.Hour)
	require.NoError(t, db.Tick())
	require.Equal(t, 0, countSeries(db))
	_, err = query("h|f", decline)
	require.ErrorIs(t, err, ErrHistogramsSelected, "flushed histograms, known from the fileset index")
	its, err = query("h|f", QueryOptions{})
	require.NoError(t, err)
	require.True(t, slices.ContainsFunc(its, func(it SeriesIterator) bool { return it.Histograms != nil }))
	its, err = query("f", decline)
	require.NoError(t, err)
	require.Len(t, its, 1, "flushed floats alone are read")
}
