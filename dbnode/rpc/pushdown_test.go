package rpc

import (
	"math"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/dbnode/query"
	"github.com/tessera-tsdb/tessera/dbnode/rpc/nodepb"
	"google.golang.org/protobuf/proto"
)

// TestPushdownRoundTrip: a request and a result cross the wire unchanged
// (a compensation zero at every step is left out and comes back as
// zeros); malformed requests and answers are refused naming why.
func TestPushdownRoundTrip(t *testing.T) {
	req := &query.Request{Namespace: "default",
		Matchers: []*labels.Matcher{labels.MustNewMatcher(labels.MatchRegexp, "__name__", "node_.*")},
		Steps:    query.Steps{Start: 1000, End: 61_000, Step: 15_000, Lookback: 300_000},
		Pushdown: query.Pushdown{Func: query.FuncRate, Range: 5 * time.Minute, Agg: query.AggAvg, Grouping: []string{"job", "mode"}}}
	pb := requestToPB(req, []uint32{3, 7})
	got, err := requestFromPB(pb)
	require.NoError(t, err)
	require.Equal(t, req.Namespace, got.Namespace)
	require.Equal(t, req.Steps, got.Steps)
	require.Equal(t, req.Pushdown, got.Pushdown)
	require.Len(t, got.Matchers, 1)
	require.Equal(t, req.Matchers[0].String(), got.Matchers[0].String())
	require.Equal(t, []uint32{3, 7}, pb.GetShards())
	req.DigestOnly = true
	got, err = requestFromPB(requestToPB(req, nil))
	require.NoError(t, err)
	require.True(t, got.DigestOnly)
	d, err := resultFromPB(resultToPB(&query.Result{Steps: 5, Series: 3, Digest: 7, DigestOnly: true}, false), 5)
	require.NoError(t, err)
	require.Equal(t, &query.Result{Steps: 5, Series: 3, Digest: 7, DigestOnly: true, Groups: []query.Partial{}}, d)

	res := &query.Result{Steps: 5, Series: 9, Digest: 42, NonCounters: []string{"x"}, Warnings: []string{"w"}, Groups: []query.Partial{
		{Labels: labels.FromStrings("job", "a", "mode", "idle"), Count: []float64{1, 0, 2, 3, 200}, Sum: []float64{1, 0, 2, 3, 4}, Comp: []float64{0, 0, 1e-17, 0, 0}},
		{Labels: labels.FromStrings("job", "b"), Count: []float64{1, 1, 1, 1, 1}, Sum: []float64{5, 6, 7, 8, 9}, Comp: make([]float64, 5)},
	}}
	wire := resultToPB(res, false)
	require.Nil(t, wire.Groups[1].Comp, "zero compensations are left out")
	b, err := proto.Marshal(wire)
	require.NoError(t, err)
	var back nodepb.PushdownResponse
	require.NoError(t, proto.Unmarshal(b, &back))
	out, err := resultFromPB(&back, 5)
	require.NoError(t, err)
	require.Equal(t, res, out)

	// Without an aggregation each group is one series: its counts are
	// left out, a StaleNaN marks a step without a value.
	series := &query.Result{Steps: 4, Series: 2, Groups: []query.Partial{
		{Labels: labels.FromStrings("i", "a"), Count: []float64{0, 1, 1, 0}, Sum: []float64{0, math.NaN(), -0.5, 0}, Comp: make([]float64, 4)},
		{Labels: labels.FromStrings("i", "b"), Count: []float64{1, 1, 1, 1}, Sum: []float64{1, 2, 3, math.Inf(1)}, Comp: make([]float64, 4)},
	}}
	swire := resultToPB(series, true)
	require.Nil(t, swire.Groups[0].Count)
	sb, err := proto.Marshal(swire)
	require.NoError(t, err)
	require.Less(t, len(sb), len(b), "no counts on the wire")
	var sback nodepb.PushdownResponse
	require.NoError(t, proto.Unmarshal(sb, &sback))
	sout, err := resultFromPB(&sback, 4)
	require.NoError(t, err)
	require.Equal(t, series.Groups[1], sout.Groups[1])
	require.Equal(t, series.Groups[0].Count, sout.Groups[0].Count)
	require.True(t, math.IsNaN(sout.Groups[0].Sum[1]) && !value.IsStaleNaN(sout.Groups[0].Sum[1]), "a NaN value stays a value")
	require.Equal(t, []float64{0, -0.5, 0}, []float64{sout.Groups[0].Sum[0], sout.Groups[0].Sum[2], sout.Groups[0].Sum[3]})

	back.Groups[0].Count = back.Groups[0].Count[:4]
	_, err = resultFromPB(&back, 5)
	require.ErrorContains(t, err, "4 counts")

	pb.Agg = 0
	_, err = requestFromPB(pb)
	require.ErrorContains(t, err, "without an aggregation")
	pb.Grouping = nil
	_, err = requestFromPB(pb)
	require.NoError(t, err, "a request without an aggregation asks for each series' step values")
	pb.Agg, pb.Grouping = 3, []string{"mode", "job"}
	_, err = requestFromPB(pb)
	require.ErrorContains(t, err, "not sorted")
}
