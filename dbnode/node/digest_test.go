package node

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/dbnode/promapi"
	"github.com/tessera-tsdb/tessera/dbnode/query"
	"github.com/tessera-tsdb/tessera/dbnode/rpc"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
	"github.com/tessera-tsdb/tessera/dbnode/storage/storagetest"
	"github.com/tessera-tsdb/tessera/ident"
)

// TestPartDigestIsOfTheSamplesRead: a replica asked only for a part's
// digest hashes the samples it reads without computing anything, and the
// replica answering in full arrives at the same digest for every kind of
// pushdown, also where the read holds samples no step uses (a sample after
// the last step: the full answer's workers must hash what the function
// left unread). Replicas whose samples differ, even where their answers
// are equal, disagree.
func TestPartDigestIsOfTheSamplesRead(t *testing.T) {
	now := time.Now().Add(-time.Minute).UnixMilli() / 1000 * 1000
	steps := query.Steps{Start: now - 120_000, End: now - 1_000, Step: 30_000, Lookback: 300_000}
	lastStep := steps.Start + int64(steps.Count()-1)*steps.Step
	require.Less(t, lastStep+1_000, steps.End, "the test needs room after the last step")
	samples := func(db *storage.Database) []storage.Sample {
		var fs []storage.Sample
		for i := range 30 {
			id := ident.FromLabels(labels.FromStrings("__name__", "m", "job", fmt.Sprint(i%3), "i", fmt.Sprint(i)))
			for k := range 12 {
				if i%5 == 0 && k == 4 {
					continue // a gap
				}
				v := float64(i*k + 1)
				if i%7 == 0 && k == 6 {
					v = 1 // a counter reset
				}
				if i == 11 && k == 9 {
					v = math.Float64frombits(value.StaleNaN)
				}
				fs = append(fs, storage.Sample{ID: id, Shard: db.Shard(id), T: steps.Start - 200_000 + int64(k)*30_000, V: v})
			}
		}
		return fs
	}
	open := func(extra ...storage.Sample) *storage.Database {
		db := storagetest.Open(t, 4, nil)
		fs := samples(db)
		for _, e := range extra {
			e.Shard = db.Shard(e.ID)
			fs = append(fs, e)
		}
		require.NoError(t, db.WriteBatch("default", fs))
		return db
	}
	first := ident.FromLabels(labels.FromStrings("__name__", "m", "job", "0", "i", "0"))
	base := open()
	unused := open(storage.Sample{ID: first, T: lastStep + 500, V: 1e6})      // read, after every step
	changed := open(storage.Sample{ID: first, T: steps.Start - 10_000, V: 7}) // inside every read
	opts := promapi.Options{MaxSamples: 1_000_000}
	all := func(uint32) bool { return true }
	evaluate := func(db *storage.Database, pd query.Pushdown, digestOnly bool) *query.Result {
		t.Helper()
		req := &query.Request{Namespace: "default",
			Matchers: []*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, "__name__", "m")},
			Steps:    steps, Pushdown: pd, DigestOnly: digestOnly}
		res, err := promapi.Evaluate(t.Context(), shardReader{db: db, shards: all}, req, opts)
		require.NoError(t, err, "%+v", pd)
		return res
	}
	for _, pd := range []query.Pushdown{
		{Func: query.FuncSelect},
		{Func: query.FuncSelect, Agg: query.AggSum, Grouping: []string{"job"}},
		{Func: query.FuncRate, Range: 5 * time.Minute, Agg: query.AggCount},
		{Func: query.FuncRate, Range: 5 * time.Minute, Agg: query.AggAvg, Grouping: []string{"job"}},
		{Func: query.FuncIncrease, Range: 2 * time.Minute, Agg: query.AggMax},
		{Func: query.FuncAvgOverTime, Range: 5 * time.Minute},
		{Func: query.FuncRate, Range: 5 * time.Minute, K: 2, Grouping: []string{"job"}},
		{Func: query.FuncSelect, Agg: query.AggCountValues, ValueLabel: "v"},
	} {
		for name, db := range map[string]*storage.Database{"base": base, "unused": unused, "changed": changed} {
			full, dig := evaluate(db, pd, false), evaluate(db, pd, true)
			require.NotZero(t, full.Digest, "%s %+v", name, pd)
			require.Equal(t, full.Digest, dig.Digest, "%s %+v: the part's replicas read the same samples", name, pd)
			require.True(t, dig.DigestOnly)
			require.Nil(t, dig.Groups)
			require.Equal(t, full.Series, dig.Series)
		}
		b, u, c := evaluate(base, pd, false), evaluate(unused, pd, false), evaluate(changed, pd, false)
		require.Equal(t, b.Groups, u.Groups, "%+v: a sample after the last step changes no answer", pd)
		require.NotEqual(t, b.Digest, u.Digest, "%+v: ... but it was read", pd)
		require.NotEqual(t, b.Digest, c.Digest, "%+v", pd)
	}
}

