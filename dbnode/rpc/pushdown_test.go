package rpc

import (
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
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

	res := &query.Result{Steps: 5, Series: 9, Digest: 42, NonCounters: []string{"x"}, Warnings: []string{"w"}, Groups: []query.Partial{
		{Labels: labels.FromStrings("job", "a", "mode", "idle"), Count: []float64{1, 0, 2, 3, 200}, Sum: []float64{1, 0, 2, 3, 4}, Comp: []float64{0, 0, 1e-17, 0, 0}},
		{Labels: labels.FromStrings("job", "b"), Count: []float64{1, 1, 1, 1, 1}, Sum: []float64{5, 6, 7, 8, 9}, Comp: make([]float64, 5)},
	}}
	wire := resultToPB(res)
	require.Nil(t, wire.Groups[1].Comp, "zero compensations are left out")
	b, err := proto.Marshal(wire)
	require.NoError(t, err)
	var back nodepb.PushdownResponse
	require.NoError(t, proto.Unmarshal(b, &back))
	out, err := resultFromPB(&back, 5)
	require.NoError(t, err)
	require.Equal(t, res, out)

	back.Groups[0].Count = back.Groups[0].Count[:4]
	_, err = resultFromPB(&back, 5)
	require.ErrorContains(t, err, "4 counts")

	pb.Agg = 0
	_, err = requestFromPB(pb)
	require.ErrorContains(t, err, "without an aggregation")
	pb.Agg, pb.Grouping = 3, []string{"mode", "job"}
	_, err = requestFromPB(pb)
	require.ErrorContains(t, err, "not sorted")
}
