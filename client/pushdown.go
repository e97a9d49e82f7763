package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/tessera-tsdb/tessera/dbnode/query"
	"github.com/tessera-tsdb/tessera/dbnode/rpc"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// pushPeer is a Peer that answers pushed-down requests: the node RPC
// client. A Peer without it (test fakes) is treated as a node older than
// pushdown.
type pushPeer interface {
	Pushdown(ctx context.Context, req *query.Request, shards []uint32) (*query.Result, error)
}

// partsPeer is a pushPeer that asks several parts in one call (the node
// RPC client).
type partsPeer interface {
	PushdownParts(ctx context.Context, req *query.Request, parts []rpc.PartRequest) ([]*query.Result, error)
}

// errNoPushdown stands for an owner that cannot answer a pushdown (an
// older node, a peer without the method): the read goes raw.
var errNoPushdown = status.Error(codes.Unimplemented, "pushdown not supported by this peer")

// Push answers req from the owners of every shard, computed where the
// data lives: every read group's shards are split in parts, one per
// readable owner (routing.parts), and each part is asked of as many of
// its owners as the read level needs, starting with a different owner per
// part, so that the owners compute over disjoint shards in parallel (this
// node its parts through Options.Evaluate, the others over RPC). Each
// answer is a part's partial aggregates; they are merged here. A part is
// hedged only once another answered and it took longer again (a part's
// time grows with its data: a fixed cluster.hedgeAfter would have a busy
// cluster compute every part on every owner).
//
// Where the level needs more than one owner, a part's answers' digests
// must agree (they read the same samples); a part whose owners disagree
// is read raw from its owners, merged as Query merges replicas, and
// computed here (Options.EvaluateReader), alone: the other parts keep
// their pushed-down answers. Push returns query.ErrDeclined, and the
// caller reads every shard raw (Query), when an owner declines or
// predates pushdown, or a disagreeing part cannot be computed here. A
// session without Evaluate, or whose placement is this node alone,
// declines before asking anyone.
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
	req = req.Wire() // group is asked as count, which every pushing node computes
	parts := s.routing(m).parts
	groups := make([]FanoutGroup, len(parts))
	for i, g := range parts {
		groups[i] = FanoutGroup{Owners: g.readable, Quorum: NewReadQuorum(g.owners, m.Placement.ReplicaFactor, s.opts.ReadLevel)}
	}
	answers, rep := Fanout(ctx, groups, FanoutOptions{Read: true, HedgeAfter: s.opts.HedgeAfter, HedgeAfterFirst: true,
		Timeout: s.opts.RequestTimeout, Down: s.down(m)},
		func(ctx context.Context, inst string, gs []int) ([]*query.Result, error) {
			return s.pushHost(ctx, m, parts, inst, gs, req)
		})
	if !rep.OK {
		for _, g := range rep.Groups {
			for _, f := range g.Failed {
				if errors.Is(f.Err, query.ErrDeclined) || status.Code(f.Err) == codes.Unimplemented ||
					(req.Agg.Newer() && status.Code(f.Err) == codes.InvalidArgument) {
					// A node that predates pushdown, or (InvalidArgument) one
					// that predates this kind of request.
					return nil, query.ErrDeclined
				}
			}
		}
		s.m.readFail.Inc(1)
		return nil, s.failure(fmt.Sprintf("read consistency %s not met", s.opts.ReadLevel), "answered", m, &routing{groups: parts}, nil, groups, rep)
	}
	if rep.Hedged > 0 {
		s.m.hedged.Inc(1)
	}
	byPart := make([][]*query.Result, len(parts))
	for _, a := range answers {
		for k, pi := range a.Groups {
			byPart[pi] = append(byPart[pi], a.Value[k])
		}
	}
	out := &query.Result{Steps: req.Steps.Count()}
	var disagree []routeGroup
	for pi, rs := range byPart {
		if len(rs) == 0 {
			continue
		}
		full := slices.IndexFunc(rs, func(o *query.Result) bool { return !o.DigestOnly })
		if slices.ContainsFunc(rs[1:], func(o *query.Result) bool { return o.Digest != rs[0].Digest }) || full < 0 {
			// The replicas disagree, or the owner asked in full failed
			// and only digests came: the part is read raw.
			if full >= 0 {
				s.m.pushDisagree.Inc(1)
			}
			disagree = append(disagree, parts[pi])
			continue
		}
		if err := out.MergeFor(req.Agg, rs[full]); err != nil {
			return nil, err
		}
	}
	if len(disagree) > 0 {
		res, err := s.pushRaw(ctx, m, disagree, req)
		if err != nil {
			return nil, err
		}
		if err := out.MergeFor(req.Agg, res); err != nil {
			return nil, err
		}
	}
	s.m.readOK.Inc(1)
	s.m.pushed.Inc(1)
	return out, nil
}

// pushRaw computes req here over the raw series of the parts whose owners
// disagreed, read and merged at the read level as Query reads them; it
// declines when the session cannot compute over raw series.
func (s *Session) pushRaw(ctx context.Context, m *Map, parts []routeGroup, req *query.Request) (*query.Result, error) {
	if s.opts.EvaluateReader == nil {
		return nil, query.ErrDeclined
	}
	return s.opts.EvaluateReader(ctx, setsReader{s: s, m: m, sets: parts}, req)
}

