package rpc

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/tessera-tsdb/tessera/dbnode/encoding"
	"github.com/tessera-tsdb/tessera/dbnode/query"
	"github.com/tessera-tsdb/tessera/dbnode/rpc/nodepb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Evaluator computes a pushed-down request over this node's data in the
// shards filter accepts (promapi.Evaluate over the database, wired by the
// node). It returns query.ErrDeclined for a request it does not compute.
type Evaluator func(ctx context.Context, req *query.Request, shards func(uint32) bool) (*query.Result, error)

// Part is one part of a pushed-down request of several: the shards it
// covers and whether only its digest is asked (query.Request.DigestOnly).
type Part struct {
	Shards     func(uint32) bool
	DigestOnly bool
}

// PartsEvaluator computes req for each of parts (disjoint shards) with one
// read of their series, answering each part as an Evaluator asked for its
// shards alone would: a host asked for several parts of a query (the
// coordinator's parts, or another node's for it) reads the index and the
// series once, not once a part. query.ErrDeclined declines every part.
type PartsEvaluator func(ctx context.Context, req *query.Request, parts []Part) ([]*query.Result, error)

// PartRequest is one part of a request as a client asks it.
type PartRequest struct {
	Shards     []uint32
	DigestOnly bool
}

func (v service) Pushdown(ctx context.Context, req *nodepb.PushdownRequest) (*nodepb.PushdownResponse, error) {
	return v.s.pushdown(ctx, req)
}

// pushdown answers a query.Request for the shards asked for, all of which
// must be readable here, with the groups' partial aggregates.
func (s *Server) pushdown(ctx context.Context, p *nodepb.PushdownRequest) (*nodepb.PushdownResponse, error) {
	if s.opts.Pushdown == nil {
		return nil, status.Error(codes.Unimplemented, "pushdown is not served by this node")
	}
	ns, err := s.namespace(p.GetNamespace())
	if err != nil {
		return nil, err
	}
	if !ns.Index {
		return nil, status.Errorf(codes.InvalidArgument, "namespace %q is not indexed: queries by label need index: true", p.GetNamespace())
	}
	if len(p.GetShards()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "pushdown: no shards asked for")
	}
	req, err := requestFromPB(p)
	if err != nil {
		return nil, err
	}
	check := newShardCheck(s.own, OpRead, s.db.NumShards())
	for _, sh := range p.GetShards() {
		check.allowed(sh)
	}
	if err := check.err(ctx); err != nil {
		return nil, err
	}
	if len(p.GetParts()) > 0 && s.opts.PushdownParts != nil {
		return s.pushdownParts(ctx, p, req, check)
	}
	// Every shard asked was allowed: the check's bitset of the shards it
	// saw is the filter (a map of a third of 4096 shards was a fifth of
	// a small query's cost on a replica).
	res, err := s.opts.Pushdown(ctx, req, check.seen)
	if err != nil {
		return s.pushdownFailed(ctx, err)
	}
	resp, err := resultToPB(res, req.Agg == query.AggNone, streams{sums: p.GetSumStreams(), comps: p.GetCompStreams(), counts: p.GetCountStreams()})
	if err != nil {
		return nil, s.fail("Pushdown", "encode", err)
	}
	return s.pushdownAnswer(resp)
}

// pushdownFailed is the answer to an evaluation that failed: declined,
// cancelled or an error.
func (s *Server) pushdownFailed(ctx context.Context, err error) (*nodepb.PushdownResponse, error) {
	switch {
	case errors.Is(err, query.ErrDeclined):
		return &nodepb.PushdownResponse{Declined: true}, nil
	case ctx.Err() != nil:
		return nil, ctxStatus(ctx.Err())
	}
	return nil, s.fail("Pushdown", "evaluate", err)
}

