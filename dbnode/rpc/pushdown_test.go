package rpc

import (
	"math"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/dbnode/encoding"
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
	cand := *req
	cand.Agg, cand.K, cand.Bottom = query.AggNone, 3, true
	got, err = requestFromPB(requestToPB(&cand, nil))
	require.NoError(t, err)
	require.Equal(t, cand.Pushdown, got.Pushdown, "topk candidates by (job, mode)")
	cv := *req
	cv.Agg, cv.ValueLabel = query.AggCountValues, "v"
	got, err = requestFromPB(requestToPB(&cv, nil))
	require.NoError(t, err)
	require.Equal(t, cv.Pushdown, got.Pushdown, "count_values by (job, mode)")
	dw, err := resultToPB(&query.Result{Steps: 5, Series: 3, Digest: 7, DigestOnly: true}, false, streams{sums: true, comps: true})
	require.NoError(t, err)
	d, err := resultFromPB(dw, 5)
	require.NoError(t, err)
	require.Equal(t, &query.Result{Steps: 5, Series: 3, Digest: 7, DigestOnly: true, Groups: []query.Partial{}}, d)

	res := &query.Result{Steps: 5, Series: 9, Digest: 42, NonCounters: []string{"x"}, Warnings: []string{"w"}, Groups: []query.Partial{
		{Labels: labels.FromStrings("job", "a", "mode", "idle"), Count: []float64{1, 0, 2, 3, 200}, Sum: []float64{1, 0, 2, 3, 4}, Comp: []float64{0, 0, 1e-17, 0, 0}},
		{Labels: labels.FromStrings("job", "b"), Count: []float64{1, 1, 1, 1, 1}, Sum: []float64{5, 6, 7, 8, 9}, Comp: make([]float64, 5)},
	}}
	wire, err := resultToPB(res, false, streams{sums: false, comps: false})
	require.NoError(t, err)
	require.Nil(t, wire.Groups[1].Comp, "zero compensations are left out")
	b, err := proto.Marshal(wire)
	require.NoError(t, err)
	var back nodepb.PushdownResponse
	require.NoError(t, proto.Unmarshal(b, &back))
	out, err := resultFromPB(&back, 5)
	require.NoError(t, err)
	require.Equal(t, res, out)

	// Without an aggregation each group is one series: its step values
	// cross as an encoded stream (NaN and -0 kept bit for bit), no counts
	// or sums; a gauge holding its value costs a few bits a step.
	steady := make([]float64, 120)
	for k := range steady {
		steady[k] = 1.5e9
	}
	ones := make([]float64, 120)
	for k := range ones {
		ones[k] = 1
	}
	series := &query.Result{Steps: 120, Series: 2, Groups: []query.Partial{
		{Labels: labels.FromStrings("i", "a"), Count: append([]float64{0, 1, 1, 1}, make([]float64, 116)...),
			Sum: append([]float64{0, math.NaN(), math.Copysign(0, -1), math.Inf(-1)}, make([]float64, 116)...), Comp: make([]float64, 120)},
		{Labels: labels.FromStrings("i", "b"), Count: ones, Sum: steady, Comp: make([]float64, 120)},
	}}
	swire, err := resultToPB(series, true, streams{sums: true, comps: true})
	require.NoError(t, err)
	require.Nil(t, swire.Groups[0].Count)
	require.Nil(t, swire.Groups[0].Sum)
	require.Less(t, len(swire.Groups[1].Values), 120, "a steady gauge: bits a step, not 9 bytes")
	sb, err := proto.Marshal(swire)
	require.NoError(t, err)
	var sback nodepb.PushdownResponse
	require.NoError(t, proto.Unmarshal(sb, &sback))
	sout, err := resultFromPB(&sback, 120)
	require.NoError(t, err)
	require.Equal(t, series.Groups[1], sout.Groups[1])
	require.Equal(t, series.Groups[0].Count, sout.Groups[0].Count)
	for k, v := range series.Groups[0].Sum {
		require.Equal(t, math.Float64bits(v), math.Float64bits(sout.Groups[0].Sum[k]), "step %d", k)
	}

	// Asked for (sum_streams), an aggregation's sums cross as a stream
	// at the steps with a count, bit for bit; steady sums take bits a
	// step, not 8 bytes.
	agg := &query.Result{Steps: 120, Series: 240, Groups: []query.Partial{
		{Labels: labels.FromStrings("i", "a"), Count: append([]float64{0, 2, 2, 2}, make([]float64, 116)...),
			Sum: append([]float64{0, math.NaN(), math.Copysign(0, -1), math.Inf(-1)}, make([]float64, 116)...), Comp: make([]float64, 120)},
		{Labels: labels.FromStrings("i", "b"), Count: ones, Sum: steady, Comp: append([]float64{1e-17}, make([]float64, 119)...)},
	}}
	awire, err := resultToPB(agg, false, streams{sums: true, comps: false})
	require.NoError(t, err)
	require.Nil(t, awire.Groups[1].Sum)
	require.Less(t, len(awire.Groups[1].Sums), 120, "steady sums: bits a step, not 8 bytes")
	ab, err := proto.Marshal(awire)
	require.NoError(t, err)
	var aback nodepb.PushdownResponse
	require.NoError(t, proto.Unmarshal(ab, &aback))
	aout, err := resultFromPB(&aback, 120)
	require.NoError(t, err)
	require.Equal(t, agg.Groups[1], aout.Groups[1])
	require.Equal(t, agg.Groups[0].Count, aout.Groups[0].Count)
	for k, v := range agg.Groups[0].Sum {
		require.Equal(t, math.Float64bits(v), math.Float64bits(aout.Groups[0].Sum[k]), "step %d", k)
	}
	require.True(t, requestToPB(req, nil).GetSumStreams(), "this node reads sum streams")

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

// TestPushdownCompStreams: asked for (comp_streams), a group's Kahan
// compensations cross as a stream, bit for bit (-0 kept, +0 left out),
// in fewer bytes than their doubles when they have few significant bits;
// an answer without the stream (an older node's doubles) reads as before.
func TestPushdownCompStreams(t *testing.T) {
	const steps = 120
	count, sum, comp := make([]float64, steps), make([]float64, steps), make([]float64, steps)
	for k := range steps {
		count[k], sum[k] = 3, 1.5+float64(k)*0.37
		if k%4 != 0 {
			comp[k] = math.Ldexp(float64(k%7+1), -60) // a rounding error: few significant bits
		}
	}
	comp[5] = math.Copysign(0, -1)
	res := &query.Result{Steps: steps, Series: 6, Groups: []query.Partial{
		{Labels: labels.FromStrings("i", "a"), Count: count, Sum: sum, Comp: comp},
		{Labels: labels.FromStrings("i", "b"), Count: count, Sum: sum, Comp: make([]float64, steps)},
	}}
	streamed, err := resultToPB(res, false, streams{sums: true, comps: true})
	require.NoError(t, err)
	doubles, err := resultToPB(res, false, streams{sums: true, comps: false})
	require.NoError(t, err)
	require.Nil(t, streamed.Groups[0].Comp)
	require.Less(t, len(streamed.Groups[0].Comps), 8*len(doubles.Groups[0].Comp)/2, "few bits a compensation")
	require.Nil(t, streamed.Groups[1].Comps, "zero compensations are left out")
	for _, wire := range []*nodepb.PushdownResponse{streamed, doubles} {
		b, err := proto.Marshal(wire)
		require.NoError(t, err)
		var back nodepb.PushdownResponse
		require.NoError(t, proto.Unmarshal(b, &back))
		out, err := resultFromPB(&back, steps)
		require.NoError(t, err)
		require.Len(t, out.Groups, 2)
		for g := range out.Groups {
			for k, c := range res.Groups[g].Comp {
				require.Equal(t, math.Float64bits(c), math.Float64bits(out.Groups[g].Comp[k]), "group %d step %d", g, k)
			}
		}
	}
	require.Less(t, proto.Size(streamed), proto.Size(doubles))
	require.True(t, requestToPB(&query.Request{}, nil).GetCompStreams(), "this node reads compensation streams")

	streamed.Groups[0].Comps = streamed.Groups[0].Comps[:3]
	_, err = resultFromPB(streamed, steps)
	require.ErrorContains(t, err, "compensations")
}

// TestPushdownCountStreams: asked for (count_streams), a group's counts
// cross as a stream (steady counts: bits a step), read back exactly with
// the sums and compensations; a group with no count at any step sends
// its counts as varints; a count that is not a whole number is refused.
func TestPushdownCountStreams(t *testing.T) {
	const steps = 120
	count, sum, comp := make([]float64, steps), make([]float64, steps), make([]float64, steps)
	for k := range steps {
		if k%10 != 3 {
			count[k], sum[k] = float64(3+k/60), 1.5+float64(k)*0.37
			comp[k] = math.Ldexp(1, -60)
		}
	}
	res := &query.Result{Steps: steps, Series: 4, Groups: []query.Partial{
		{Labels: labels.FromStrings("i", "a"), Count: count, Sum: sum, Comp: comp},
		{Labels: labels.FromStrings("i", "z"), Count: make([]float64, steps), Sum: make([]float64, steps), Comp: make([]float64, steps)},
	}}
	all, err := resultToPB(res, false, streams{sums: true, comps: true, counts: true})
	require.NoError(t, err)
	varints, err := resultToPB(res, false, streams{sums: true, comps: true})
	require.NoError(t, err)
	require.Nil(t, all.Groups[0].Count)
	require.Less(t, len(all.Groups[0].Counts), steps*2/3, "steady counts with gaps: fewer bytes than a varint a step")
	require.Nil(t, all.Groups[1].Counts)
	require.Len(t, all.Groups[1].Count, steps, "no count at any step: varints")
	require.Less(t, proto.Size(all), proto.Size(varints))
	b, err := proto.Marshal(all)
	require.NoError(t, err)
	var back nodepb.PushdownResponse
	require.NoError(t, proto.Unmarshal(b, &back))
	out, err := resultFromPB(&back, steps)
	require.NoError(t, err)
	require.Equal(t, res, out)
	require.True(t, requestToPB(&query.Request{}, nil).GetCountStreams(), "this node reads count streams")

	var enc encoding.Encoder
	require.NoError(t, enc.Append(0, 1.5))
	back.Groups[0].Counts = enc.Bytes()
	_, err = resultFromPB(&back, steps)
	require.ErrorContains(t, err, "count 1.5")
}
