package rpc

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/dbnode/commitlog"
	"github.com/tessera-tsdb/tessera/dbnode/exemplars"
	"github.com/tessera-tsdb/tessera/dbnode/metadata"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
	"github.com/tessera-tsdb/tessera/ident"
	"github.com/tessera-tsdb/tessera/limits"
	"github.com/tessera-tsdb/tessera/limits/limitstest"
	"github.com/uber-go/tally/v4"
	"google.golang.org/grpc/codes"
)

func rawID(kv ...string) []byte {
	var pairs []ident.Pair
	for i := 0; i < len(kv); i += 2 {
		pairs = append(pairs, ident.Pair{Name: []byte(kv[i]), Value: []byte(kv[i+1])})
	}
	return ident.AppendSortedPairs(nil, pairs)
}

// openLimited is openStorage with limits (the active-series limit lives
// in storage).
func openLimited(t *testing.T, l *limits.Limits) *storage.Database {
	t.Helper()
	opts := testStorageOptions(t.TempDir(), commitlog.ModeAsync)
	opts.Limits = l
	db, err := storage.Open(opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, db.Close()) })
	return db
}

// TestWriteBatchValidatesAsHTTP: a client reaching the RPC port directly
// cannot write what HTTP remote write refuses. Each batch goes through a
// real gRPC connection and holds a good series too: the batch is refused
// whole, nothing stored.
func TestWriteBatchValidatesAsHTTP(t *testing.T) {
	scope := tally.NewTestScope("", nil)
	l := limits.New(limits.Config{MaxLabelNameLength: 8, MaxLabelValueLength: 16, MaxLabelNamesPerSeries: 3}, scope.SubScope("limits"))
	db := openLimited(t, l)
	c := serve(t, db, nil, ServerOptions{Limits: l}, ClientOptions{})
	good := writeSeries(seriesID("cpu", "host", "a"), samplesNearNow(2, 0))
	for _, tc := range []struct {
		name, limit, want string
		id                []byte
	}{
		{"no __name__", "", "series has no __name__ label", rawID("job", "x")},
		{"empty __name__", "", "series has no __name__ label", rawID("__name__", "", "job", "x")},
		{"invalid UTF-8 name", "", "is not valid UTF-8", rawID("__name__", "cpu", "\xff", "x")},
		{"invalid UTF-8 value", "", "is not valid UTF-8", rawID("__name__", "cpu", "job", "\xc3")},
		{"duplicate name", "", "duplicate label name", rawID("__name__", "cpu", "job", "a", "job", "b")},
		{"label name length", limits.LabelNameLength, "exceeds limits.maxLabelNameLength=8", rawID("__name__", "cpu", "ninechars", "x")},
		{"label value length", limits.LabelValueLength, "exceeds limits.maxLabelValueLength=16", rawID("__name__", "cpu", "job", strings.Repeat("v", 17))},
		{"labels per series", limits.LabelNamesPerSeries, "series with 4 labels exceeds limits.maxLabelNamesPerSeries=3", rawID("__name__", "cpu", "a", "1", "b", "2", "c", "3")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := limitstest.Refused(scope, tc.limit)
			bad := writeSeries(tc.id, samplesNearNow(1, 0))
			_, err := writeReq(context.Background(), c, &WriteRequest{Namespace: testNS, Series: []WriteSeries{good, bad}})
			requireCode(t, err, codes.InvalidArgument, tc.want)
			require.Contains(t, err.Error(), "series 1: ", "names the series entry refused")
			if tc.limit != "" {
				require.Equal(t, before+1, limitstest.Refused(scope, tc.limit))
			}
			require.Zero(t, db.ActiveSeries(), "nothing of a refused batch is stored")
		})
	}
	res, err := writeReq(context.Background(), c, &WriteRequest{Namespace: testNS, Series: []WriteSeries{good}})
	require.NoError(t, err)
	require.Equal(t, 2, res.Written)
}