// pushdownParts answers a request of several parts: the first part's
// shards (first, already checked) and digest_only are the request's own,
// the others in p.parts; each part is answered apart, from one read.
func (s *Server) pushdownParts(ctx context.Context, p *nodepb.PushdownRequest, req *query.Request, first *shardCheck) (*nodepb.PushdownResponse, error) {
	parts := make([]Part, 1+len(p.GetParts()))
	parts[0] = Part{Shards: first.seen, DigestOnly: req.DigestOnly}
	for i, pp := range p.GetParts() {
		if len(pp.GetShards()) == 0 {
			return nil, status.Errorf(codes.InvalidArgument, "pushdown: part %d asks no shards", i+1)
		}
		check := newShardCheck(s.own, OpRead, s.db.NumShards())
		for _, sh := range pp.GetShards() {
			check.allowed(sh)
		}
		if err := check.err(ctx); err != nil {
			return nil, err
		}
		parts[i+1] = Part{Shards: check.seen, DigestOnly: pp.GetDigestOnly()}
	}
	res, err := s.opts.PushdownParts(ctx, req, parts)
	if err == nil && len(res) != len(parts) {
		err = fmt.Errorf("%d answers to %d parts", len(res), len(parts))
	}
	if err != nil {
		return s.pushdownFailed(ctx, err)
	}
	var resp *nodepb.PushdownResponse
	for i, r := range res {
		pr, err := resultToPB(r, req.Agg == query.AggNone, streams{sums: p.GetSumStreams(), comps: p.GetCompStreams(), counts: p.GetCountStreams()})
		if err != nil {
			return nil, s.fail("Pushdown", "encode", err)
		}
		if i == 0 {
			resp = pr
		} else {
			resp.Parts = append(resp.Parts, pr)
		}
	}
	return s.pushdownAnswer(resp)
}

// pushdownAnswer is resp, or ResourceExhausted past the message limit.
func (s *Server) pushdownAnswer(resp *nodepb.PushdownResponse) (*nodepb.PushdownResponse, error) {
	if n := proto.Size(resp); n > s.opts.MaxMsgSize {
		return nil, status.Errorf(codes.ResourceExhausted, "pushdown answer of %d bytes exceeds the %d byte message limit", n, s.opts.MaxMsgSize)
	}
	return resp, nil
}

// maxCandidates bounds a request's topk/bottomk candidates per group and
// step (the planner asks at most promapi's limit).
const maxCandidates = 1 << 20

// requestFromPB is the request on the wire as a query.Request; a request
// no evaluator can compute is the caller's mistake (InvalidArgument).
func requestFromPB(p *nodepb.PushdownRequest) (*query.Request, error) {
	ms, err := toMatchers(matchersFromPB(p.GetMatchers()))
	if err != nil {
		return nil, err
	}
	if p.GetFunc() > 255 || p.GetAgg() > 255 || p.GetK() < 0 || p.GetK() > maxCandidates {
		return nil, status.Errorf(codes.InvalidArgument, "pushdown: function %d, aggregation %d", p.GetFunc(), p.GetAgg())
	}
	req := &query.Request{Namespace: p.GetNamespace(), Matchers: ms,
		Steps: query.Steps{Start: p.GetStart(), End: p.GetEnd(), Step: p.GetStep(), Lookback: p.GetLookback()},
		Pushdown: query.Pushdown{Func: query.Func(p.GetFunc()), Range: time.Duration(p.GetRange()) * time.Millisecond,
			Agg: query.Agg(p.GetAgg()), Grouping: p.GetGrouping(), K: int(p.GetK()), Bottom: p.GetBottom(),
			ValueLabel: p.GetValueLabel()},
		DigestOnly: p.GetDigestOnly()}
	if err := req.Validate(); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	return req, nil
}

