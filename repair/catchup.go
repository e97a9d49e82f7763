package repair

import (
	"context"
	"slices"
)

// CatchUp compares the given shards (those this node holds AVAILABLE in
// the newest placement) with their other AVAILABLE owners up to now, not
// up to a pass's settled cutoff, and pulls what this node lacks. A node
// that just bootstrapped a shard runs it a while after the mark-available
// CAS: the shard's unflushed data came from one peer (the LEAVING source
// first), so an acknowledged write that peer never got (its replica
// failed and was hinted, or a coordinator routing by the placement before
// the move sent it there after the stream read that peer's memory) is
// still on the other owners that acknowledged it, and is pulled from them
// here instead of waiting for the periodic pass to reach the sample's
// block once it settles. Rollup namespaces are left to the periodic pass
// (their windows settle later than raw's). Nothing is written to the
// pass state; the tally is returned and counted in the metrics.
func (r *Repairer) CatchUp(ctx context.Context, shards []uint32) Tally {
	var total Tally
	m := r.opts.Placement()
	if m == nil || len(shards) == 0 {
		return total
	}
	want := slices.Clone(shards)
	slices.Sort(want)
	now := r.opts.Now()
	for _, t := range r.targets(m) {
		if ctx.Err() != nil {
			break
		}
		if t.ns.RollupOf != "" || len(t.peers) == 0 {
			continue
		}
		if _, ok := slices.BinarySearch(want, t.shard); !ok {
			continue
		}
		lo, _ := Window(t.ns, now, 0)
		hi := now.Add(t.ns.BufferFuture).UnixMilli() + 1
		res := r.repairShard(ctx, t, lo, hi)
		total.add(res.Tally)
		if res.Error != "" {
			r.opts.Logger.Warn("catch-up shard", "namespace", t.ns.Name, "shard", t.shard, "err", res.Error)
		}
	}
	r.m.catchUpShards.Inc(int64(len(want)))
	r.m.catchUpSamples.Inc(total.SamplesRepaired)
	r.m.add(total)
	return total
}
