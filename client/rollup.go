package client

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/tessera-tsdb/tessera/dbnode/rollup"
	"github.com/tessera-tsdb/tessera/dbnode/rpc"
	"github.com/tessera-tsdb/tessera/dbnode/storage"
)

// LocalRollups is what a Local that holds rollup namespaces also has
// (storage.Database does): the session reads this node's shards of a
// rollup from it without a network hop.
type LocalRollups interface {
	QueryRollup(ctx context.Context, ns string, ms []*labels.Matcher, start, end int64, qo storage.QueryOptions) ([]storage.RollupSeries, error)
}

// errOldRollupReader: a node answered a rollup read with samples, not
// windows (it predates FetchTaggedRequest.RollupWindows).
var errOldRollupReader = errors.New("the node does not read rollup windows over RPC (older version)")

// QueryRollup reads the windows ending in [start, end] of the series of
// rollup namespace ns matching ms from the owners of every shard, at the
// read level, as Query reads raw series: replicas' windows are merged by
// End (storage.MergeRollupReplicas), so a replica that missed samples
// does not hide the fuller one's windows.
func (s *Session) QueryRollup(ctx context.Context, ns string, ms []*labels.Matcher, start, end int64) ([]storage.RollupSeries, error) {
	m := s.opts.Topology.Get()
	if m == nil {
		return nil, ErrNoPlacement
	}
	if lr, ok := s.opts.Local.(LocalRollups); ok && m.Sole != "" && m.Sole == s.opts.LocalID {
		return lr.QueryRollup(ctx, ns, ms, start, end, storage.QueryOptions{})
	}
	sets := s.routing(m).groups
	answers, err := readAtLevel(ctx, s, m, sets,
		func(ctx context.Context, inst string, gs []int) ([]storage.RollupSeries, error) {
			return s.readRollupHost(ctx, m, sets, ns, inst, gs, ms, start, end)
		})
	if err != nil {
		return nil, err
	}
	acc := map[string]int{}
	var out []storage.RollupSeries
	for _, a := range answers {
		for _, rs := range a.Value {
			if i, ok := acc[string(rs.ID)]; ok {
				out[i] = storage.MergeRollupReplicas(out[i], rs)
				continue
			}
			acc[string(rs.ID)] = len(out)
			out = append(out, rs)
		}
	}
	sort.Slice(out, func(i, j int) bool { return string(out[i].ID) < string(out[j].ID) })
	s.m.readOK.Inc(1)
	return out, nil
}

// readRollupHost reads the rollup windows of shard sets gs from one owner.
func (s *Session) readRollupHost(ctx context.Context, m *Map, sets []routeGroup, ns, inst string, gs []int, ms []*labels.Matcher, start, end int64) ([]storage.RollupSeries, error) {
	if inst == s.opts.LocalID {
		if lr, ok := s.opts.Local.(LocalRollups); ok {
			return lr.QueryRollup(ctx, ns, ms, start, end, storage.QueryOptions{Shards: shardSet(m, sets, gs)})
		}
	}
	resp, err := s.fetchTagged(ctx, m, sets, inst, gs, ms, &rpc.FetchTaggedRequest{Namespace: ns, Start: start, End: end, AcceptHistograms: true, RollupWindows: true})
	if err != nil {
		return nil, err
	}
	out := make([]storage.RollupSeries, 0, len(resp.Series))
	var n int
	for _, ser := range resp.Series {
		n += len(ser.ID) + len(ser.Rollup)
		if len(ser.Rollup) == 0 {
			if len(ser.Stream) > 0 || len(ser.Histograms) > 0 {
				return nil, fmt.Errorf("rollup namespace %s from %s: %w", ns, inst, errOldRollupReader)
			}
			continue
		}
		res, ws, hs, err := rollup.DecodePayload(ser.Rollup)
		if err != nil {
			return nil, fmt.Errorf("rollup namespace %s from %s: series %q: %w", ns, inst, ser.ID, err)
		}
		if len(hs) == 0 {
			hs = nil
		}
		out = append(out, storage.RollupSeries{ID: ser.ID, Shard: ser.Shard, Resolution: res, Windows: ws, HWindows: hs})
	}
	s.m.readBytes.Inc(int64(n))
	return out, nil
}