func requestToPB(req *query.Request, shards []uint32) *nodepb.PushdownRequest {
	ms := make([]Matcher, len(req.Matchers))
	for i, m := range req.Matchers {
		ms[i] = Matcher{Type: uint8(m.Type), Name: m.Name, Value: m.Value}
	}
	return &nodepb.PushdownRequest{Namespace: req.Namespace, Matchers: matchersToPB(ms), Shards: shards,
		Start: req.Steps.Start, End: req.Steps.End, Step: req.Steps.Step, Lookback: req.Steps.Lookback,
		Func: uint32(req.Func), Range: req.Range.Milliseconds(), Agg: uint32(req.Agg), Grouping: req.Grouping,
		DigestOnly: req.DigestOnly, K: int64(req.K), Bottom: req.Bottom, ValueLabel: req.ValueLabel,
		SumStreams: true, CompStreams: true, CountStreams: true}
}

// resultToPB is r on the wire. perSeries (a request without an
// aggregation: each group one series) sends each series' step values as
// an encoded stream (values) instead of counts and sums: a gauge that
// holds its value costs a few bits a step instead of nine bytes, and no
// step values are bigger on the wire than the samples they came from by
// more than the stream's coding. Only a coordinator that asks without an
// aggregation reads such an answer. sumStreams (the requester asked for
// them) sends an aggregation's sums as such a stream too (sums), at the
// steps with a count. compStreams (asked for likewise) sends the Kahan
// compensations as such a stream (comps), the steps whose compensation
// is +0 left out.
// st.counts likewise sends the counts (counts), the steps whose count is
// 0 left out.
func resultToPB(r *query.Result, perSeries bool, st streams) (*nodepb.PushdownResponse, error) {
	sumStreams, compStreams := st.sums, st.comps
	resp := &nodepb.PushdownResponse{Series: int64(r.Series), NonCounters: r.NonCounters, Warnings: r.Warnings,
		Digest: r.Digest, DigestOnly: r.DigestOnly, Groups: make([]*nodepb.PushdownGroup, len(r.Groups))}
	var enc encoding.Encoder
	for i, g := range r.Groups {
		pg := &nodepb.PushdownGroup{}
		if perSeries {
			enc.Reset()
			for k, n := range g.Count {
				if n == 0 {
					continue
				}
				if err := enc.Append(int64(k), g.Sum[k]); err != nil {
					return nil, fmt.Errorf("encode the step values of %s: %w", g.Labels, err)
				}
			}
			pg.Values = slices.Clone(enc.Bytes())
		} else {
			if sumStreams && g.Sum != nil {
				enc.Reset()
				for k, n := range g.Count {
					if n == 0 {
						continue
					}
					if err := enc.Append(int64(k), g.Sum[k]); err != nil {
						return nil, fmt.Errorf("encode the sums of %s: %w", g.Labels, err)
					}
				}
				pg.Sums = slices.Clone(enc.Bytes())
			} else {
				pg.Sum = g.Sum
			}
			if st.counts {
				enc.Reset()
				for k, n := range g.Count {
					if n == 0 {
						continue
					}
					if err := enc.Append(int64(k), n); err != nil {
						return nil, fmt.Errorf("encode the counts of %s: %w", g.Labels, err)
					}
				}
				if enc.Len() > 0 {
					pg.Counts = slices.Clone(enc.Bytes())
				}
			}
			if pg.Counts == nil {
				pg.Count = make([]uint64, len(g.Count))
				for k, n := range g.Count {
					pg.Count[k] = uint64(n) // whole numbers of series
				}
			}
			switch {
			case compStreams:
				enc.Reset()
				for k, c := range g.Comp {
					if math.Float64bits(c) == 0 {
						continue // +0; a -0 is kept, bit for bit
					}
					if err := enc.Append(int64(k), c); err != nil {
						return nil, fmt.Errorf("encode the compensations of %s: %w", g.Labels, err)
					}
				}
				if len(g.Comp) > 0 && enc.Len() > 0 {
					pg.Comps = slices.Clone(enc.Bytes())
				}
			case slices.ContainsFunc(g.Comp, func(c float64) bool { return c != 0 }):
				pg.Comp = g.Comp
			}
		}
		g.Labels.Range(func(l labels.Label) {
			pg.LabelNames = append(pg.LabelNames, l.Name)
			pg.LabelValues = append(pg.LabelValues, l.Value)
		})
		resp.Groups[i] = pg
	}
	return resp, nil
}

