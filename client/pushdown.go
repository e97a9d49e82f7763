package client

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/tessera-tsdb/tessera/dbnode/query"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// pushPeer is a Peer that answers pushed-down requests: the node RPC
// client. A Peer without it (test fakes) is treated as a node older than
// pushdown.
type pushPeer interface {
	Pushdown(ctx context.Context, req *query.Request, shards []uint32) (*query.Result, error)
}

// errNoPushdown stands for an owner that cannot answer a pushdown (an
// older node, a peer without the method): the read goes raw.
var errNoPushdown = status.Error(codes.Unimplemented, "pushdown not supported by this peer")

// Push answers req from the owners of every shard: per read group, as
// many readable owners as the read level needs each compute the request
// over the group's shards where the data lives (this node through
// Options.Evaluate, the others over RPC) and answer the groups' partial
// aggregates, which are merged here. Where the level needs more than one
// owner, their answers' digests must agree (they read the same samples);
// otherwise, or when any owner declines or predates pushdown, Push
// returns query.ErrDeclined and the caller reads raw series (Query),
// whose merge reconciles the replicas. A session without Evaluate, or
// whose placement is this node alone, declines before asking anyone.
func (s *Session) Push(ctx context.Context, req *query.Request) (*query.Result, error) {
	if s.opts.Evaluate == nil {
		return nil, query.ErrDeclined
	}
	m := s.opts.Topology.Get()
	if m == nil {
		return nil, ErrNoPlacement
	}
	if m.Sole != "" && m.Sole == s.opts.LocalID && s.opts.Local != nil {
		return nil, query.ErrDeclined // the raw read is local already
	}
	r := s.routing(m)
	groups := make([]FanoutGroup, len(r.groups))
	for i, g := range r.groups {
		groups[i] = FanoutGroup{Owners: g.readable, Quorum: NewReadQuorum(g.owners, m.Placement.ReplicaFactor, s.opts.ReadLevel)}
	}
	answers, rep := Fanout(ctx, groups, FanoutOptions{Read: true, HedgeAfter: s.opts.HedgeAfter,
		Timeout: s.opts.RequestTimeout, Down: s.down(m)},
		func(ctx context.Context, inst string, gs []int) ([]*query.Result, error) {
			return s.pushHost(ctx, m, r, inst, gs, req)
		})
	if !rep.OK {
		for _, g := range rep.Groups {
			for _, f := range g.Failed {
				if errors.Is(f.Err, query.ErrDeclined) || status.Code(f.Err) == codes.Unimplemented {
					return nil, query.ErrDeclined
				}
			}
		}
		s.m.readFail.Inc(1)
		return nil, s.failure(fmt.Sprintf("read consistency %s not met", s.opts.ReadLevel), "answered", m, r, nil, groups, rep)
	}
	if rep.Hedged > 0 {
		s.m.hedged.Inc(1)
	}
	byGroup := make([][]*query.Result, len(r.groups))
	for _, a := range answers {
		for k, gi := range a.Groups {
			byGroup[gi] = append(byGroup[gi], a.Value[k])
		}
	}
	out := &query.Result{Steps: req.Steps.Count()}
	for _, rs := range byGroup {
		if len(rs) == 0 {
			continue
		}
		for _, o := range rs[1:] {
			if o.Digest != rs[0].Digest {
				s.m.pushDisagree.Inc(1)
				return nil, query.ErrDeclined // the raw read merges them
			}
		}
		if err := out.Merge(rs[0]); err != nil {
			return nil, err
		}
	}
	s.m.readOK.Inc(1)
	s.m.pushed.Inc(1)
	return out, nil
}

// pushHost asks one owner for req over the shards of each group in gs,
// one answer per group (so that each group's replicas can be compared).
func (s *Session) pushHost(ctx context.Context, m *Map, r *routing, inst string, gs []int, req *query.Request) ([]*query.Result, error) {
	out := make([]*query.Result, len(gs))
	if inst == s.opts.LocalID && s.opts.Local != nil {
		for k, gi := range gs {
			want := make(map[uint32]bool, len(r.groups[gi].shards))
			for _, sh := range r.groups[gi].shards {
				want[sh] = true
			}
			res, err := s.opts.Evaluate(ctx, req, func(sh uint32) bool { return want[sh] })
			if err != nil {
				return nil, err
			}
			out[k] = res
		}
		return out, nil
	}
	h, err := s.host(inst, m.Endpoints[inst])
	if err != nil {
		return nil, err
	}
	pp, ok := h.peer.(pushPeer)
	if !ok {
		return nil, errNoPushdown
	}
	gctx, cancel, err := h.health.guard(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	for k, gi := range gs {
		res, err := pp.Pushdown(gctx, req, r.groups[gi].shards)
		if err != nil {
			if errors.Is(err, query.ErrDeclined) {
				return nil, err
			}
			return nil, callErr(gctx, err)
		}
		out[k] = res
		s.m.readBytes.Inc(int64(resultBytes(res)))
	}
	return out, nil
}

// resultBytes is about what a pushdown answer carried on the wire
// (rpc.resultToPB): its groups' labels, a varint count per step (one byte
// for fewer than 128 series), the sums and any non-zero compensations.
func resultBytes(r *query.Result) int {
	n := 8
	for _, g := range r.Groups {
		n += int(g.Labels.ByteSize()) + len(g.Count) + 8*len(g.Sum)
		if slices.ContainsFunc(g.Comp, func(c float64) bool { return c != 0 }) {
			n += 8 * len(g.Comp)
		}
	}
	return n
}
