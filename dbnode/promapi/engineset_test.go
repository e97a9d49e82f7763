package promapi

import (
	"context"
	"net/http/httptest"
	"net/url"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/dbnode/httpapi"
	"github.com/tessera-tsdb/tessera/dbnode/httpapi/httpapitest"
	"github.com/tessera-tsdb/tessera/dbnode/query"
	tstorage "github.com/tessera-tsdb/tessera/dbnode/storage"
	"github.com/tessera-tsdb/tessera/dbnode/storage/storagetest"
)

// countingReader counts the reads (Query calls) that reach storage.
type countingReader struct {
	query.Reader
	reads atomic.Int64
}

func (c *countingReader) Query(ctx context.Context, ns string, ms []*labels.Matcher, start, end int64) ([]tstorage.SeriesIterator, error) {
	c.reads.Add(1)
	return c.Reader.Query(ctx, ns, ms, start, end)
}

// A selection holding native histograms is decided on before a sample
// is decoded and computed by the engine over that one read: storage is
// read once per selector, the query is never declined and run again
// (which read storage twice), and the answer is the engine's over
// Prometheus' own chunks.
func TestHistogramSelectionIsReadOnce(t *testing.T) {
	start := time.Now().Add(-dsSpan - 10*time.Minute).Truncate(time.Hour).UnixMilli()
	end := start + dsSpan.Milliseconds()
	series := genHistograms(start, end)
	now := time.UnixMilli(end + 30_000)
	db := storagetest.Open(t, 64, func() time.Time { return now })
	h := httpapitest.New(t, httpapi.Options{Namespace: "default", NumShards: 64, Backend: httpapi.Local{DB: db}})
	reader := &countingReader{Reader: httpapi.Local{DB: db}}
	api := newAPI(t, reader, Options{})
	api.Register(h.Mux())
	srv := httptest.NewServer(h.Handler())
	t.Cleanup(func() {
		srv.Close()
		require.NoError(t, db.Close())
	})
	node := &tesseraNode{srv: srv, db: db}
	node.remoteWriteMixed(t, series, start, end)
	ref := &refStorage{}
	for _, s := range series {
		ref.addMixed(t, s)
	}
	engine := promql.NewEngine(testOptions(Options{}).resolved().engineOpts())

	queries := []string{
		`req_latency_seconds`,
		`rate(req_latency_seconds[5m])`,
		`sum by (job) (rate(req_latency_seconds[5m]))`,
		`histogram_quantile(0.9, sum by (job) (rate(req_latency_float_seconds[5m])))`,
		`histogram_quantile(0.99, rate(req_nhcb_seconds[5m]))`,
		`count_over_time(mixed_metric[30m])`,
		`avg(rate(req_latency_seconds[5m]))`,
		`topk(2, req_latency_seconds)`,
	}
	ts, step := start+75*60*1000+4_321, 37*time.Second
	for _, q := range queries {
		t.Run(q, func(t *testing.T) {
			reads, declined, byEngine := reader.reads.Load(), api.fastStats.declined.Load(), api.fastStats.engine.Load()
			qry, err := engine.NewInstantQuery(context.Background(), ref, nil, q, time.UnixMilli(ts))
			require.NoError(t, err)
			compareResult(t, srv.URL, "/api/v1/query", url.Values{"query": {q}, "time": {fmtTime(ts, false)}}, q, qry.Exec(context.Background()))
			qry.Close()
			qry, err = engine.NewRangeQuery(context.Background(), ref, nil, q, time.UnixMilli(start), time.UnixMilli(end), step)
			require.NoError(t, err)
			p := url.Values{"query": {q}, "start": {fmtTime(start, false)}, "end": {fmtTime(end, true)},
				"step": {strconv.FormatFloat(step.Seconds(), 'f', -1, 64)}}
			compareResult(t, srv.URL, "/api/v1/query_range", p, q, qry.Exec(context.Background()))
			qry.Close()
			require.Equal(t, int64(2), reader.reads.Load()-reads, "one read per query (one selector, instant and range)")
			require.Equal(t, declined, api.fastStats.declined.Load(), "no query declined after its read")
			require.Equal(t, int64(2), api.fastStats.engine.Load()-byEngine, "the engine computed the selection over the fast path's read")
		})
	}
}