// resultFromPB is a node's answer as a query.Result for a request of
// steps steps; a malformed one is an error naming the node's mistake.
func resultFromPB(p *nodepb.PushdownResponse, steps int) (*query.Result, error) {
	r := &query.Result{Steps: steps, Series: int(p.GetSeries()), NonCounters: p.GetNonCounters(),
		Warnings: p.GetWarnings(), Digest: p.GetDigest(), DigestOnly: p.GetDigestOnly(), Groups: make([]query.Partial, len(p.GetGroups()))}
	for i, g := range p.GetGroups() {
		if len(g.GetLabelNames()) != len(g.GetLabelValues()) {
			return nil, fmt.Errorf("pushdown answer: group %d has %d label names and %d values", i, len(g.GetLabelNames()), len(g.GetLabelValues()))
		}
		b := labels.NewScratchBuilder(len(g.GetLabelNames()))
		for k, n := range g.GetLabelNames() {
			b.Add(n, g.GetLabelValues()[k])
		}
		b.Sort()
		count := make([]float64, len(g.GetCount()))
		for k, n := range g.GetCount() {
			count[k] = float64(n)
		}
		if len(g.GetCounts()) > 0 {
			var err error
			if count, err = decodeCounts(g.GetCounts(), steps); err != nil {
				return nil, fmt.Errorf("pushdown answer: group %d: %w", i, err)
			}
		}
		sum, comp := g.GetSum(), g.GetComp()
		if len(g.GetSums()) > 0 {
			var err error
			if sum, err = decodeSums(g.GetSums(), len(count)); err != nil {
				return nil, fmt.Errorf("pushdown answer: group %d: %w", i, err)
			}
		}
		if len(g.GetComps()) > 0 && len(sum) > 0 {
			var err error
			if comp, err = decodeSums(g.GetComps(), len(sum)); err != nil {
				return nil, fmt.Errorf("pushdown answer: group %d: compensations: %w", i, err)
			}
		}
		switch {
		case len(sum) == 0:
			sum, comp = nil, nil
		case len(comp) == 0:
			comp = make([]float64, len(sum)) // left out: zero at every step
		}
		if len(g.GetValues()) > 0 {
			// One series' step values (resultToPB, perSeries).
			var err error
			if count, sum, comp, err = decodeSteps(g.GetValues(), steps); err != nil {
				return nil, fmt.Errorf("pushdown answer: group %d: %w", i, err)
			}
		}
		r.Groups[i] = query.Partial{Labels: b.Labels(), Count: count, Sum: sum, Comp: comp}
		if len(r.Groups[i].Count) != steps || (sum != nil && (len(sum) != steps || len(comp) != steps)) {
			return nil, fmt.Errorf("pushdown answer: group %d has %d counts and %d sums for %d steps", i, len(g.GetCount()), len(sum), steps)
		}
	}
	return r, nil
}

// decodeSums reads a group's sums (resultToPB, sumStreams) for steps
// steps: 0 at the steps left out (their count is 0).
func decodeSums(stream []byte, steps int) ([]float64, error) {
	sum := make([]float64, steps)
	it := encoding.NewIterator(stream)
	for it.Next() {
		k, v := it.At()
		if k < 0 || k >= int64(steps) {
			return nil, fmt.Errorf("sum at step %d of %d", k, steps)
		}
		sum[k] = v
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("decode sums: %w", err)
	}
	return sum, nil
}

// streams says which of a group's per-step arrays the requester reads as
// streams (PushdownRequest sum_streams, comp_streams, count_streams).
type streams struct{ sums, comps, counts bool }