// BenchmarkPartDigest: what a replica pays for a part it answers in full
// and for one it is asked only the digest of, over the same 20,000 series
// x 120 samples (sub-benchmarks full and digest; compare their ns/op).
// Before the digest was of the samples, a digest-only part cost what a
// full one did. parts is a host's call at unstrict_majority on three
// nodes: half the shards in full, the other half's digest, one read.
func BenchmarkPartDigest(b *testing.B) {
	// A fixed clock: the 30 minutes of samples lie in one block whatever
	// the time of day (across a block boundary each series would read
	// two buckets, and the figures would move with the wall clock).
	clock := time.Date(2026, 11, 22, 10, 31, 0, 0, time.UTC)
	db := storagetest.Open(b, 16, func() time.Time { return clock })
	now := clock.Add(-time.Minute).UnixMilli()
	var fs []storage.Sample
	for i := range 20_000 {
		id := ident.FromLabels(labels.FromStrings("__name__", "node_cpu_seconds_total", "mode", fmt.Sprint("m", i%8),
			"instance", fmt.Sprintf("10.0.%d.%d:9100", i/2000, i%250), "cpu", fmt.Sprint(i%16), "job", "node"))
		for k := range 120 {
			fs = append(fs, storage.Sample{ID: id, Shard: db.Shard(id), T: now - int64(119-k)*15_000, V: float64(i + k*k)})
		}
		if len(fs) > 100_000 {
			require.NoError(b, db.WriteBatch("default", fs))
			fs = fs[:0]
		}
	}
	require.NoError(b, db.WriteBatch("default", fs))
	opts := promapi.Options{MaxSamples: 50_000_000}
	for _, q := range []struct {
		name string
		pd   query.Pushdown
	}{
		{"sum_by_mode_rate", query.Pushdown{Func: query.FuncRate, Range: 5 * time.Minute, Agg: query.AggSum, Grouping: []string{"mode"}}},
		{"count_by_mode", query.Pushdown{Func: query.FuncSelect, Agg: query.AggCount, Grouping: []string{"mode"}}},
	} {
		for _, digestOnly := range []bool{false, true} {
			name := q.name + "/full"
			if digestOnly {
				name = q.name + "/digest"
			}
			req := &query.Request{Namespace: "default",
				Matchers: []*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, "__name__", "node_cpu_seconds_total")},
				Steps:    query.Steps{Start: now - 20*60_000, End: now, Step: 15_000, Lookback: 300_000},
				Pushdown: q.pd, DigestOnly: digestOnly}
			b.Run(name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := promapi.Evaluate(b.Context(), shardReader{db: db, shards: func(uint32) bool { return true }}, req, opts); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
		req := &query.Request{Namespace: "default",
			Matchers: []*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, "__name__", "node_cpu_seconds_total")},
			Steps:    query.Steps{Start: now - 20*60_000, End: now, Step: 15_000, Lookback: 300_000},
			Pushdown: q.pd}
		parts := []rpc.Part{{Shards: func(sh uint32) bool { return sh%2 == 0 }}, {Shards: func(sh uint32) bool { return sh%2 == 1 }, DigestOnly: true}}
		b.Run(q.name+"/parts", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := evaluateParts(b.Context(), db, req, parts, opts); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