// TestWriteBatchActiveSeriesLimit: a replica at limits.maxActiveSeries
// still writes the series it holds and reports the new ones rejected,
// naming the limit.
func TestWriteBatchActiveSeriesLimit(t *testing.T) {
	l := limits.New(limits.Config{MaxActiveSeries: 1}, nil)
	db := openLimited(t, l)
	c := serve(t, db, nil, ServerOptions{Limits: l}, ClientOptions{})
	held := writeSeries(seriesID("cpu", "host", "a"), samplesNearNow(2, 0))
	res, err := writeReq(context.Background(), c, &WriteRequest{Namespace: testNS, Series: []WriteSeries{held}})
	require.NoError(t, err)
	require.Equal(t, 2, res.Written)
	held.Samples = samplesNearNow(3, 10)
	res, err = writeReq(context.Background(), c, &WriteRequest{Namespace: testNS, Series: []WriteSeries{
		held, writeSeries(seriesID("cpu", "host", "b"), samplesNearNow(2, 0))}})
	require.NoError(t, err)
	require.Equal(t, 3, res.Written)
	require.Equal(t, 2, res.Rejected)
	require.Equal(t, 2, res.RejectedSeriesLimit, "a retry may store them")
	require.Contains(t, res.RejectMsg, "limits.maxActiveSeries=1")
	require.Contains(t, res.RejectMsg, `host="b"`)
	require.EqualValues(t, 1, db.ActiveSeries())
}

// TestRequestItemLimits: node RPC bounds what one request may name or
// carry as HTTP does, refusing with InvalidArgument naming the limit:
// IDs per Fetch (a fetch of 200,000 IDs held a server for seconds), bytes
// per metadata record (an 8 MiB help text was stored) and characters per
// exemplar label set (OpenMetrics' 128).
func TestRequestItemLimits(t *testing.T) {
	l := limits.New(limits.Config{MaxSeriesPerFetch: 3, MaxMetadataLength: 1024}, nil)
	db := openLimited(t, l)
	ex, meta := exemplars.New(100), metadata.New(100)
	c := serve(t, db, nil, ServerOptions{Limits: l, Exemplars: ex, Metadata: meta}, ClientOptions{})
	ctx := context.Background()

	ids := [][]byte{seriesID("a"), seriesID("b"), seriesID("c")}
	_, err := c.Fetch(ctx, &FetchRequest{Namespace: testNS, IDs: ids, End: 1})
	require.NoError(t, err, "at the limit")
	_, err = c.Fetch(ctx, &FetchRequest{Namespace: testNS, IDs: append(ids, seriesID("d")), End: 1})
	requireCode(t, err, codes.InvalidArgument, "fetch of 4 series IDs exceeds limits.maxSeriesPerFetch=3")

	err = c.MetadataWrite(ctx, []metadata.Record{
		{Metric: "ok_total", Entry: metadata.Entry{Type: model.MetricTypeCounter, Help: strings.Repeat("h", 1024)}},
		{Metric: "big_total", Entry: metadata.Entry{Type: model.MetricTypeCounter, Help: strings.Repeat("h", 8<<20)}},
	})
	requireCode(t, err, codes.InvalidArgument, `metadata entry 1: metadata of "big_total": help of 8388608 bytes exceeds limits.maxMetadataLength=1024`)
	require.Zero(t, meta.Len(), "nothing of a refused request is stored")

	id := ident.FromLabels(labels.FromStrings("__name__", "req_total"))
	_, err = c.ExemplarsWrite(ctx, []exemplars.Item{
		{SeriesID: id, Labels: labels.FromStrings("trace_id", strings.Repeat("t", 120)), V: 1, T: 1},
		{SeriesID: id, Labels: labels.FromStrings("trace_id", strings.Repeat("t", 121)), V: 1, T: 2},
	})
	requireCode(t, err, codes.InvalidArgument, "exemplar 1: exemplar labels of 129 UTF-8 characters exceed OpenMetrics' limit of 128")
	require.Zero(t, ex.Len())
}