// decodeCounts reads a group's counts (resultToPB, countStreams) for
// steps steps: 0 at the steps left out; each a whole number of series.
func decodeCounts(stream []byte, steps int) ([]float64, error) {
	count := make([]float64, steps)
	it := encoding.NewIterator(stream)
	for it.Next() {
		k, v := it.At()
		if k < 0 || k >= int64(steps) {
			return nil, fmt.Errorf("count at step %d of %d", k, steps)
		}
		if !(v >= 0) || v != math.Trunc(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("count %v at step %d", v, k)
		}
		count[k] = v
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("decode counts: %w", err)
	}
	return count, nil
}

// decodeSteps reads a series' step values (resultToPB, perSeries) as a
// Partial's counts, sums and compensations for steps steps.
func decodeSteps(stream []byte, steps int) (count, sum, comp []float64, err error) {
	count, sum, comp = make([]float64, steps), make([]float64, steps), make([]float64, steps)
	it := encoding.NewIterator(stream)
	for it.Next() {
		k, v := it.At()
		if k < 0 || k >= int64(steps) {
			return nil, nil, nil, fmt.Errorf("step %d of %d", k, steps)
		}
		count[k], sum[k] = 1, v
	}
	if err := it.Err(); err != nil {
		return nil, nil, nil, fmt.Errorf("decode step values: %w", err)
	}
	return count, sum, comp, nil
}

// PushdownParts asks the node for req's partial aggregates over each of
// parts in one call (the node reads their series once), one result per
// part; req.DigestOnly is ignored for the parts' own. A node that
// predates parts answers the first part only: the others are then asked
// one call each. query.ErrDeclined declines every part.
func (c *Client) PushdownParts(ctx context.Context, req *query.Request, parts []PartRequest) ([]*query.Result, error) {
	if len(parts) == 0 {
		return nil, nil
	}
	r0 := *req
	r0.DigestOnly = parts[0].DigestOnly
	p := requestToPB(&r0, parts[0].Shards)
	for _, pt := range parts[1:] {
		p.Parts = append(p.Parts, &nodepb.PushdownPart{Shards: pt.Shards, DigestOnly: pt.DigestOnly})
	}
	resp := new(nodepb.PushdownResponse)
	if err := c.invoke(ctx, nodepb.Node_Pushdown_FullMethodName, p, resp); err != nil {
		return nil, err
	}
	if resp.GetDeclined() {
		return nil, query.ErrDeclined
	}
	out := make([]*query.Result, len(parts))
	answers := append([]*nodepb.PushdownResponse{resp}, resp.GetParts()...)
	if len(answers) != 1 && len(answers) != len(parts) {
		return nil, fmt.Errorf("%s: %d answers to %d parts", c.addr, len(answers), len(parts))
	}
	for i, a := range answers {
		parts := a.GetParts()
		a.Parts = nil // each part's bytes its own
		r, err := resultFromPB(a, req.Steps.Count())
		if err != nil {
			return nil, fmt.Errorf("%s: part %d: %w", c.addr, i, err)
		}
		r.WireBytes = proto.Size(a)
		a.Parts = parts
		out[i] = r
	}
	for i := len(answers); i < len(parts); i++ {
		// An older node answered the first part only.
		ri := *req
		ri.DigestOnly = parts[i].DigestOnly
		r, err := c.Pushdown(ctx, &ri, parts[i].Shards)
		if err != nil {
			return nil, err
		}
		out[i] = r
	}
	return out, nil
}

// Pushdown asks the node for req's partial aggregates over shards. It
// returns query.ErrDeclined when the node declines the request; an older
// node fails with Unimplemented (an *Error).
func (c *Client) Pushdown(ctx context.Context, req *query.Request, shards []uint32) (*query.Result, error) {
	resp := new(nodepb.PushdownResponse)
	if err := c.invoke(ctx, nodepb.Node_Pushdown_FullMethodName, requestToPB(req, shards), resp); err != nil {
		return nil, err
	}
	if resp.GetDeclined() {
		return nil, query.ErrDeclined
	}
	r, err := resultFromPB(resp, req.Steps.Count())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.addr, err)
	}
	r.WireBytes = proto.Size(resp)
	return r, nil
}
