package rpc

import (
	"context"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/dbnode/commitlog"
	"github.com/tessera-tsdb/tessera/dbnode/exemplars"
	"github.com/tessera-tsdb/tessera/dbnode/metadata"
	"github.com/tessera-tsdb/tessera/ident"
	"google.golang.org/grpc/codes"
)

// TestAuxRoundTrip writes exemplars and metadata through a real server
// and reads them back with the query methods.
func TestAuxRoundTrip(t *testing.T) {
	db := openStorage(t, commitlog.ModeAsync)
	ex, meta := exemplars.New(100), metadata.New(100)
	c := serve(t, db, nil, ServerOptions{Exemplars: ex, Metadata: meta}, ClientOptions{})
	ctx := context.Background()

	a := labels.FromStrings("__name__", "req_total", "job", "a")
	b := labels.FromStrings("__name__", "req_total", "job", "b")
	items := []exemplars.Item{
		{SeriesID: ident.FromLabels(a), Labels: labels.FromStrings("trace_id", "t1"), V: 1, T: 1000},
		{SeriesID: ident.FromLabels(a), Labels: labels.FromStrings("trace_id", "t2"), V: 2, T: 2000},
		{SeriesID: ident.FromLabels(b), Labels: labels.FromStrings("trace_id", "t3"), V: 3, T: 3000},
	}
	n, err := c.ExemplarsWrite(ctx, items)
	require.NoError(t, err)
	require.Equal(t, 3, n)

	res, err := c.ExemplarsQuery(ctx, 0, 2500, [][]*labels.Matcher{{labels.MustNewMatcher(labels.MatchEqual, "__name__", "req_total")}})
	require.NoError(t, err)
	require.Len(t, res, 1, "b's only exemplar is after end")
	require.Equal(t, a, res[0].SeriesLabels)
	require.Len(t, res[0].Exemplars, 2)
	require.Equal(t, "t2", res[0].Exemplars[1].Labels.Get("trace_id"))
	require.Equal(t, int64(2000), res[0].Exemplars[1].Ts)

	_, err = c.ExemplarsQuery(ctx, 0, 1, [][]*labels.Matcher{{{Type: labels.MatchRegexp, Name: "x", Value: "("}}})
	require.Equal(t, codes.InvalidArgument, Code(err))
	_, err = c.ExemplarsWrite(ctx, []exemplars.Item{{SeriesID: []byte{0xff, 0x01}, V: 1}})
	require.Equal(t, codes.InvalidArgument, Code(err), "an ID that does not decode is refused, named")

	require.NoError(t, c.MetadataWrite(ctx, []metadata.Record{
		{Metric: "req_total", Entry: metadata.Entry{Type: model.MetricTypeCounter, Help: "old"}},
		{Metric: "req_total", Entry: metadata.Entry{Type: model.MetricTypeCounter, Help: "new"}},
		{Metric: "mem_bytes", Entry: metadata.Entry{Type: model.MetricTypeGauge, Unit: "bytes"}},
	}))
	m, err := c.MetadataQuery(ctx, "", -1, -1)
	require.NoError(t, err)
	require.Equal(t, map[string][]metadata.Entry{
		"req_total": {{Type: model.MetricTypeCounter, Help: "new"}, {Type: model.MetricTypeCounter, Help: "old"}},
		"mem_bytes": {{Type: model.MetricTypeGauge, Unit: "bytes"}},
	}, m)
	m, err = c.MetadataQuery(ctx, "req_total", -1, 1)
	require.NoError(t, err)
	require.Equal(t, map[string][]metadata.Entry{"req_total": {{Type: model.MetricTypeCounter, Help: "new"}}}, m)
}

// TestAuxUnimplementedWithoutStores: a node without the stores answers
// as a node older than the methods does, which callers skip.
func TestAuxUnimplementedWithoutStores(t *testing.T) {
	db := openStorage(t, commitlog.ModeAsync)
	c := serve(t, db, nil, ServerOptions{}, ClientOptions{})
	ctx := context.Background()
	_, err := c.ExemplarsWrite(ctx, nil)
	require.Equal(t, codes.Unimplemented, Code(err))
	_, err = c.ExemplarsQuery(ctx, 0, 1, nil)
	require.Equal(t, codes.Unimplemented, Code(err))
	require.Equal(t, codes.Unimplemented, Code(c.MetadataWrite(ctx, nil)))
	_, err = c.MetadataQuery(ctx, "", -1, -1)
	require.Equal(t, codes.Unimplemented, Code(err))
}