// setsReader reads some parts' shards raw through the session.
type setsReader struct {
	s    *Session
	m    *Map
	sets []routeGroup
}

func (r setsReader) Query(ctx context.Context, ns string, ms []*labels.Matcher, start, end int64) ([]storage.SeriesIterator, error) {
	return r.s.readSets(ctx, r.m, r.sets, ns, ms, start, end)
}

func (r setsReader) LabelNames(ctx context.Context, ns string, ms []*labels.Matcher, start, end int64) ([]string, error) {
	return r.s.LabelNames(ctx, ns, ms, start, end)
}

func (r setsReader) LabelValues(ctx context.Context, ns, name string, ms []*labels.Matcher, start, end int64) ([]string, error) {
	return r.s.LabelValues(ctx, ns, name, ms, start, end)
}

// pushHost asks one owner for req over the shards of each part in gs, one
// answer per part (so that each part's replicas can be compared): all in
// one call where the owner computes several parts from one read of their
// series (this node's EvaluateParts, a node's PushdownParts), else the
// parts concurrently.
func (s *Session) pushHost(ctx context.Context, m *Map, parts []routeGroup, inst string, gs []int, req *query.Request) ([]*query.Result, error) {
	out := make([]*query.Result, len(gs))
	var ask func(ctx context.Context, pi int) (*query.Result, error)
	if inst == s.opts.LocalID && s.opts.Local != nil {
		if len(gs) > 1 && s.opts.EvaluateParts != nil {
			ps := make([]rpc.Part, len(gs))
			for k, pi := range gs {
				ps[k] = rpc.Part{Shards: shardSet(m, parts, []int{pi})} // in full: it costs no bytes
			}
			return s.opts.EvaluateParts(ctx, req, ps)
		}
		ask = func(ctx context.Context, pi int) (*query.Result, error) {
			return s.opts.Evaluate(ctx, req, shardSet(m, parts, []int{pi})) // in full: it costs no bytes
		}
	} else {
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
		ctx = gctx
		need, down := s.opts.ReadLevel.required(m.Placement.ReplicaFactor), s.down(m)
		if mp, ok := h.peer.(partsPeer); ok && len(gs) > 1 {
			ps := make([]rpc.PartRequest, len(gs))
			for k, pi := range gs {
				ps[k] = rpc.PartRequest{Shards: parts[pi].shards, DigestOnly: need > 1 && inst != s.fullOwner(parts[pi], need, down)}
			}
			res, err := mp.PushdownParts(ctx, req, ps)
			if err != nil {
				if errors.Is(err, query.ErrDeclined) {
					return nil, err
				}
				return nil, callErr(ctx, err)
			}
			for _, r := range res {
				s.m.readBytes.Inc(int64(resultBytes(r, req.Agg == query.AggNone)))
			}
			return res, nil
		}
		ask = func(ctx context.Context, pi int) (*query.Result, error) {
			req := req
			if need > 1 && inst != s.fullOwner(parts[pi], need, down) {
				r := *req
				r.DigestOnly = true
				req = &r
			}
			res, err := pp.Pushdown(ctx, req, parts[pi].shards)
			if err != nil {
				if errors.Is(err, query.ErrDeclined) {
					return nil, err
				}
				return nil, callErr(ctx, err)
			}
			s.m.readBytes.Inc(int64(resultBytes(res, req.Agg == query.AggNone)))
			return res, nil
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, len(gs))
	var wg sync.WaitGroup
	for k, pi := range gs {
		wg.Go(func() {
			out[k], errs[k] = ask(ctx, pi)
			if errs[k] != nil {
				cancel() // the owner failed these parts: the others are moot
			}
		})
	}
	wg.Wait()
	// The first failure is the owner's; a sibling's cancellation is not.
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return nil, err
		}
	}
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// fullOwner is the owner of part whose answer is used in full, where the
// read level asks need > 1 owners of it: this node when it is among the
// first need owners asked (its answer crosses no network), else the first.
// The others answer only their digest (Request.DigestOnly), compared with
// the full answer's: the part's values cross the network once at most,
// not once per replica asked.
// Hosts known down are passed over, as Fanout asks them last.
func (s *Session) fullOwner(part routeGroup, need int, down func(string) bool) string {
	order := make([]string, 0, len(part.readable))
	for _, o := range part.readable {
		if !down(o.InstanceID) {
			order = append(order, o.InstanceID)
		}
	}
	for _, o := range part.readable {
		if down(o.InstanceID) {
			order = append(order, o.InstanceID)
		}
	}
	for _, id := range order[:min(need, len(order))] {
		if id == s.opts.LocalID && s.opts.Local != nil {
			return id
		}
	}
	return order[0]
}

// resultBytes is what a pushdown answer carried on the wire: as the RPC
// client measured it, else about (rpc.resultToPB): its groups' labels, a varint count per step (one byte
// for fewer than 128 series; none for a series' values, perSeries), the
// sums and any non-zero compensations.
func resultBytes(r *query.Result, perSeries bool) int {
	if r.WireBytes > 0 {
		return r.WireBytes // measured by the RPC client
	}
	n := 8
	for _, g := range r.Groups {
		n += int(g.Labels.ByteSize()) + 8*len(g.Sum)
		if !perSeries {
			n += len(g.Count)
		}
		if slices.ContainsFunc(g.Comp, func(c float64) bool { return c != 0 }) {
			n += 8 * len(g.Comp)
		}
	}
	return n
}
