package node

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/dbnode/promapi"
	"github.com/tessera-tsdb/tessera/dbnode/query"
	"github.com/tessera-tsdb/tessera/dbnode/rpc"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
	"github.com/tessera-tsdb/tessera/dbnode/storage/storagetest"
	"github.com/tessera-tsdb/tessera/ident"
)

// TestEvaluatePartsAsApart: several parts computed from one read answer
// each as the part computed alone does (groups, series, digest, digest
// only as asked); a part holding histograms declines them all.
func TestEvaluatePartsAsApart(t *testing.T) {
	db := storagetest.Open(t, 4, nil)
	now := time.Now().Add(-time.Minute).UnixMilli()
	var fs []storage.Sample
	for i := range 40 {
		id := ident.FromLabels(labels.FromStrings("__name__", "m", "job", fmt.Sprint(i%3), "i", fmt.Sprint(i)))
		for k := range 4 {
			fs = append(fs, storage.Sample{ID: id, Shard: db.Shard(id), T: now - int64(3-k)*15_000, V: float64(i*k + 1)})
		}
	}
	require.NoError(t, db.WriteBatch("default", fs))
	opts := promapi.Options{MaxSamples: 1_000_000}
	shardsOf := func(mod uint32) func(uint32) bool { return func(sh uint32) bool { return sh%2 == mod } }
	parts := []rpc.Part{{Shards: shardsOf(0)}, {Shards: shardsOf(1), DigestOnly: true}}
	for _, pd := range []query.Pushdown{
		{Func: query.FuncSelect, Agg: query.AggSum, Grouping: []string{"job"}},
		{Func: query.FuncRate, Range: time.Minute, Agg: query.AggCount},
		{Func: query.FuncSelect},
	} {
		req := &query.Request{Namespace: "default",
			Matchers: []*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, "__name__", "m")},
			Steps:    query.Steps{Start: now - 45_000, End: now, Step: 15_000, Lookback: 300_000},
			Pushdown: pd}
		got, err := evaluateParts(t.Context(), db, req, parts, opts)
		require.NoError(t, err)
		require.Len(t, got, 2)
		total := 0
		for i, p := range parts {
			r := *req
			r.DigestOnly = p.DigestOnly
			want, err := promapi.Evaluate(t.Context(), shardReader{db: db, shards: p.Shards}, &r, opts)
			require.NoError(t, err)
			require.Equal(t, want, got[i], "%+v part %d", pd, i)
			require.Positive(t, got[i].Series)
			total += got[i].Series
		}
		require.Equal(t, 40, total)
		require.True(t, got[1].DigestOnly)
	}

	h := ident.FromLabels(labels.FromStrings("__name__", "m", "job", "h"))
	require.NoError(t, db.WriteHistograms("default", []storage.HistogramSample{{ID: h, Shard: db.Shard(h), T: now,
		H: &histogram.Histogram{Count: 1, ZeroCount: 1, ZeroThreshold: 0.001, Sum: 1}}}))
	req := &query.Request{Namespace: "default",
		Matchers: []*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, "__name__", "m")},
		Steps:    query.Steps{Start: now - 45_000, End: now, Step: 15_000, Lookback: 300_000},
		Pushdown: query.Pushdown{Func: query.FuncSelect, Agg: query.AggCount}}
	_, err := evaluateParts(t.Context(), db, req, parts, opts)
	require.ErrorIs(t, err, query.ErrDeclined)
}
