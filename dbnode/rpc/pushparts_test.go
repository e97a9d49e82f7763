package rpc

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"

	"github.com/tessera-tsdb/tessera/dbnode/commitlog"
	"github.com/tessera-tsdb/tessera/dbnode/query"
)

// shardsEvaluator answers for the shards a filter accepts out of
// 0..testShards-1: Series their count, Digest their sum, one group whose
// count at step 0 is the first shard accepted; DigestOnly as asked.
func shardsEvaluator(calls *atomic.Int64) Evaluator {
	return func(_ context.Context, req *query.Request, shards func(uint32) bool) (*query.Result, error) {
		calls.Add(1)
		r := &query.Result{Steps: req.Steps.Count()}
		first := -1
		for sh := range uint32(testShards) {
			if shards(sh) {
				r.Series++
				r.Digest += uint64(sh)
				if first < 0 {
					first = int(sh)
				}
			}
		}
		if req.DigestOnly {
			r.DigestOnly = true
			return r, nil
		}
		g := query.Partial{Labels: labels.FromStrings("job", "x"), Count: make([]float64, r.Steps), Sum: make([]float64, r.Steps)}
		g.Count[0], g.Sum[0] = 1, float64(first)
		r.Groups = []query.Partial{g}
		return r, nil
	}
}

// TestPushdownPartsOneCall: a request of several parts is answered in one
// call, each part as a request for its shards alone is; a node without
// parts (older) answers the first and the client asks the others apart,
// with the same answers.
func TestPushdownPartsOneCall(t *testing.T) {
	req := &query.Request{Namespace: testNS,
		Matchers: []*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, "__name__", "m")},
		Steps:    query.Steps{Start: 1000, End: 31_000, Step: 15_000, Lookback: 300_000},
		Pushdown: query.Pushdown{Func: query.FuncSelect, Agg: query.AggSum}}
	parts := []PartRequest{{Shards: []uint32{1, 4, 9}}, {Shards: []uint32{2, 5}, DigestOnly: true}, {Shards: []uint32{7}}}

	var single, multi atomic.Int64
	eval := shardsEvaluator(&single)
	db := openStorage(t, commitlog.ModeSync)
	older := serve(t, db, nil, ServerOptions{Pushdown: eval}, ClientOptions{})
	var want []*query.Result
	for _, p := range parts {
		r := *req
		r.DigestOnly = p.DigestOnly
		res, err := older.Pushdown(t.Context(), &r, p.Shards)
		require.NoError(t, err)
		want = append(want, res)
	}
	single.Store(0)

	newer := serve(t, db, nil, ServerOptions{Pushdown: eval, PushdownParts: func(ctx context.Context, req *query.Request, ps []Part) ([]*query.Result, error) {
		multi.Add(1)
		var out []*query.Result
		for _, p := range ps {
			r := *req
			r.DigestOnly = p.DigestOnly
			res, err := eval(ctx, &r, p.Shards)
			if err != nil {
				return nil, err
			}
			out = append(out, res)
		}
		return out, nil
	}}, ClientOptions{})
	for _, c := range []struct {
		name        string
		client      *Client
		calls, mult int64
	}{{"newer", newer, 3, 1}, {"older", older, 3, 0}} {
		single.Store(0)
		multi.Store(0)
		got, err := c.client.PushdownParts(t.Context(), req, parts)
		require.NoError(t, err, c.name)
		require.Len(t, got, len(parts))
		for i := range got {
			require.Positive(t, got[i].WireBytes)
			got[i].WireBytes, want[i].WireBytes = 0, 0
			require.Equal(t, want[i], got[i], "%s part %d", c.name, i)
		}
		require.Equal(t, c.calls, single.Load(), c.name)
		require.Equal(t, c.mult, multi.Load(), "%s: calls of PushdownParts", c.name)
	}
	require.True(t, want[1].DigestOnly)
	require.Empty(t, want[1].Groups)
	require.EqualValues(t, 3, want[0].Series)

	_, err := newer.PushdownParts(t.Context(), req, []PartRequest{{Shards: []uint32{1}}, {Shards: nil}})
	require.ErrorContains(t, err, "part 1 asks no shards")
}
