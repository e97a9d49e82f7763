package node

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/dbnode/promapi"
	"github.com/tessera-tsdb/tessera/dbnode/query"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
	"github.com/tessera-tsdb/tessera/dbnode/storage/storagetest"
	"github.com/tessera-tsdb/tessera/ident"
)

// readCounter counts the reads of a replica's evaluator that returned
// series: those that read their samples' blocks.
type readCounter struct {
	query.Reader
	reads atomic.Int64
}

func (r *readCounter) Query(ctx context.Context, ns string, ms []*labels.Matcher, start, end int64) ([]storage.SeriesIterator, error) {
	its, err := r.Reader.Query(ctx, ns, ms, start, end)
	if err == nil {
		r.reads.Add(1)
	}
	return its, err
}

// TestReplicaDeclinesHistogramsBeforeReading: a replica asked to push
// down a selection holding native histograms declines it without reading
// it (its coordinator reads the series raw: that is their one read); a
// selection of floats is read once and computed.
func TestReplicaDeclinesHistogramsBeforeReading(t *testing.T) {
	db := storagetest.Open(t, 4, nil)
	now := time.Now().Add(-time.Minute).UnixMilli()
	h := ident.FromLabels(labels.FromStrings("__name__", "mix", "k", "h"))
	f := ident.FromLabels(labels.FromStrings("__name__", "mix", "k", "f"))
	var (
		hs []storage.HistogramSample
		fs []storage.Sample
	)
	for i := range 4 {
		ts := now - int64(3-i)*15_000
		hs = append(hs, storage.HistogramSample{ID: h, Shard: db.Shard(h), T: ts,
			H: &histogram.Histogram{Count: uint64(i + 1), ZeroCount: uint64(i + 1), ZeroThreshold: 0.001, Sum: float64(i)}})
		fs = append(fs, storage.Sample{ID: f, Shard: db.Shard(f), T: ts, V: float64(i)})
	}
	require.NoError(t, db.WriteHistograms("default", hs))
	require.NoError(t, db.WriteBatch("default", fs))

	r := &readCounter{Reader: shardReader{db: db, shards: func(uint32) bool { return true }}}
	req := func(k string) *query.Request {
		return &query.Request{Namespace: "default",
			Matchers: []*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, "__name__", "mix"), labels.MustNewMatcher(labels.MatchRegexp, "k", k)},
			Steps:    query.Steps{Start: now - 60_000, End: now, Step: 15_000, Lookback: 300_000},
			Pushdown: query.Pushdown{Func: query.FuncSelect, Agg: query.AggCount}}
	}
	opts := promapi.Options{MaxSamples: 1_000_000}
	_, err := promapi.Evaluate(t.Context(), r, req("h|f"), opts)
	require.ErrorIs(t, err, query.ErrDeclined)
	require.Zero(t, r.reads.Load(), "declined before reading")

	res, err := promapi.Evaluate(t.Context(), r, req("f"), opts)
	require.NoError(t, err)
	require.Equal(t, int64(1), r.reads.Load())
	require.Equal(t, 1, res.Series)
}
